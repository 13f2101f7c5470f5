"""Runtime state of a session: the turn in flight, the compression cursor, and bounded-resume bookkeeping.

The resume protocol (G8: a killed daemon resumes an interrupted turn up to ``max_resumes`` times, never in a loop):

1. ``begin_turn`` is committed before the turn's first model call. It records the turn token, the inbox seq the
   turn answers and when it started, and sets ``resume_pending``. After kill -9 the row is still there.
2. ``end_turn`` clears ``resume_pending`` when the turn finishes, only if the token is still current (a stale turn
   cannot clear a newer one).
3. At start, ``pending_resumes()`` lists the interrupted turns; ``claim_resume(max_resumes)`` atomically counts
   one more resume of the turn of inbox seq N (``resume_attempts``, durable) and returns the state, while fewer than
   ``max_resumes`` were made. Every resume it counts was cut by the gateway dying (or the session crashing) while
   that turn ran: a start that dies before it claims counts nothing. Past the bound it returns None, and the caller
   gives up on that input (tells the user) instead of crashing in a loop: a poison turn ends in a notice, a turn
   cut by a few restarts in a row is still answered once. A new input (``begin_turn`` for another seq) starts from
   zero.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from .db import fetch_all, fetch_one
from .errors import NotFound

_COLUMNS = ("session_id, turn_token, compression_cursor, resume_pending, resume_inbox_seq, resume_started_at, "
            "resume_attempted_seq, updated_at, resume_attempts, resumes_total, notices_total")


@dataclass(frozen=True)
class RuntimeState:
    session_id: str
    turn_token: Optional[str]
    compression_cursor: int
    resume_pending: bool
    resume_inbox_seq: Optional[int]
    resume_started_at: Optional[float]
    resume_attempted_seq: Optional[int]
    updated_at: float
    resume_attempts: int = 0      # resumes of the turn of resume_inbox_seq made so far
    resumes_total: int = 0        # turns of this session resumed after a restart, over its life
    notices_total: int = 0        # messages of this session it gave up on (the "send it again" notice)

    @property
    def resume_already_attempted(self) -> bool:
        return self.resume_pending and self.resume_attempted_seq == self.resume_inbox_seq


def _state(row) -> RuntimeState:
    return RuntimeState(row[0], row[1], row[2], bool(row[3]), *row[4:])


async def _ensure_row(conn, session_id: str, now: float) -> None:
    if await fetch_one(conn, "SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)) is None:
        raise NotFound(f"no session {session_id!r}")
    await conn.execute("INSERT OR IGNORE INTO runtime_state (session_id, updated_at) VALUES (?, ?)", (session_id, now))


class RuntimeOps:
    """Runtime-state methods of ``SessionStore`` (a mixin: they share its database)."""

    async def runtime(self, session_id: str) -> RuntimeState:
        """The runtime state of a session (a blank one if it never ran a turn)."""
        async def fetch(conn):
            row = await fetch_one(conn, f"SELECT {_COLUMNS} FROM runtime_state WHERE session_id = ?", (session_id,))
            return _state(row) if row else RuntimeState(session_id, None, 0, False, None, None, None, 0.0, 0)
        return await self._db.read(fetch)

    async def count_recovery(self, session_id: str, resumed: bool) -> None:
        """One more turn resumed (``resumed``) or one more message given up on, for the admin views."""
        column = "resumes_total" if resumed else "notices_total"
        async def do(conn):
            await conn.execute(f"UPDATE runtime_state SET {column} = {column} + 1 WHERE session_id = ?",
                               (session_id,))
        await self._db.write(do)

    async def recovery_totals(self) -> dict:
        """Turns resumed and messages given up on, over every session."""
        async def fetch(conn):
            row = await fetch_one(conn, "SELECT COALESCE(SUM(resumes_total), 0), COALESCE(SUM(notices_total), 0) "
                                        "FROM runtime_state")
            return {"resumes": row[0], "notices": row[1]}
        return await self._db.read(fetch)

    async def begin_turn(self, session_id: str, turn_token: str, inbox_seq: int,
                         started_at: Optional[float] = None) -> None:
        """A turn answering inbox row ``inbox_seq`` starts (internal turns, e.g. cron, use an internal inbox row)."""
        if not isinstance(inbox_seq, int) or isinstance(inbox_seq, bool):
            raise TypeError(f"inbox_seq must be the int seq of the inbox row the turn answers, not {inbox_seq!r}")
        now = time.time()

        async def do(conn):
            await _ensure_row(conn, session_id, now)
            await conn.execute("UPDATE runtime_state SET turn_token = ?, resume_pending = 1, resume_attempts = CASE "
                               "WHEN resume_inbox_seq IS ? THEN resume_attempts ELSE 0 END, resume_inbox_seq = ?, "
                               "resume_started_at = ?, updated_at = ? WHERE session_id = ?",
                               (turn_token, inbox_seq, inbox_seq, started_at if started_at is not None else now, now,
                                session_id))
        await self._db.write(do)

    async def end_turn(self, session_id: str, turn_token: str) -> bool:
        """Clear the turn in flight if ``turn_token`` is still the current one; returns whether it was."""
        async def do(conn):
            cur = await conn.execute("UPDATE runtime_state SET turn_token = NULL, resume_pending = 0, updated_at = ? "
                                     "WHERE session_id = ? AND turn_token = ?", (time.time(), session_id, turn_token))
            return cur.rowcount == 1
        return await self._db.write(do)

    async def set_compression_cursor(self, session_id: str, seq: int) -> None:
        """Transcript events up to ``seq`` are summarised; the model sees the summary plus what follows."""
        now = time.time()

        async def do(conn):
            await _ensure_row(conn, session_id, now)
            await conn.execute("UPDATE runtime_state SET compression_cursor = ?, updated_at = ? WHERE session_id = ?",
                               (int(seq), now, session_id))
        await self._db.write(do)

    async def pending_resumes(self) -> list[RuntimeState]:
        """Interrupted turns: each to resume, or (past its bound) to end with a notice."""
        async def fetch(conn):
            return [_state(r) for r in await fetch_all(
                conn, f"SELECT {_COLUMNS} FROM runtime_state WHERE resume_pending = 1 ORDER BY session_id")]
        return await self._db.read(fetch)

    async def claim_resume(self, session_id: str, max_resumes: int = 1, again: bool = False) -> Optional[RuntimeState]:
        """Count one more resume of the interrupted turn and return its state; None if there is nothing to resume
        or ``max_resumes`` resumes were made already. Committed before the resumed turn starts. ``again``: the last
        attempt was stopped by unavailable storage (a full disk), which says nothing against the turn, so it is
        not counted."""
        async def do(conn):
            row = await fetch_one(conn, f"SELECT {_COLUMNS} FROM runtime_state WHERE session_id = ?", (session_id,))
            if row is None:
                return None
            state = _state(row)
            attempts = state.resume_attempts if state.resume_attempted_seq == state.resume_inbox_seq else 0
            if not state.resume_pending or (attempts >= max_resumes and not again):
                return None
            counted = attempts if again and attempts else attempts + 1
            await conn.execute("UPDATE runtime_state SET resume_attempted_seq = resume_inbox_seq, resume_attempts = ?, "
                               "updated_at = ? WHERE session_id = ?", (counted, time.time(), session_id))
            return RuntimeState(**{**state.__dict__, "resume_attempted_seq": state.resume_inbox_seq,
                                   "resume_attempts": counted})
        return await self._db.write(do)
