"""The database: one SQLite file, one aiosqlite connection per Store, one transaction at a time.

Why aiosqlite plus a lock: aiosqlite (the driver the design card names) runs the sqlite3 connection on its own
thread and lets the event loop await each statement. On its own it would let two coroutines sharing the connection
interleave statements inside each other's BEGIN ... COMMIT, and a transaction that hits SQLITE_BUSY could not be
retried as a unit. So every operation here is a whole transaction written as one coroutine ``fn(conn, *args)``, run
by ``Database.write`` / ``read`` under an ``asyncio.Lock`` held from BEGIN to COMMIT (and across the BUSY retries
of that transaction): no other coroutine of the Store can put a statement inside it, and on BUSY the transaction is
rolled back and ``fn`` runs again from the start.

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

Opening (pragmas and migrations) runs synchronously on aiosqlite's thread, inside the connector aiosqlite calls
there (``aiosqlite.Connection(connector, ...)``, what ``aiosqlite.connect`` itself does); migrations therefore stay
functions of the plain ``sqlite3.Connection``. ``close`` joins aiosqlite's thread before it returns (aiosqlite's own
close only waits until the thread was told to stop), so a caller may fork right after it.
"""
from __future__ import annotations

import asyncio
import errno
import inspect
import logging
import os
import sqlite3
import threading
import time
import weakref
from os import PathLike
from typing import Any, Awaitable, Callable, Optional, Sequence, TypeVar, Union

import aiosqlite
from tenacity import AsyncRetrying, Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from .errors import DatabaseUnreachable, Driver, SchemaTooNew, StorageBusy, StorageError, StorageFull
from .location import is_postgresql

log = logging.getLogger(__name__)

T = TypeVar("T")
Migration = Union[Sequence[str], Callable[[sqlite3.Connection], None]]

SYNCHRONOUS = {"normal": "NORMAL", "full": "FULL"}
BUSY_TIMEOUT_MS = 5_000       # SQLite's own wait for the lock, per attempt
RETRY_BUDGET_S = 60.0         # total time a transaction keeps retrying on BUSY before StorageBusy
APPLICATION_ID = 0x41474757   # 'AGGW': marks files created by this code (PRAGMA application_id)
THREAD_NAME = "storage"       # the name given to aiosqlite's thread of a Store
ITER_CHUNK_SIZE = 64          # aiosqlite's default

_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)

# aiosqlite's thread is not a daemon and waits for work until stopped: a process that exits (or dies of an
# exception) with a Store still open would hang in the interpreter's join of non-daemon threads. The stdlib hook
# that concurrent.futures uses for the same reason stops every still-open connection first.
_open_databases: "weakref.WeakSet[Database]" = weakref.WeakSet()


def _stop_open_databases() -> None:
    for db in list(_open_databases):
        if db._pid == os.getpid():
            db._conn.stop()


threading._register_atexit(_stop_open_databases)


def is_busy(exc: BaseException) -> bool:
    """True for the transient 'database is locked/busy' errors that a retry can cure."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _BUSY_CODES
    text = str(exc)
    return "locked" in text or "busy" in text


def is_full(exc: BaseException) -> bool:
    """SQLITE_FULL ('database or disk is full'), or the OS's ENOSPC underneath it."""
    return (getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(exc).lower()
            or getattr(exc, "errno", None) == errno.ENOSPC)


SQLITE = Driver((sqlite3.Error,), is_busy, is_full)


def _retry_policy(budget_s: Optional[float] = None, driver: Driver = SQLITE) -> dict:
    # None: the module's RETRY_BUDGET_S read now, not when this module was imported (tests shorten it).
    budget_s = RETRY_BUDGET_S if budget_s is None else budget_s
    return dict(retry=retry_if_exception(driver.is_busy), stop=stop_after_delay(budget_s),
                wait=wait_random_exponential(multiplier=0.005, max=0.25), reraise=True)


async def blocking_sleep(seconds: float) -> None:
    """The pause between BUSY retries of an inline connection: its owner's thread waits anyway (inline.py), and a
    pause that never suspends lets the owner run the whole call without an event loop (``run_inline``)."""
    time.sleep(seconds)


