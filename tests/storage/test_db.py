import asyncio
import multiprocessing
import os
import sqlite3
import threading
import time

import pytest

from storage import Store, db as dbmod, records
from storage.db import Database, call_with_retry, call_with_retry_async, fetch_all, fetch_one
from storage.errors import SchemaTooNew, StorageBusy, StorageError
from storage.schema import SCHEMA_VERSION

from .helpers import execute, open_store


def on_postgresql(where) -> bool:
    return str(where).startswith("postgresql://")


def schema_version(where) -> int:
    """The version the database says its schema is at (SQLite: user_version; PostgreSQL: gateway_schema)."""
    if on_postgresql(where):
        return execute(where, "SELECT version FROM gateway_schema")[0][0]
    return execute(where, "PRAGMA user_version")[0][0]


def set_schema_version(where, version: int) -> None:
    if on_postgresql(where):
        execute(where, "UPDATE gateway_schema SET version = ?", (version,))
    else:
        execute(where, f"PRAGMA user_version = {int(version)}")


def busy_error(where) -> Exception:
    """What the backend's driver raises when another transaction is in the way (a retry cures it)."""
    if on_postgresql(where):
        import psycopg
        return psycopg.errors.SerializationFailure("could not serialize access due to concurrent update")
    return sqlite3.OperationalError("database is locked")


async def pragma(store, name):
    async def fetch(conn):
        return (await fetch_one(conn, f"PRAGMA {name}"))[0]
    return await store._db.read(fetch)


@pytest.mark.parametrize("durability,synchronous", [("normal", 1), ("full", 2)])
async def test_connection_settings(sqlite_path, durability, synchronous):
    db_path = sqlite_path
    async with open_store(db_path, durability) as store:
        assert await pragma(store, "journal_mode") == "wal"
        assert await pragma(store, "synchronous") == synchronous
        assert await pragma(store, "foreign_keys") == 1
        assert await pragma(store, "busy_timeout") == dbmod.BUSY_TIMEOUT_MS
        assert await pragma(store, "user_version") == SCHEMA_VERSION
        assert store.durability == durability
        with pytest.raises(StorageError, match="FOREIGN KEY"):
            await store._db.write(lambda c: c.execute(
                "INSERT INTO transcript (session_id, seq, role, kind, created_at, payload) "
                "VALUES ('nope', 1, 'user', 'message', 0, x'01c0')"))


@pytest.mark.parametrize("durability,synchronous_commit", [("normal", "off"), ("full", "on")])
async def test_connection_settings_on_postgresql(postgresql_path, durability, synchronous_commit):
    db_path = postgresql_path
    async with open_store(db_path, durability) as store:
        # the test server runs with synchronous_commit off: 'full' asks each commit to be flushed all the same
        assert await store._db.read(fetch_one, "SHOW synchronous_commit") == (synchronous_commit,)
        assert schema_version(db_path) == SCHEMA_VERSION
        assert store.durability == durability and "password" not in store.path
        with pytest.raises(StorageError, match="foreign key"):
            await store._db.write(lambda c: c.execute(
                "INSERT INTO transcript (session_id, seq, role, kind, created_at, payload) "
                "VALUES ('nope', 1, 'user', 'message', 0, ?)", (b"\x01\xc0",)))


async def test_unknown_durability_is_refused(db_path):
    with pytest.raises(ValueError, match="durability"):
        await Store.open(db_path, durability="sometimes")


async def test_newer_schema_is_refused_and_left_untouched(db_path):
    async with open_store(db_path):
        pass
    set_schema_version(db_path, SCHEMA_VERSION + 5)
    with pytest.raises(SchemaTooNew, match=rf"schema version {SCHEMA_VERSION + 5} is newer than this code supports "
                                           rf"\(version {SCHEMA_VERSION}\).*upgrade"):
        await Store.open(db_path)
    assert schema_version(db_path) == SCHEMA_VERSION + 5


async def test_foreign_sqlite_file_is_refused(db_path):
    if on_postgresql(db_path):   # a database whose schema table names another application
        execute(db_path, "CREATE TABLE gateway_schema (application_id BIGINT NOT NULL, version BIGINT NOT NULL)")
        execute(db_path, "INSERT INTO gateway_schema VALUES (1234, 1)")
    else:
        execute(db_path, "PRAGMA application_id = 1234")
        execute(db_path, "CREATE TABLE t (x)")
    with pytest.raises(StorageError, match="not an agent-gateway database"):
        await Store.open(db_path)


