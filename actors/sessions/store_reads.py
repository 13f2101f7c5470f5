"""What a session shard on a worker host answers about its host's database (``StoreRead``): the leader's admin CLI
(`sessions list|show|search` and `deliveries` show every host's conversations and replies, not only the leader's),
the web chat adapter (the history a reloaded page shows of a chat that lives here) and the terminal adapter (whether
a line it forwarded here has been answered).

Read-only by construction: only the queries named in READS run, each a function that reads (storage/cli.py's,
``conversation`` and ``message_outcome``). The asker passed the peer check every actor port makes (the gateway's own
user, docs/security.md). Runs on the shard's actor thread; the query goes through the shard's ``db`` like any storage
call of its own.
"""
from __future__ import annotations

from typing import Callable

from actors.messages import StoreRead, StoreReadResult
from storage import InboundItem, StorageError
from storage import cli as storage_cli
from storage.inbox import PENDING_STATES

MAX_EVENTS = 500   # the most a conversation read returns: a bound on one answer's size


async def keys_with_work(store) -> list[str]:
    """The keys whose session has something to do: rows waiting, a tool's question past its deadline, a turn to
    resume (what a shard starts at its start, or when it takes a partition over: partitions.py)."""
    keys = set(await store.inbox.sessions_with_pending()) | set(await store.approvals.sessions_due())
    for state in await store.sessions.pending_resumes():
        info = await store.sessions.get(state.session_id)
        if info is not None:
            keys.add(info.session_key)
    return sorted(keys)


async def store_forwarded(store, rows) -> dict[str, int]:
    """Rows an adapter on another host committed for keys of this shard (``StoreInbound``), committed here
    (deduplicated): each key with a new row and its newest such row. Committed before the shard answers: kill -9
    before it, and the adapter's host still holds every row (received) and sends them again; after it, a second
    StoreInbound of the same rows meets the dedup (inserted=False)."""
    items = [InboundItem(key, platform, message_id, payload) for _seq, key, platform, message_id, payload in rows]
    latest: dict[str, int] = {}
    for item, (seq, inserted) in zip(items, await store.inbox.put_many(items)):
        if inserted:
            latest[item.session_key] = seq
    return latest


async def conversation(store, session_key: str, last_n: int) -> dict:
    """A chat's last ``last_n`` transcript events and its messages still waiting in the inbox (records, not JSON:
    for an adapter, which draws them as it draws its own host's)."""
    info = await store.sessions.current(session_key)
    events = await store.sessions.load(info.session_id, last_n=min(int(last_n), MAX_EVENTS)) if info else []
    return {"events": events, "waiting": await store.inbox.rows_in_state(session_key, PENDING_STATES)}


async def message_outcome(store, platform: str, message_id: str, last_n: int) -> dict:
    """One platform message's inbox row here (None: not stored here) and its session's last ``last_n`` events:
    whether its turn is over, and how it ended (records, for the terminal adapter's done check)."""
    row = await store.inbox.by_message_id(platform, message_id)
    info = await store.sessions.current(row.session_key) if row is not None else None
    events = await store.sessions.load(info.session_id, last_n=min(int(last_n), MAX_EVENTS)) if info else []
    return {"row": row, "events": events}


READS = {"sessions_list": storage_cli.sessions_list, "session_show": storage_cli.session_show,
         "sessions_search": storage_cli.sessions_search, "deliveries": storage_cli.deliveries,
         "conversation": conversation, "message_outcome": message_outcome}


def answer(message: StoreRead, db: Callable, store, shard: str) -> StoreReadResult:
    read, token = READS.get(message.action), message.token
    if read is None:
        return StoreReadResult(shard, error=f"no such read: {message.action!r} (one of {', '.join(READS)})",
                               token=token)
    try:
        return StoreReadResult(shard, result=db(read(store, **dict(message.args))), token=token)
    except StorageError as exc:   # NotFound, AmbiguousId, a full disk: said, as the CLI says them for its own file
        return StoreReadResult(shard, error=str(exc), token=token)
    except (TypeError, ValueError) as exc:   # arguments the query does not take
        return StoreReadResult(shard, error=f"bad arguments for {message.action}: {exc}", token=token)