async def run_call(fn: Callable[..., Awaitable[T]], conn, args: tuple, name: str) -> T:
    """``await fn(conn, *args)``, refusing a ``fn`` that is not a coroutine function of the connection."""
    pending = fn(conn, *args)
    if not inspect.isawaitable(pending):
        raise TypeError(f"storage transaction {name} must be a coroutine function of the connection "
                        f"(got {type(pending).__name__} back)")
    return await pending


def _translate(exc: BaseException, what: str, budget_s: Optional[float] = None,
               driver: Driver = SQLITE) -> StorageError:
    budget_s = RETRY_BUDGET_S if budget_s is None else budget_s
    if driver.is_busy(exc):
        return StorageBusy(f"{what}: another process kept the database busy for over {budget_s:.0f}s; gave up")
    if driver.is_full(exc):
        return StorageFull(f"{what}: {exc}")
    if driver.is_unreachable(exc):
        return DatabaseUnreachable(f"{what}: the database cannot be reached: {exc}")
    return StorageError(f"{what}: {exc}")


def call_with_retry(fn: Callable[[], T], what: str = "transaction") -> T:
    """Run ``fn`` retrying on BUSY within RETRY_BUDGET_S; translate driver errors into ``StorageError``.
    Synchronous: used while opening, on aiosqlite's thread."""
    try:
        for attempt in Retrying(**_retry_policy()):
            with attempt:
                return fn()
    except sqlite3.Error as exc:
        raise _translate(exc, what) from exc
    raise AssertionError("unreachable")  # pragma: no cover - Retrying either returns or raises


async def call_with_retry_async(fn: Callable[[], Awaitable[T]], what: str = "transaction",
                                budget_s: Optional[float] = None, sleep: Optional[Callable] = None,
                                driver: Driver = SQLITE) -> T:
    """``call_with_retry`` for a coroutine function: ``await fn()`` again (tenacity's AsyncRetrying) on BUSY.
    ``sleep``: how to wait between attempts (asyncio's by default)."""
    try:
        return await fn()   # the first attempt without tenacity's bookkeeping: nearly every transaction needs no other
    except driver.errors as exc:
        if not driver.is_busy(exc):
            raise _translate(exc, what, budget_s, driver) from exc
    try:
        async for attempt in AsyncRetrying(**_retry_policy(budget_s, driver), **({"sleep": sleep} if sleep else {})):
            with attempt:
                return await fn()
    except driver.errors as exc:
        raise _translate(exc, what, budget_s, driver) from exc
    raise AssertionError("unreachable")  # pragma: no cover - AsyncRetrying either returns or raises


async def fetch_one(conn: aiosqlite.Connection, sql: str, params: Sequence = ()) -> Optional[tuple]:
    """The first row of a query that yields at most one (one round trip to aiosqlite's thread), or None."""
    rows = await conn.execute_fetchall(sql, params)
    return rows[0] if rows else None


async def fetch_all(conn: aiosqlite.Connection, sql: str, params: Sequence = ()) -> list:
    return list(await conn.execute_fetchall(sql, params))


def user_version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration], path: str = "database") -> int:
    """Bring the schema to ``len(migrations)``; migration i (1-based) turns version i-1 into version i.

    All pending steps run in one IMMEDIATE transaction together with the version bump, so a crash mid-migration
    leaves the old version intact, and two processes opening a fresh file at once migrate it exactly once.
    Runs on aiosqlite's thread while the Store opens, with the plain sqlite3 connection."""
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
    # A statement that sorts or materialises a subquery (a transcript's last N events, read every turn) wants a
    # temporary table; SQLite's default puts it in a fresh file it creates and unlinks in /var/tmp, a handful of
    # system calls per turn. Ours are bounded by their LIMITs (a few hundred rows), so memory is the cheaper place.
    conn.execute("PRAGMA temp_store = MEMORY")


