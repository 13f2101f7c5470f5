"""The inbox: durable inbound events per session key, the truth behind the actors' doorbells (docs/design.md §2.2-3).

States: received -> taken -> done; received|taken -> dropped (refused, with a reason); taken -> received only by
``requeue_taken`` after a crash. Every other move raises ``IllegalTransition``.

What survives kill -9: ``put`` returns after its COMMIT, and the adapter acknowledges the platform (offset, 2xx)
only after that, so every acknowledged event is on disk (G1). A replay of the same (platform, platform_message_id)
returns the existing seq with ``inserted=False`` and creates no second row (G2), also across processes and after a
restart. ``put_many_and_commit_offset`` writes a batch of events and the adapter's offset in one transaction: after
a crash either both are there or neither, so the platform redelivers exactly what is missing.

A row for a session whose shard runs on another host (docs/distribution.md) is committed here, on the host of the
adapter, with the offset that acknowledges it, and forwarded: the shard's host stores it in its own inbox with
``put_many`` (deduplicated the same way), and only once that host answered does the row here move to done with the
reason ``forwarded to <shard>`` (``forwarded``), which keeps its dedup as any done row does. Until then it stays
received, so a crash anywhere between the two commits forwards it again, and the other host's dedup makes that
harmless.

``platform_message_id`` must be unique per platform (e.g. Telegram: the update_id, or chat id + message id; message
ids alone repeat across chats). Dedup lasts as long as the row: ``purge`` of done rows ends it for those events.
"""
from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence, Union

from . import leases, records
from .db import Database, fetch_all, fetch_one
from .errors import IllegalTransition, NotFound
from .leases import Fence



class InboxState(enum.StrEnum):
    """A row's state (the transitions: the module docstring). str-valued: the values are what the ``state`` column
    holds (and its CHECK constraint, schema.py), so stored rows read the same; a row read back holds the plain
    string, which compares equal to its member."""
    RECEIVED = "received"
    TAKEN = "taken"
    DONE = "done"
    DROPPED = "dropped"


INBOX_STATES = tuple(s.value for s in InboxState)
FORWARDED = "forwarded to "    # the reason of a done row that another host's shard stored and answers (forwarded)
PENDING_STATES = (InboxState.RECEIVED.value, InboxState.TAKEN.value)
FINISHED_STATES = (InboxState.DONE.value, InboxState.DROPPED.value)
_COLUMNS = "seq, session_key, platform, platform_message_id, state, payload, received_at, updated_at, reason"


@dataclass(frozen=True)
class InboxRow:
    seq: int
    session_key: str
    platform: str
    platform_message_id: str
    state: str
    payload: Any
    received_at: float
    updated_at: float
    reason: Optional[str]


@dataclass(frozen=True)
class InboundItem:
    """One event for ``put_many_and_commit_offset`` (a 4-tuple in this order works too)."""
    session_key: str
    platform: str
    platform_message_id: str
    payload: Any


def _row(r: tuple) -> InboxRow:
    return InboxRow(r[0], r[1], r[2], r[3], r[4], records.unpack(r[5]), r[6], r[7], r[8])


def _prepare(item: Union[InboundItem, Sequence]) -> tuple:
    key, platform, message_id, payload = (
        (item.session_key, item.platform, item.platform_message_id, item.payload)
        if isinstance(item, InboundItem) else item)
    if not isinstance(key, str) or not key or not isinstance(platform, str) or not platform:
        raise ValueError("inbox rows need a session_key and a platform")
    message_id = "" if message_id is None else str(message_id)
    if not message_id:
        raise ValueError("inbox rows need a platform_message_id (it is the dedup key)")
    return key, platform, message_id, records.pack(payload)


async def _insert(conn, prepared: list, now: float) -> list[tuple[int, bool]]:
    out = []
    for key, platform, message_id, blob in prepared:
        cur = await conn.execute(
            "INSERT INTO inbox (session_key, platform, platform_message_id, state, payload, received_at, updated_at) "
            "VALUES (?, ?, ?, 'received', ?, ?, ?) ON CONFLICT (platform, platform_message_id) DO NOTHING",
            (key, platform, message_id, blob, now, now))
        if cur.rowcount == 1:
            out.append((cur.lastrowid, True))
        else:
            seq = (await fetch_one(conn, "SELECT seq FROM inbox WHERE platform = ? AND platform_message_id = ?",
                                   (platform, message_id)))[0]
            out.append((seq, False))
    return out


