"""Watches (``[watch.NAME]``, docs/background.md): what each watch last saw, and the changes it claimed:
``Store.watches``.

``watch_state`` holds per watch the target it looked at, the hash and content it last saw and how many changes it
has claimed. A change is claimed by ``claim_change``, ONE transaction that compares-and-sets the state (the hash it
was seen against, the change count), inserts the change's row (``UNIQUE (watch, number)``) and puts the prompt's
inbox row. After a kill -9 either all of it is on disk or none is: a restart that finds the new hash stored sees no
change (the change is claimed once, and its inbox row is there for the shards to ring), one that finds the old hash
sees the change again and claims it then. Two claims of the same change (two processes, or a retry) meet the
compare-and-set: the second changes nothing.

The inbox rows are the gateway's own (``platform = 'watch'``, the message id made from the watch and the change's
number), so they never collide with a platform's ids and are not traffic for the idle clock.

What survives kill -9: every call that returned (one transaction each).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from .db import Database, fetch_all, fetch_one
from .inbox import InboundItem, _insert, _prepare

WATCH_PLATFORM = "watch"   # the inbox's platform column for the rows the watcher writes


@dataclass(frozen=True)
class WatchState:
    watch: str
    target: str
    content_hash: str
    content: bytes
    changes: int                 # changes claimed so far (the next is number changes + 1)
    checked_at: float


@dataclass(frozen=True)
class ChangeClaimed:
    inserted: bool               # False: the state had moved since it was read (claimed elsewhere): nothing done
    outcome: str = ""            # injected | skipped
    session_key: Optional[str] = None
    inbox_seq: Optional[int] = None
    reason: Optional[str] = None


class WatchStore:
    """Reached as ``Store.watches``; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def states(self) -> dict[str, WatchState]:
        async def fetch(conn):
            rows = await fetch_all(conn, "SELECT watch, target, content_hash, content, changes, checked_at "
                                         "FROM watch_state")
            return {r[0]: WatchState(r[0], r[1], r[2], bytes(r[3] or b""), r[4], r[5]) for r in rows}
        return await self._db.read(fetch)

    async def baseline(self, watch: str, target: str, content_hash: str, content: bytes,
                       now: Optional[float] = None) -> None:
        """What a watch saw first (or first since its target changed): recorded, no change claimed."""
        now = time.time() if now is None else now

        async def do(conn):
            await conn.execute("INSERT INTO watch_state (watch, target, content_hash, content, changes, checked_at) "
                               "VALUES (?, ?, ?, ?, 0, ?) ON CONFLICT (watch) DO UPDATE SET target = "
                               "excluded.target, content_hash = excluded.content_hash, content = excluded.content, "
                               "checked_at = excluded.checked_at", (watch, target, content_hash, content, now))
        await self._db.write(do)

    async def looked(self, watch: str, target: str, now: Optional[float] = None) -> None:
        """A look that found what was stored: only its time (``checked_at``, what `watches list` shows)."""
        now = time.time() if now is None else now

        async def do(conn):
            await conn.execute("UPDATE watch_state SET checked_at = ? WHERE watch = ? AND target = ?",
                               (now, watch, target))
        await self._db.write(do)

    async def overview(self) -> dict[str, dict]:
        """Per watch that was looked at: its target, last look, changes claimed and its newest change (or None)."""
        async def fetch(conn):
            rows = await fetch_all(conn, "SELECT s.watch, s.target, s.checked_at, s.changes, c.number, c.outcome, "
                                         "c.reason, c.claimed_at FROM watch_state s LEFT JOIN watch_changes c ON "
                                         "c.watch = s.watch AND c.number = s.changes")
            return {r[0]: {"target": r[1], "checked_at": r[2], "changes": r[3],
                           "last_change": None if r[4] is None else
                           {"number": r[4], "outcome": r[5], "reason": r[6], "claimed_at": r[7]}} for r in rows}
        return await self._db.read(fetch)

    async def claim_change(self, seen: WatchState, content_hash: str, content: bytes, item: InboundItem,
                           max_waiting: int = 10, now: Optional[float] = None) -> ChangeClaimed:
        """Claim change number ``seen.changes + 1`` of ``seen.watch``: the state moves to the new content and the
        prompt goes in the inbox, in one transaction, only if the state is still ``seen``. A conversation with
        ``max_waiting`` watch rows unanswered, or suspended by the operator, gets no row: the change is recorded
        skipped (the state still moves, so the next change is told against this content)."""
        now = time.time() if now is None else now
        row = _prepare(item)
        number = seen.changes + 1

        async def do(conn):
            moved = await conn.execute("UPDATE watch_state SET content_hash = ?, content = ?, changes = ?, "
                                       "checked_at = ? WHERE watch = ? AND content_hash = ? AND changes = ?",
                                       (content_hash, content, number, now, seen.watch, seen.content_hash,
                                        seen.changes))
            if moved.rowcount != 1:
                return ChangeClaimed(False)
            key, outcome, reason, seq = row[0], "injected", None, None
            waiting = (await fetch_one(conn, "SELECT COUNT(*) FROM inbox WHERE session_key = ? AND state IN "
                                             "('received', 'taken') AND platform = ?", (key, WATCH_PLATFORM)))[0]
            if await fetch_one(conn, "SELECT 1 FROM sessions WHERE session_key = ? AND state = 'suspended'",
                               (key,)) is not None:
                outcome, reason = "skipped", "the conversation is suspended (`sessions resume` it)"
            elif waiting >= max_waiting:
                outcome, reason = "skipped", f"{waiting} changes told to this conversation still unanswered"
            if outcome == "injected":
                [(seq, _inserted)] = await _insert(conn, [row], now)
            await conn.execute("INSERT INTO watch_changes (watch, number, old_hash, new_hash, outcome, reason, "
                               "session_key, inbox_seq, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               (seen.watch, number, seen.content_hash, content_hash, outcome, reason, key, seq, now))
            return ChangeClaimed(True, outcome, key, seq, reason)
        return await self._db.write(do)

    async def changes(self, watch: Optional[str] = None, limit: int = 20) -> list[dict]:
        """The newest changes (of ``watch``, or of every watch), newest first, each with its inbox row's state."""
        where, args = ("WHERE c.watch = ?", (watch,)) if watch is not None else ("", ())

        async def fetch(conn):
            rows = await fetch_all(conn, f"SELECT c.watch, c.number, c.outcome, c.reason, c.session_key, "
                                         f"c.inbox_seq, c.claimed_at, i.state FROM watch_changes c LEFT JOIN inbox "
                                         f"i ON i.seq = c.inbox_seq {where} ORDER BY c.claimed_at DESC LIMIT ?",
                                   (*args, int(limit)))
            names = ("watch", "number", "outcome", "reason", "session_key", "inbox_seq", "claimed_at", "inbox_state")
            return [dict(zip(names, r)) for r in rows]
        return await self._db.read(fetch)

    async def purge(self, older_than_s: float, now: Optional[float] = None) -> int:
        """Delete changes claimed over ``older_than_s`` ago: the history; the state alone decides what is new."""
        cutoff = (time.time() if now is None else now) - older_than_s

        async def do(conn):
            return (await conn.execute("DELETE FROM watch_changes WHERE claimed_at < ?", (cutoff,))).rowcount
        return await self._db.write(do)
