"""An inline connection: the part of aiosqlite's Connection the storage code uses, run on the calling thread.

For an owner whose transactions all come from one thread that may block for one (a session shard: every cell's
handler runs on its actor thread, one at a time). aiosqlite hands each statement to its own thread and the answer
back to the loop, about 0.35 ms of thread switches per transaction measured here; inline, a small transaction costs
what SQLite does (tens of microseconds). The transaction code is the same coroutines as everywhere (``Database``):
they simply never wait for a thread, so the owner runs each one to completion on its own thread with
``run_inline``, without an event loop (a loop costs ~0.15 ms of task and callback scheduling per call, more than
most transactions).

The price: a lock held by another process (SQLite's busy_timeout, then the retries of the whole transaction) blocks
the owner's thread, so the retry budget is short (INLINE_RETRY_BUDGET_S) and past it the call raises StorageBusy,
an outside cause its supervisor waits out; an aiosqlite owner waits the same way, on its loop instead.
"""
from __future__ import annotations

import sqlite3
from typing import Sequence

INLINE_RETRY_BUDGET_S = 10.0


def run_inline(coro):
    """Run a storage coroutine of an inline ``Database`` to its end on this thread and return its result (or raise
    its error). Nothing on that path suspends: statements run here, the BUSY retries pause with a blocking sleep
    (db.blocking_sleep). A coroutine that does suspend is a bug in the storage code, refused loudly rather than
    left half-run."""
    try:
        waited_for = coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError(f"an inline storage call waited for {waited_for!r}; inline calls must never suspend")


class InlineConnection:
    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn

    async def execute(self, sql: str, params: Sequence = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, params)

    async def execute_fetchall(self, sql: str, params: Sequence = ()) -> list:
        return self._conn.execute(sql, params).fetchall()

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    async def close(self) -> None:
        self._conn.close()

    def stop(self) -> None:
        self._conn.close()
