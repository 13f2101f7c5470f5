"""An inline connection: the part of aiosqlite's Connection the storage code uses, run on the calling thread.

For an owner whose transactions all come from one thread that may block for one (a session shard: every cell's
handler runs on its actor thread, one at a time). aiosqlite hands each statement to its own thread and the answer
back to the loop, about 0.35 ms of thread switches per transaction measured here; inline, a small transaction costs
what SQLite does (tens of microseconds). The transaction code is the same coroutines as everywhere (``Database``):
they simply never wait for a thread, so the owner runs each one to completion on its own thread with
``run_inline``, without an event loop (a loop costs ~0.15 ms of task and callback scheduling per call, more than
most transactions).

An inline owner may also make several calls one transaction (``atomic``): a session shard runs the handlers of
one run of its cells in one, each handler a ``part`` of it that fails alone, so a turn's steps commit once per run
of the shard instead of once per call (docs/design.md §2).

The price: a lock held by another process (SQLite's busy_timeout, then the retries of the whole transaction) blocks
the owner's thread, so the retry budget is short (INLINE_RETRY_BUDGET_S) and past it the call raises StorageBusy,
an outside cause its supervisor waits out; an aiosqlite owner waits the same way, on its loop instead.
"""
from __future__ import annotations

import contextlib
import sqlite3
from typing import Sequence

from .db import SQLITE, StorageError, _translate, blocking_sleep, call_with_retry_async, run_call

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
    driver = SQLITE   # storage/postgres.py has the PostgreSQL twin of this class
    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn

    async def execute(self, sql: str, params: Sequence = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, params)

    async def execute_fetchall(self, sql: str, params: Sequence = ()) -> list:
        return self._conn.execute(sql, params).fetchall()

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def execute_now(self, sql: str) -> None:
        self._conn.execute(sql)

    async def close(self) -> None:
        self._conn.close()

    def stop(self) -> None:
        self._conn.close()


@contextlib.contextmanager
def atomic(db, conn: InlineConnection):
    """Calls of ``db`` inside the context are one transaction: reads before the first write run on their own (they
    take no lock); the first write begins it (BEGIN IMMEDIATE, BUSY retried as for any call) and every call from
    then on joins it, each within a savepoint, so a call that raises undoes only itself and its caller may go on.
    The transaction commits when the context exits; if the body raises, or the commit fails, it is rolled back
    and nothing of it happened. A scope opened inside another joins the outer one.

    Kill -9 inside the scope: nothing of it was committed (the WAL holds no commit record for it, so it never takes
    effect), the same as a kill before its first call. Whoever runs a scope must therefore let nothing that
    depends on its writes leave before it commits (the shard holds a cell's sends until then: cell_host.py)."""
    if db.open_scope is not None:
        yield db.open_scope
        return
    scope = db.open_scope = AtomicScope(conn, db.path, db.retry_budget_s, db.fence_check)
    try:
        yield scope
    except BaseException:
        db.open_scope = None
        scope.abandon()
        raise
    db.open_scope = None
    scope.commit()