async def test_migrations_run_forward_once_and_atomically(db_path):
    calls = []
    v1 = ["CREATE TABLE a (x INTEGER)"]

    def v2(conn):
        calls.append("v2")
        conn.execute("ALTER TABLE a ADD COLUMN y TEXT")

    bad = ["CREATE TABLE c (x INTEGER)", "THIS IS NOT SQL"]
    db = await Database.open(db_path, migrations=[v1])
    await db.write(lambda c: c.execute("INSERT INTO a (x) VALUES (1)"))
    await db.close()
    for _ in range(2):
        db = await Database.open(db_path, migrations=[v1, v2])
        assert await db.read(fetch_all, "SELECT x, y FROM a") == [(1, None)]
        await db.close()
    assert calls == ["v2"]
    with pytest.raises(StorageError, match="syntax error"):
        await Database.open(db_path, migrations=[v1, v2, bad])
    db = await Database.open(db_path, migrations=[v1, v2])  # the failed step left version 2 and no table c
    await db.close()
    assert schema_version(db_path) == 2
    tables = ("SELECT table_name FROM information_schema.tables WHERE table_name = 'c' AND table_schema = "
              "current_schema()") if on_postgresql(db_path) else "SELECT name FROM sqlite_master WHERE name = 'c'"
    assert execute(db_path, tables) == []
    with pytest.raises(SchemaTooNew):
        await Database.open(db_path, migrations=[v1])


async def test_closed_store_refuses_work(db_path):
    store = await Store.open(db_path)
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(StorageError, match="closed"):
        await store.inbox.counts()


async def test_a_failed_transaction_leaves_nothing(db_path):
    async with open_store(db_path) as store:
        async def half_then_fail(conn):
            await conn.execute("INSERT INTO adapter_offsets (adapter_id, value, updated_at) VALUES ('a', ?, 0)",
                               (b"\x01\x01",))
            raise RuntimeError("boom")
        with pytest.raises(RuntimeError):
            await store._db.write(half_then_fail)
        assert await store.inbox.get_offset("a") is None


def test_busy_is_retried_then_succeeds():
    attempts = []

    def flaky():
        attempts.append(1)
        if len(attempts) < 3:
            raise sqlite3.OperationalError("database is locked")
        return "ok"
    assert call_with_retry(flaky) == "ok"
    assert len(attempts) == 3


def test_other_errors_are_not_retried_and_are_wrapped():
    attempts = []

    def broken():
        attempts.append(1)
        raise sqlite3.IntegrityError("UNIQUE constraint failed")
    with pytest.raises(StorageError, match="UNIQUE"):
        call_with_retry(broken)
    assert len(attempts) == 1


def test_busy_past_the_budget_is_a_storage_busy(monkeypatch):
    monkeypatch.setattr(dbmod, "RETRY_BUDGET_S", 0.05)

    def always_busy():
        raise sqlite3.OperationalError("database is locked")
    with pytest.raises(StorageBusy) as info:
        call_with_retry(always_busy)
    assert "database is locked" not in str(info.value)


def _use_inherited_store(store, conn):
    async def run():
        try:
            await store.inbox.counts()
            conn.send("used it")
        except StorageError as exc:
            await store.close()  # must not touch the parent's connection
            conn.send(str(exc))
    asyncio.run(run())


async def test_a_store_is_not_usable_across_fork(db_path):
    async with open_store(db_path) as store:
        ctx = multiprocessing.get_context("fork")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_use_inherited_store, args=(store, child))
        proc.start()
        message = await asyncio.get_running_loop().run_in_executor(None, parent.recv)
        proc.join()
        assert "open its own" in message
        assert await store.inbox.counts()  # the parent's store still works


async def test_no_storage_thread_outlives_close(sqlite_path):   # PostgreSQL's connections run no thread
    db_path = sqlite_path
    before = {t.ident for t in threading.enumerate()}
    store = await Store.open(db_path)
    assert any(t.name.startswith("storage") for t in threading.enumerate())
    await store.close()
    assert {t.ident for t in threading.enumerate()} <= before  # callers may fork right after close


async def test_async_busy_is_retried_then_succeeds():
    attempts = []

    async def flaky():
        attempts.append(1)
        if len(attempts) < 3:
            raise sqlite3.OperationalError("database is locked")
        return "ok"
    assert await call_with_retry_async(flaky) == "ok"
    assert len(attempts) == 3


async def test_async_busy_past_the_budget_is_a_storage_busy(monkeypatch):
    monkeypatch.setattr(dbmod, "RETRY_BUDGET_S", 0.05)

    async def always_busy():
        raise sqlite3.OperationalError("database is locked")
    with pytest.raises(StorageBusy) as info:
        await call_with_retry_async(always_busy)
    assert "database is locked" not in str(info.value)