async def _set_offset(conn, adapter_id: str, blob: bytes, now: float) -> None:
    await conn.execute("INSERT INTO adapter_offsets (adapter_id, value, updated_at) VALUES (?, ?, ?) "
                 "ON CONFLICT (adapter_id) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                 (adapter_id, blob, now))


class Inbox:
    """Reached as ``Store.inbox``; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def put(self, session_key: str, platform: str, platform_message_id: str,
                  payload: Any) -> tuple[int, bool]:
        """Store an inbound event; returns (seq, inserted). A duplicate returns the first one's seq and False."""
        prepared = [_prepare((session_key, platform, platform_message_id, payload))]
        return (await self._db.write(_insert, prepared, time.time()))[0]

    async def put_many_and_commit_offset(self, rows: Iterable[Union[InboundItem, Sequence]], adapter_id: str,
                                         offset: Any, fences: Sequence[Fence] = ()) -> list[tuple[int, bool]]:
        """Store a batch of events and the adapter offset that covers them, in one transaction. ``fences``: the
        leases this intake holds (storage/leases.py), checked in the same transaction: a host that lost its lease
        commits nothing (``LeaseLost``), so the offset only ever moves under the lease's holder."""
        prepared = [_prepare(r) for r in rows]
        offset_blob = records.pack(offset)

        async def do(conn, now):
            await leases.check(conn, fences)
            out = await _insert(conn, prepared, now)
            await _set_offset(conn, adapter_id, offset_blob, now)
            return out
        return await self._db.write(do, time.time())

    async def put_many(self, rows: Iterable[Union[InboundItem, Sequence]]) -> list[tuple[int, bool]]:
        """Store a batch of events in one transaction (rows forwarded by another host: no offset of this one)."""
        prepared = [_prepare(r) for r in rows]
        return await self._db.write(_insert, prepared, time.time())

    async def forwarded(self, seqs: Iterable[int], shard: str) -> int:
        """received -> done for rows the host of ``shard`` has stored in its own inbox; returns how many moved (a
        row already moved, by an answer that came twice, is left as it is)."""
        seqs, reason = [int(s) for s in seqs], f"{FORWARDED}{shard}"

        async def do(conn):
            now, moved = time.time(), 0
            for seq in seqs:
                moved += (await conn.execute("UPDATE inbox SET state = 'done', updated_at = ?, reason = ? "
                                             "WHERE seq = ? AND state = 'received'", (now, reason, seq))).rowcount
            return moved
        return await self._db.write(do) if seqs else 0

    async def received_after(self, platform: str, after_seq: int, older_than_s: float, limit: int = 500,
                             now: Optional[float] = None) -> list[InboxRow]:
        """The platform's received rows past ``after_seq`` stored over ``older_than_s`` ago, in seq order, at most
        ``limit``: what an adapter walks, a page at a time, to forward again what another host has not stored.
        A key with a current session in this database is left out: that session is here still (its key is moving
        to another shard, actors/sessions/moves_out.py), and its rows go with it or are answered here, never both."""
        cutoff = (time.time() if now is None else now) - older_than_s

        async def fetch(conn):
            return [_row(r) for r in await fetch_all(
                conn, f"SELECT {_COLUMNS} FROM inbox WHERE state = 'received' AND platform = ? AND seq > ? "
                      f"AND received_at < ? AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.session_key = "
                      f"inbox.session_key AND s.state IN ('active', 'suspended')) ORDER BY seq LIMIT ?",
                (platform, int(after_seq), cutoff, int(limit)))]
        return await self._db.read(fetch)

    async def set_offset(self, adapter_id: str, value: Any) -> None:
        """Commit an adapter's platform offset; call only once the rows it covers are durable."""
        blob = records.pack(value)
        await self._db.write(_set_offset, adapter_id, blob, time.time())

    async def get_offset(self, adapter_id: str, default: Any = None) -> Any:
        async def fetch(conn):
            row = await fetch_one(conn, "SELECT value FROM adapter_offsets WHERE adapter_id = ?", (adapter_id,))
            return records.unpack(row[0]) if row else default
        return await self._db.read(fetch)

    async def get(self, seq: int) -> Optional[InboxRow]:
        async def fetch(conn):
            r = await fetch_one(conn, f"SELECT {_COLUMNS} FROM inbox WHERE seq = ?", (seq,))
            return _row(r) if r else None
        return await self._db.read(fetch)

    async def by_message_id(self, platform: str, platform_message_id: str) -> Optional[InboxRow]:
        """The row of one platform message (its dedup key), or None: how another host names a row, since a seq is
        this host's own."""
        async def fetch(conn):
            row = await fetch_one(conn, f"SELECT {_COLUMNS} FROM inbox WHERE platform = ? AND platform_message_id = ?",
                                  (platform, platform_message_id))
            return _row(row) if row else None
        return await self._db.read(fetch)

    async def newest_of(self, session_key: str, platform: str, limit: int = 16) -> list[InboxRow]:
        """The newest ``limit`` rows one adapter (``platform``: its name) stored under a key, in any state, newest
        first: what a chat said last, for an adapter that lost what it knew of its chats with its process (the
        WhatsApp window). Bounded by ``limit``, however long the chat."""
        async def fetch(conn):
            return [_row(r) for r in await fetch_all(
                conn, f"SELECT {_COLUMNS} FROM inbox WHERE session_key = ? AND platform = ? ORDER BY seq DESC "
                      "LIMIT ?", (session_key, platform, max(0, int(limit))))]
        return await self._db.read(fetch)

    async def newest_arrival(self, excluding: Iterable[str] = ()) -> Optional[float]:
        """When the newest row arrived whose platform is none of ``excluding`` (the gateway's own rows: cron runs,
        approval deadlines), or None: the activity clock's reading of platform traffic (daemon/idle_exit.py). A
        redelivered event adds no row, so a replay never moves it. Walks back from the newest row (seq order is
        arrival order) past internal ones only."""
        internal = tuple(excluding)
        not_internal = f"WHERE platform NOT IN ({', '.join('?' * len(internal))}) " if internal else ""
        row = await self._db.read(fetch_one, f"SELECT received_at FROM inbox {not_internal}ORDER BY seq DESC LIMIT 1",
                                  internal)
        return float(row[0]) if row else None

    async def any_pending(self) -> bool:
        """A row waits for its turn or is in one (received or taken), from any source."""
        row = await self._db.read(fetch_one, "SELECT EXISTS (SELECT 1 FROM inbox WHERE state IN (?, ?))",
                                  PENDING_STATES)
        return bool(row[0])

    async def next_for(self, session_key: str) -> Optional[InboxRow]:
        """The oldest 'received' row of the key, or None."""
        async def fetch(conn):
            r = await fetch_one(conn, f"SELECT {_COLUMNS} FROM inbox WHERE session_key = ? AND state = 'received' "
                                f"ORDER BY seq LIMIT 1", (session_key,))
            return _row(r) if r else None
        return await self._db.read(fetch)

    async def take(self, seq: int) -> InboxRow:
        """received -> taken; returns the row. Committed before the turn for it starts."""
        return await self._move(seq, (InboxState.RECEIVED,), InboxState.TAKEN)

    async def done(self, seq: int) -> InboxRow:
        """taken -> done: the turn for this event finished (its reply is in the delivery ledger by then)."""
        return await self._move(seq, (InboxState.TAKEN,), InboxState.DONE)

    async def drop(self, seq: int, reason: str) -> InboxRow:
        """received|taken -> dropped: refused (unauthorised sender, resume given up, ...), with the reason kept."""
        return await self._move(seq, PENDING_STATES, InboxState.DROPPED, reason)

    async def _move(self, seq: int, allowed: tuple, target: str, reason: Optional[str] = None) -> InboxRow:
        async def do(conn):
            r = await fetch_one(conn, f"SELECT {_COLUMNS} FROM inbox WHERE seq = ?", (seq,))
            if r is None:
                raise NotFound(f"no inbox row {seq}")
            if r[4] not in allowed:
                raise IllegalTransition(f"inbox row {seq}: {r[4]} -> {target} is not allowed")
            now = time.time()
            await conn.execute("UPDATE inbox SET state = ?, updated_at = ?, reason = COALESCE(?, reason) "
                               "WHERE seq = ?", (target, now, reason, seq))
            row = _row(r)
            return InboxRow(**{**row.__dict__, "state": target, "updated_at": now,
                               "reason": reason if reason is not None else row.reason})
        return await self._db.write(do)

    async def rows_in_state(self, session_key: str, states: Iterable[str] = PENDING_STATES) -> list[InboxRow]:
        states = tuple(states)
        unknown = set(states) - set(INBOX_STATES)
        if unknown:
            raise ValueError(f"unknown inbox states {sorted(unknown)}")
        marks = ", ".join("?" * len(states))

        async def fetch(conn):
            return [_row(r) for r in await fetch_all(
                conn, f"SELECT {_COLUMNS} FROM inbox WHERE session_key = ? AND state IN ({marks}) ORDER BY seq",
                (session_key, *states))]
        return await self._db.read(fetch) if states else []

    async def sessions_with_pending(self) -> list[str]:
        """Keys with received or taken rows: the sessions to ring at start (restart recovery)."""
        async def fetch(conn):
            return [k for (k,) in await fetch_all(
                conn, "SELECT DISTINCT session_key FROM inbox WHERE state IN ('received', 'taken') "
                      "ORDER BY session_key")]
        return await self._db.read(fetch)

    async def newest_received(self, limit: int = 5000) -> list[tuple[str, int]]:
        """``(session_key, newest seq)`` of the keys with rows no session has taken yet (hosts sharing the database
        ring their sessions from this: actors/sessions/partitions.py)."""
        async def fetch(conn):
            return [(k, int(s)) for k, s in await fetch_all(
                conn, "SELECT session_key, max(seq) FROM inbox WHERE state = 'received' GROUP BY session_key "
                      "LIMIT ?", (int(limit),))]
        return await self._db.read(fetch)

    async def late(self, older_than_s: float, now: Optional[float] = None, limit: int = 1000) -> list[tuple]:
        """Rows stored over ``older_than_s`` ago and not taken yet, whose session has no turn running (a message
        waiting behind a turn waits for the agent, not for the gateway): ``(session_key, seq, received_at)``,
        oldest first. The liveness bound's breaches (the sweeper rings their sessions again)."""
        cutoff = (time.time() if now is None else now) - older_than_s
        async def fetch(conn):
            return [tuple(r) for r in await fetch_all(
                conn, "SELECT i.session_key, i.seq, i.received_at FROM inbox i WHERE i.state = 'received' "
                      "AND i.received_at < ? AND NOT EXISTS (SELECT 1 FROM sessions s JOIN runtime_state r "
                      "ON r.session_id = s.session_id WHERE s.session_key = i.session_key "
                      "AND s.state IN ('active', 'suspended') AND r.turn_token IS NOT NULL) "
                      "ORDER BY i.seq LIMIT ?", (cutoff, int(limit)))]
        return await self._db.read(fetch)

    async def requeue_taken(self, session_key: str) -> int:
        """taken -> received for a key whose turn died with its process; returns how many rows moved."""
        async def do(conn):
            return (await conn.execute(
                "UPDATE inbox SET state = 'received', updated_at = ? WHERE session_key = ? AND state = 'taken'",
                (time.time(), session_key))).rowcount
        return await self._db.write(do)

    async def counts(self, session_key: Optional[str] = None) -> dict[str, int]:
        """Rows per state (every state present, zero included), for one key or all."""
        where, args = ("WHERE session_key = ?", (session_key,)) if session_key is not None else ("", ())

        async def fetch(conn):
            found = dict(await fetch_all(conn, f"SELECT state, COUNT(*) FROM inbox {where} GROUP BY state", args))
            return {state: found.get(state, 0) for state in INBOX_STATES}
        return await self._db.read(fetch)

    async def purge(self, older_than_s: float, now: Optional[float] = None) -> int:
        """Delete done/dropped rows last updated over ``older_than_s`` ago (their dedup protection ends)."""
        cutoff = (time.time() if now is None else now) - older_than_s
        async def do(conn):
            return (await conn.execute(
                "DELETE FROM inbox WHERE state IN ('done', 'dropped') AND updated_at < ?", (cutoff,))).rowcount
        return await self._db.write(do)