def connect(path: str, durability: str, migrations: Sequence[Migration]) -> sqlite3.Connection:
    """Open, configure and migrate a sqlite3 connection, synchronously (the connector ``Database.open`` gives
    aiosqlite, so it runs on aiosqlite's thread)."""
    if durability not in SYNCHRONOUS:
        raise ValueError(f"durability must be one of {sorted(SYNCHRONOUS)}, not {durability!r}")
    # isolation_level=None: the driver issues no implicit BEGIN/COMMIT; every transaction here is explicit.
    # check_same_thread=False as in aiosqlite.connect: the connection lives on aiosqlite's thread, but aiosqlite
    # reads properties such as in_transaction from the event loop's thread.
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
    try:
        call_with_retry(lambda: _configure(conn, durability, path), f"{path}: configure")
        call_with_retry(lambda: migrate(conn, migrations, path), f"{path}: migrate")
    except BaseException:
        conn.close()
        raise
    return conn


async def _in_a_thread_of_its_own(fn: Callable[[], T]) -> T:
    """``fn()`` on a thread started for it and joined before this returns: the event loop goes on meanwhile, and no
    thread is left behind (a pool's would outlive the call, and a supervisor forks right after: see close)."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def run() -> None:
        try:
            result = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine, which raises it
            loop.call_soon_threadsafe(lambda error=exc: done.done() or done.set_exception(error))
        else:
            loop.call_soon_threadsafe(lambda: done.done() or done.set_result(result))
    thread = threading.Thread(target=run, name=THREAD_NAME)
    thread.start()
    try:
        return await asyncio.shield(done)
    finally:
        thread.join()


WRITE_APART = "IMMEDIATE /* apart */"   # a write that PostgreSQL runs without the writers' lock (write_apart)


class Database:
    """An open database: ``await db.write(fn, *args)`` / ``await db.read(fn, *args)`` run ``await fn(conn, *args)``
    (``conn`` the ``aiosqlite.Connection``) as one transaction and return its result.

    ``fn`` is a coroutine function (or returns an awaitable) using only ``conn``'s public aiosqlite API. It may run
    more than once (a BUSY retry rolls back and starts again), so it must have no effect outside the connection.
    Transactions of one Store run one after the other, in the order they were submitted. A transaction whose
    awaiting coroutine is cancelled still runs to its end (it may commit): it runs as a task of its own, shielded
    from the caller's cancellation, so it can never be left open half-way."""

    def __init__(self, path: str, durability: str, conn: aiosqlite.Connection, thread: Optional[threading.Thread],
                 retry_budget_s: float = RETRY_BUDGET_S, inline: Optional[bool] = None, driver: Driver = SQLITE,
                 dialect: str = "sqlite") -> None:
        self.path = path
        self.durability = durability
        self._conn = conn
        self._thread = thread  # aiosqlite's thread, as seen from inside it (None: no thread of its own)
        self.inline = thread is None if inline is None else inline   # statements run on the caller's thread
        self.driver = driver
        self.dialect = dialect   # "sqlite" or "postgresql": the few statements written apart (search_index.py)
        self.retry_budget_s = retry_budget_s
        self._lock = asyncio.Lock()  # held from BEGIN to COMMIT/ROLLBACK, retries included
        self._pending: set[asyncio.Task] = set()
        self._closed = False
        self._closing: Optional[asyncio.Task] = None
        self._pid = os.getpid()  # a connection must never be used across fork (Thespian forks actor processes)
        self.open_scope = None   # inline only: the atomic scope the calls now join (inline.py, AtomicScope)
        # inline only: the fence every atomic scope of this connection checks as it begins (``async (conn)``:
        # storage/leases.py, Store.fence_with); None: no fence (a single host, or a store that writes for no lease)
        self.fence_check = None
        self.waits_on_loop = False   # inline only: BUSY is waited out with asyncio sleeps (see open)

    @classmethod
    async def open(cls, path: Union[str, PathLike], durability: str = "normal",
                   migrations: Optional[Sequence[Migration]] = None, inline: bool = False,
                   waits_on_loop: bool = False) -> "Database":
        """``inline``: no aiosqlite thread; every statement runs on the thread that runs the event loop
        (storage/inline.py says when that is the right choice). ``waits_on_loop`` (inline only): the owner's thread
        runs an event loop with other work on it (an adapter's HTTP), so a lock held by another process is waited
        for on that loop (asyncio sleeps between BUSY retries; SQLite's own busy wait off) instead of blocking it."""
        # a cycle: schema.py and inline.py build on this module (test_layering.py, KNOWN_CYCLES)
        from .schema import MIGRATIONS
        migrations = MIGRATIONS if migrations is None else migrations
        if is_postgresql(path):
            return await cls._open_postgres(path, durability, migrations, inline)
        path = str(path)
        if inline:
            # a cycle: schema.py and inline.py build on this module (test_layering.py, KNOWN_CYCLES)
            from .inline import INLINE_RETRY_BUDGET_S, InlineConnection
            conn = connect(path, durability, migrations)
            if waits_on_loop:
                conn.execute("PRAGMA busy_timeout = 0")
            db = cls(path, durability, InlineConnection(conn), None, INLINE_RETRY_BUDGET_S)
            db.waits_on_loop = waits_on_loop
            _open_databases.add(db)
            return db
        started = threading.Event()
        threads: list[threading.Thread] = []

        def connector() -> sqlite3.Connection:  # runs on aiosqlite's thread
            thread = threading.current_thread()
            thread.name = THREAD_NAME
            threads.append(thread)
            started.set()
            return connect(path, durability, migrations)

        conn = aiosqlite.Connection(connector, ITER_CHUNK_SIZE)
        try:
            await conn
        except BaseException:
            # aiosqlite has told its thread to stop; wait for it (the connector may still be running if this open
            # was cancelled), so that a failed open leaves no thread behind either.
            if started.wait(timeout=RETRY_BUDGET_S + 10):
                threads[0].join()
            raise
        db = cls(path, durability, conn, threads[0])
        _open_databases.add(db)
        return db

    @classmethod
    async def _open_postgres(cls, dsn: str, durability: str, migrations: Sequence[Migration],
                             inline: bool) -> "Database":
        """A PostgreSQL database (storage/postgres.py): psycopg's synchronous connection for an inline store, its
        asynchronous one otherwise; the schema migrated first, on a synchronous connection (off the event loop's
        thread unless inline)."""
        if durability not in SYNCHRONOUS:
            raise ValueError(f"durability must be one of {sorted(SYNCHRONOUS)}, not {durability!r}")
        from .inline import INLINE_RETRY_BUDGET_S   # a cycle, as in open
        try:
            from . import postgres   # only a PostgreSQL store loads the driver
        except ImportError as exc:
            raise StorageError(f"a PostgreSQL store needs the psycopg driver ({exc}): pip install 'psycopg[binary]'")
        where = postgres.describe(dsn)

        def open_migrated():
            conn = postgres.connect(dsn, durability)
            try:
                wrapped = postgres.PostgresInlineConnection(conn, reopen=lambda: postgres.connect(dsn, durability))
                postgres.migrate(wrapped, migrations, where, APPLICATION_ID, _refuse_if_newer)
            except BaseException:
                conn.close()
                raise
            return wrapped
        try:
            # A connection the server or the network closed (a host cut off, PostgreSQL restarted or failed over
            # to its standby) is opened again at the next transaction's BEGIN: every component heals on its own.
            if inline:
                db = cls(where, durability, open_migrated(), None, INLINE_RETRY_BUDGET_S, True, postgres.DRIVER,
                         "postgresql")
            else:
                (await _in_a_thread_of_its_own(open_migrated)).stop()
                conn = postgres.PostgresConnection(await postgres.connect_async(dsn, durability),
                                                   reopen=lambda: postgres.connect_async(dsn, durability))
                db = cls(where, durability, conn, None, RETRY_BUDGET_S, False, postgres.DRIVER, "postgresql")
        except postgres.DRIVER.errors as exc:
            raise _translate(exc, f"{where}: open", driver=postgres.DRIVER) from exc
        _open_databases.add(db)
        return db

    async def write(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(conn, *args)`` inside BEGIN IMMEDIATE ... COMMIT; durable (per ``durability``) on return."""
        return await self._submit("IMMEDIATE", fn, args)

    async def write_apart(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``write`` for the tables no other write reads (the leases' renewals, storage/leases.py): on PostgreSQL
        it does not wait for the writers' lock (postgres.py), so a lease is renewed or taken over even while the
        other writers queue; on SQLite it is ``write``."""
        return await self._submit(WRITE_APART, fn, args)

    async def read(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(conn, *args)`` inside a read transaction: one consistent snapshot for all its statements."""
        return await self._submit("DEFERRED", fn, args)

    async def _submit(self, mode: str, fn: Callable[..., Awaitable[T]], args: tuple) -> T:
        if self._closed:
            raise StorageError(f"{self.path}: store is closed")
        if os.getpid() != self._pid:
            raise StorageError(f"{self.path}: this Store was opened by process {self._pid}; a forked process must "
                               f"open its own (SQLite connections do not survive fork)")
        if self.inline:
            # Inline: the owner runs each call to completion on its one thread before the next (inline.py), so
            # there is nothing to queue behind and no caller that could be cancelled half-way: no task, no shield.
            # (With waits_on_loop a call may wait between BUSY attempts, with no transaction open: cancelled there,
            # nothing of it happened.)
            return await self._transaction(mode, fn, args)
        task = asyncio.ensure_future(self._transaction(mode, fn, args))
        self._pending.add(task)
        task.add_done_callback(self._forget)
        return await asyncio.shield(task)

    def _forget(self, task: asyncio.Task) -> None:
        self._pending.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: the caller may have been cancelled and never look at it

    def atomic(self):
        """Inline only: a context in which every write (and every call after the first write) joins one
        transaction, committed when the context exits (inline.py, ``atomic``)."""
        # a cycle: schema.py and inline.py build on this module (test_layering.py, KNOWN_CYCLES)
        from .inline import atomic
        return atomic(self, self._conn)

    async def _transaction(self, mode: str, fn: Callable[..., Awaitable[T]], args: tuple) -> T:
        conn = self._conn
        name = getattr(fn, "__name__", "transaction")
        scope = self.open_scope
        writes = mode != "DEFERRED"
        if scope is not None and (writes or scope.begun):
            return await scope.run(fn, args, name, writes=writes)

        async def once() -> T:
            try:
                # Inside: on PostgreSQL a write's BEGIN also takes the writers' lock, which may not be granted in
                # time (postgres.py); the transaction it opened is rolled back before the retry begins another.
                await conn.execute(f"BEGIN {mode}")
                result = await run_call(fn, conn, args, name)
                await conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    await conn.execute("ROLLBACK")
                raise
            return result

        async with self._lock:
            return await call_with_retry_async(once, f"{self.path}: {name}", self.retry_budget_s,
                                               blocking_sleep if self.inline and not self.waits_on_loop else None,
                                               self.driver)

    async def close(self) -> None:
        """Close after every transaction already submitted; when this returns no storage thread is left."""
        if self._closing is None:
            self._closed = True
            if os.getpid() != self._pid:
                return  # inherited across fork: aiosqlite's thread does not exist here; the parent owns the file
            self._closing = asyncio.ensure_future(self._shutdown())
        await asyncio.shield(self._closing)

    async def _shutdown(self) -> None:
        closed = False
        try:
            while self._pending:
                await asyncio.wait(list(self._pending))
            await self._conn.close()
            closed = True
        finally:
            if not closed:
                self._conn.stop()  # cancelled (event loop shutting down): still stop aiosqlite's thread
            # aiosqlite's close returns once its thread ran the stop item, maybe a moment before the thread ends:
            # join it, so the caller may fork (supervisors do, right after a transient open/close).
            if self._thread is not None:
                self._thread.join()
            _open_databases.discard(self)
