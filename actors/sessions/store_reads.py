"""What a session shard on a worker host answers the leader's admin CLI about its host's database (``StoreRead``):
`sessions list|show|search` and `deliveries` show every host's conversations and replies, not only the leader's.

Read-only by construction: only the queries named in READS run, each a function of storage/cli.py that reads. The
asker passed the peer check every actor port makes (the gateway's own user, docs/security.md). Runs on the shard's
actor thread; the query goes through the shard's ``db`` like any storage call of its own.
"""
from __future__ import annotations

from typing import Callable

from actors.messages import StoreRead, StoreReadResult
from storage import StorageError
from storage import cli as storage_cli

READS = {"sessions_list": storage_cli.sessions_list, "session_show": storage_cli.session_show,
         "sessions_search": storage_cli.sessions_search, "deliveries": storage_cli.deliveries}


def answer(message: StoreRead, db: Callable, store, shard: str) -> StoreReadResult:
    read = READS.get(message.action)
    if read is None:
        return StoreReadResult(shard, error=f"no such read: {message.action!r} (one of {', '.join(READS)})")
    try:
        return StoreReadResult(shard, result=db(read(store, **dict(message.args))))
    except StorageError as exc:   # NotFound, AmbiguousId, a full disk: said, as the CLI says them for its own file
        return StoreReadResult(shard, error=str(exc))
    except TypeError as exc:      # arguments the query does not take
        return StoreReadResult(shard, error=f"bad arguments for {message.action}: {exc}")