class AtomicScope:
    def __init__(self, conn: InlineConnection, path: str, budget_s: float, fence_check=None):
        self.conn, self.path, self.budget_s = conn, path, budget_s
        self.fence_check = fence_check   # async (conn): the leases' fence, checked right after the BEGIN
        self.driver = conn.driver
        self.begun = False   # BEGIN IMMEDIATE done: the write lock is held until commit or rollback
        # What made SQLite roll the whole transaction back under a failing statement (a full disk): every later call
        # and the commit fail the same way, even if the caller caught the first.
        self.lost: StorageError | None = None
        # The open part (``part``): [whether its savepoint is taken], or None outside one.
        self._part: list | None = None

    @contextlib.contextmanager
    def part(self):
        """A part of the transaction that fails alone: if its body raises, what its calls wrote is undone and the
        rest of the transaction stays (a cell's handler in its shard's group: cell_host.py). Its savepoint is taken
        at its first call inside the transaction, so a part that writes nothing costs no statement. A part opened
        inside another joins it. Kill -9 inside: nothing of the whole transaction was committed."""
        if self._part is not None:
            yield
            return
        part = self._part = [False]
        try:
            yield
        except BaseException:
            self._part = None
            if part[0] and self.lost is None and self.conn.in_transaction:
                try:
                    self.conn.execute_now("ROLLBACK TO part")
                    self.conn.execute_now("RELEASE part")
                except self.driver.errors as exc:   # the transaction cannot be trusted past this: it fails whole
                    self.lost = _translate(exc, f"{self.path}: rollback of a part", self.budget_s, self.driver)
            raise
        self._part = None
        if part[0] and self.lost is None:
            try:
                self.conn.execute_now("RELEASE part")
            except self.driver.errors as exc:
                self.lost = _translate(exc, f"{self.path}: release of a part", self.budget_s, self.driver)
                raise self.lost from exc

    async def _begin(self) -> None:
        """BEGIN, and the fence where there is one. A begin that failed (PostgreSQL's writers' lock not granted in
        time, a lease another host took) leaves no transaction open behind it, so its retry begins afresh."""
        try:
            await self.conn.execute("BEGIN IMMEDIATE")
            if self.fence_check is not None:
                await self.fence_check(self.conn)
        except BaseException:
            if self.conn.in_transaction:
                await self.conn.execute("ROLLBACK")
            raise

    async def run(self, fn, args: tuple, name: str, writes: bool = True):
        """One call inside the transaction, atomic on its own: if it raises, what it wrote is undone and the
        transaction goes on. A call that only reads (``writes=False``) has nothing to undo and takes no savepoint;
        the first write of a part is undone by the part's own savepoint, taken just before it, so it takes none
        either. Each savepoint skipped is two statements fewer on the shard's loop."""
        if self.lost is not None:
            raise type(self.lost)(f"{self.path}: {name}: this transaction was rolled back ({self.lost})")
        if not self.begun:
            await call_with_retry_async(self._begin, f"{self.path}: {name}", self.budget_s, blocking_sleep, self.driver)
            self.begun = True
        conn = self.conn
        savepoint = "call" if writes else None
        if writes and self._part is not None and not self._part[0]:
            await conn.execute("SAVEPOINT part")
            self._part[0] = True
            savepoint = "part"   # kept after a ROLLBACK TO: the part goes on, as after any failed call
        try:
            if savepoint == "call":
                await conn.execute("SAVEPOINT call")
            result = await run_call(fn, conn, args, name)
            if savepoint == "call":
                await conn.execute("RELEASE call")
        except BaseException as exc:
            error = (_translate(exc, f"{self.path}: {name}", self.budget_s, self.driver)
                     if isinstance(exc, self.driver.errors) else exc)
            if conn.in_transaction:
                if savepoint is not None:
                    await conn.execute(f"ROLLBACK TO {savepoint}")
                if savepoint == "call":
                    await conn.execute("RELEASE call")
            else:
                self.lost = error if isinstance(error, StorageError) else StorageError(str(error))
            if error is exc:
                raise
            raise error from exc
        return result

    def commit(self) -> None:
        if self.lost is not None:
            raise type(self.lost)(f"{self.path}: SQLite rolled this transaction back ({self.lost})")
        if not self.begun:
            return
        try:
            self.conn.execute_now("COMMIT")
        except self.driver.errors as exc:
            self.abandon()
            raise _translate(exc, f"{self.path}: commit", self.budget_s, self.driver) from exc

    def abandon(self) -> None:
        if self.begun and self.conn.in_transaction:
            try:
                self.conn.execute_now("ROLLBACK")
            except self.driver.errors:
                pass   # the connection is past saving; its owner crashes, and SQLite drops what was not committed
