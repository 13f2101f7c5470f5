"""The database: one SQLite file, one connection per Store, driven from one private thread.

Why a private thread and not aiosqlite: every operation here is a whole transaction written as one synchronous
function ``fn(conn)`` that runs start to finish on the storage thread. Two coroutines sharing a connection can then
never interleave statements inside each other's BEGIN ... COMMIT, and a transaction that hits SQLITE_BUSY can be
rolled back and retried as a unit. The event loop only awaits the result.

Many OS processes open the same file at once (each actor process its own Store). What keeps them apart:

* WAL mode: readers never block the writer and the writer never blocks readers;
* every write starts with BEGIN IMMEDIATE, which takes the write lock up front, so a transaction never has to
  upgrade a read snapshot to a write lock half-way (the case where SQLite returns BUSY without waiting);
* busy_timeout makes SQLite itself wait for the lock; a bounded tenacity retry of the whole transaction covers the
  remaining BUSY cases (WAL recovery, checkpoints), and past the budget raises ``StorageBusy``, never the driver's
  'database is locked'.

What survives kill -9: everything whose COMMIT returned. In WAL mode a commit is a single append to the -wal file,
and a process crash cannot tear it (the OS keeps the written pages); the next opener replays the WAL. With
synchronous=NORMAL the WAL is not fsynced at each commit, so a power loss or kernel crash can lose the last
commits (never corrupt the file); with synchronous=FULL each commit is fsynced and survives power loss as well.
"""
from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from os import PathLike
from typing import Any, Callable, Sequence, TypeVar, Union

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from .errors import SchemaTooNew, StorageBusy, StorageError

log = logging.getLogger(__name__)

T = TypeVar("T")
Migration = Union[Sequence[str], Callable[[sqlite3.Connection], None]]

SYNCHRONOUS = {"normal": "NORMAL", "full": "FULL"}
BUSY_TIMEOUT_MS = 5_000       # SQLite's own wait for the lock, per attempt
RETRY_BUDGET_S = 60.0         # total time a transaction keeps retrying on BUSY before StorageBusy
APPLICATION_ID = 0x41474757   # 'AGGW': marks files created by this code (PRAGMA application_id)