async def test_a_busy_transaction_is_rolled_back_and_retried_as_a_unit(db_path):
    async with open_store(db_path) as store:
        attempts = []

        async def insert_then_busy_once(conn):
            attempts.append(1)
            await conn.execute("INSERT INTO adapter_offsets (adapter_id, value, updated_at) "
                               "VALUES (?, ?, 0)", (f"a{len(attempts)}", b"\x01"))
            if len(attempts) == 1:
                raise busy_error(db_path)
            return "done"
        assert await store._db.write(insert_then_busy_once) == "done"
        assert len(attempts) == 2
        assert await store._db.read(fetch_all, "SELECT adapter_id FROM adapter_offsets") == [("a2",)]


async def test_coroutines_of_one_store_never_interleave_inside_a_transaction(db_path):
    async with open_store(db_path) as store:
        await store.inbox.set_offset("counter", 0)

        async def increment(conn):  # read, yield to the event loop, write: a lost update if two interleaved
            (blob,) = await fetch_one(conn, "SELECT value FROM adapter_offsets WHERE adapter_id = 'counter'")
            await asyncio.sleep(0)
            await conn.execute("UPDATE adapter_offsets SET value = ? WHERE adapter_id = 'counter'",
                               (records.pack(records.unpack(blob) + 1),))
        await asyncio.gather(*(store._db.write(increment) for _ in range(50)),
                             *(store.inbox.counts() for _ in range(20)))
        assert await store.inbox.get_offset("counter") == 50


async def test_a_cancelled_caller_does_not_cut_its_transaction_short(db_path):
    async with open_store(db_path) as store:
        inside, release = asyncio.Event(), asyncio.Event()

        async def slow(conn):
            await conn.execute("INSERT INTO adapter_offsets (adapter_id, value, updated_at) VALUES ('s', ?, 0)",
                               (b"\x01",))
            inside.set()
            await release.wait()
            await conn.execute("UPDATE adapter_offsets SET updated_at = 1 WHERE adapter_id = 's'")
        caller = asyncio.ensure_future(store._db.write(slow))
        await inside.wait()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        release.set()
        await store.inbox.set_offset("after", 2)  # queued behind the transaction, which ran to its COMMIT
        assert await store._db.read(fetch_all, "SELECT adapter_id, updated_at FROM adapter_offsets "
                                               "ORDER BY adapter_id") == [("after", pytest.approx(time.time(), abs=60)),
                                                                          ("s", 1.0)]


async def test_a_synchronous_transaction_function_is_refused(db_path):
    async with open_store(db_path) as store:
        def not_ported(conn):
            return 1
        with pytest.raises(TypeError, match="coroutine function"):
            await store._db.write(not_ported)
        assert await store.inbox.counts()  # the refused transaction was rolled back; the store still works


async def test_close_waits_for_submitted_transactions(db_path):
    store = await Store.open(db_path)
    writes = [asyncio.ensure_future(store.inbox.set_offset(f"a{i}", i)) for i in range(10)]
    await asyncio.sleep(0)  # they are submitted
    await store.close()
    assert [w.result() for w in writes] == [None] * 10
    async with open_store(db_path) as again:
        assert await again.inbox.get_offset("a9") == 9


async def test_open_and_close_leave_the_thread_count_as_it_was(db_path):
    before = threading.active_count()
    own = 0 if on_postgresql(db_path) else 1   # aiosqlite's thread; a PostgreSQL store runs none once open
    for _ in range(3):
        store = await Store.open(db_path)
        assert threading.active_count() == before + own
        await store.inbox.counts()
        await store.close()
        assert threading.active_count() == before  # checked at once: close joined aiosqlite's thread
    set_schema_version(db_path, SCHEMA_VERSION + 1)
    with pytest.raises(SchemaTooNew):
        await Store.open(db_path)
    assert threading.active_count() == before  # a failed open leaves no thread either


def _open_use_close(path, conn):
    async def run():
        async with await Store.open(path) as store:
            await store.inbox.set_offset("child", os.getpid())
        conn.send(threading.active_count())
    asyncio.run(run())


async def test_fork_right_after_a_transient_open_and_close(db_path):
    async with open_store(db_path) as store:
        await store.inbox.set_offset("parent", 1)
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_open_use_close, args=(str(db_path), child))
    proc.start()
    threads_in_child = await asyncio.get_running_loop().run_in_executor(None, parent.recv)
    await asyncio.get_running_loop().run_in_executor(None, proc.join)
    assert proc.exitcode == 0 and threads_in_child == 1
    async with open_store(db_path) as store:
        assert await store.inbox.get_offset("child") == proc.pid