_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def is_busy(exc: BaseException) -> bool:
    """True for the transient 'database is locked/busy' errors that a retry can cure."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _BUSY_CODES
    text = str(exc)
    return "locked" in text or "busy" in text


def call_with_retry(fn: Callable[[], T], what: str = "transaction") -> T:
    """Run ``fn`` retrying on BUSY within RETRY_BUDGET_S; translate driver errors into ``StorageError``."""
    retrying = Retrying(retry=retry_if_exception(is_busy), stop=stop_after_delay(RETRY_BUDGET_S),
                        wait=wait_random_exponential(multiplier=0.005, max=0.25), reraise=True)
    try:
        for attempt in retrying:
            with attempt:
                return fn()
    except sqlite3.Error as exc:
        if is_busy(exc):
            raise StorageBusy(f"{what}: another process kept the database busy for over {RETRY_BUDGET_S:.0f}s; "
                              f"gave up") from exc
        raise StorageError(f"{what}: {exc}") from exc
    raise AssertionError("unreachable")  # pragma: no cover - Retrying either returns or raises


def user_version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration], path: str = "database") -> int:
    """Bring the schema to ``len(migrations)``; migration i (1-based) turns version i-1 into version i.

    All pending steps run in one IMMEDIATE transaction together with the version bump, so a crash mid-migration
    leaves the old version intact, and two processes opening a fresh file at once migrate it exactly once."""
    latest = len(migrations)
    _refuse_if_newer(user_version(conn), latest, path)
    if user_version(conn) == latest:
        return latest
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = user_version(conn)  # re-read under the write lock: another process may have migrated meanwhile
        _refuse_if_newer(found, latest, path)
        for version in range(found + 1, latest + 1):
            step = migrations[version - 1]
            if callable(step):
                step(conn)
            else:
                for statement in step:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {int(version)}")
            log.info("%s: migrated schema to version %d", path, version)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return latest


def _refuse_if_newer(found: int, latest: int, path: str) -> None:
    if found > latest:
        raise SchemaTooNew(
            f"{path}: database schema version {found} is newer than this code supports (version {latest}); it was "
            f"written by a newer agent-gateway. Refusing to open it: upgrade the code, or restore a backup taken "
            f"with this version.")


def _configure(conn: sqlite3.Connection, durability: str, path: str) -> None:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    if app_id not in (0, APPLICATION_ID):
        raise StorageError(f"{path}: not an agent-gateway database (application_id {app_id:#x})")
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if mode.lower() != "wal" and path != ":memory:":
        raise StorageError(f"{path}: could not switch to WAL journal mode (got {mode!r})")
    conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS[durability]}")


def connect(path: str, durability: str, migrations: Sequence[Migration]) -> sqlite3.Connection:
    """Open, configure and migrate a connection (synchronously; used by ``Database.open`` on its thread)."""
    if durability not in SYNCHRONOUS:
        raise ValueError(f"durability must be one of {sorted(SYNCHRONOUS)}, not {durability!r}")
    # isolation_level=None: the driver issues no implicit BEGIN/COMMIT; every transaction here is explicit.
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        call_with_retry(lambda: _configure(conn, durability, path), f"{path}: configure")
        call_with_retry(lambda: migrate(conn, migrations, path), f"{path}: migrate")
    except BaseException:
        conn.close()
        raise
    return conn


class Database:
    """An open database: ``await db.write(fn, *args)`` / ``await db.read(fn, *args)`` run ``fn(conn, *args)`` as
    one transaction on the storage thread and return its result.

    ``fn`` may run more than once (a BUSY retry rolls back and starts again), so it must have no effect outside the
    connection. A write whose awaiting coroutine is cancelled may still commit: cancellation reaches the event
    loop, not the storage thread."""

    def __init__(self, path: str, durability: str, conn: sqlite3.Connection, executor: ThreadPoolExecutor) -> None:
        self.path = path
        self.durability = durability
        self._conn = conn
        self._executor = executor
        self._closed = False
        self._pid = os.getpid()  # a connection must never be used across fork (Thespian forks actor processes)

    @classmethod
    async def open(cls, path: Union[str, PathLike], durability: str = "normal",
                   migrations: Sequence[Migration] | None = None) -> "Database":
        from .schema import MIGRATIONS
        path = str(path)
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="storage")
        try:
            conn = await asyncio.get_running_loop().run_in_executor(
                executor, connect, path, durability, MIGRATIONS if migrations is None else migrations)
        except BaseException:
            executor.shutdown(wait=True)
            raise
        return cls(path, durability, conn, executor)

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` inside BEGIN IMMEDIATE ... COMMIT; durable (per ``durability``) on return."""
        return await self._submit("IMMEDIATE", fn, args)

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` inside a read transaction: one consistent snapshot for all its statements."""
        return await self._submit("DEFERRED", fn, args)

    async def _submit(self, mode: str, fn: Callable[..., T], args: tuple) -> T:
        if self._closed:
            raise StorageError(f"{self.path}: store is closed")
        if os.getpid() != self._pid:
            raise StorageError(f"{self.path}: this Store was opened by process {self._pid}; a forked process must "
                               f"open its own (SQLite connections do not survive fork)")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._transaction, mode, fn, args)

    def _transaction(self, mode: str, fn: Callable[..., T], args: tuple) -> T:
        conn = self._conn

        def once() -> T:
            conn.execute(f"BEGIN {mode}")
            try:
                result = fn(conn, *args)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return result

        return call_with_retry(once, f"{self.path}: {getattr(fn, '__name__', 'transaction')}")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if os.getpid() != self._pid:
            return  # inherited across fork: the storage thread does not exist here; the parent still owns the file
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._conn.close)  # queued after every pending transaction
        finally:
            # Join the (now idle) thread: when close returns no storage thread is left, so the caller may fork.
            self._executor.shutdown(wait=True)
