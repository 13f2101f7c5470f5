"""storage/inline.py ``atomic``: the calls of one scope commit together; a failing call undoes only itself; a scope
that raises, or whose commit fails, leaves nothing; nothing of a scope is visible to another connection before it
commits."""
from __future__ import annotations

import asyncio

import pytest

from storage.db import Database
from storage.errors import StorageError
from storage.inline import run_inline

from .helpers import execute

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def inline_db(db_path):
    loop = asyncio.new_event_loop()
    db = loop.run_until_complete(Database.open(db_path, migrations=[]))
    loop.run_until_complete(db.close())
    db = loop.run_until_complete(Database.open(db_path, migrations=[], inline=True))
    run_inline(db.write(lambda conn: conn.execute("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER)")))
    yield db
    loop.run_until_complete(db.close())
    loop.close()


def put(db, key: str, value: int, then_raise: bool = False):
    async def do(conn):
        await conn.execute("INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
                           (key, value))
        if then_raise:
            raise ValueError("the caller's own error, after its statement ran")
    return run_inline(db.write(do))


def seen_from_outside(db_path) -> dict:
    return dict(execute(db_path, "SELECT k, v FROM kv"))


def seen_inside(db) -> dict:
    async def read(conn):
        return dict(await conn.execute_fetchall("SELECT k, v FROM kv"))
    return run_inline(db.read(read))


def test_the_calls_of_a_scope_commit_together_and_a_failing_call_undoes_only_itself(inline_db, db_path):
    with inline_db.atomic():
        put(inline_db, "a", 1)
        assert seen_from_outside(db_path) == {}, "nothing is visible before the scope commits"
        with pytest.raises(ValueError):
            put(inline_db, "b", 2, then_raise=True)
        put(inline_db, "c", 3)
        assert seen_inside(inline_db) == {"a": 1, "c": 3}, "the scope reads its own writes"
    assert seen_from_outside(db_path) == {"a": 1, "c": 3}


def test_a_scope_that_raises_leaves_nothing(inline_db, db_path):
    with pytest.raises(RuntimeError):
        with inline_db.atomic():
            put(inline_db, "a", 1)
            raise RuntimeError("the handler crashed after its write")
    assert seen_from_outside(db_path) == {}
    put(inline_db, "b", 2)     # the connection is usable after it
    assert seen_from_outside(db_path) == {"b": 2}


def test_a_scope_without_writes_takes_no_lock_and_a_nested_scope_joins_the_outer(inline_db, db_path):
    with inline_db.atomic() as outer:
        assert seen_inside(inline_db) == {}
        assert not outer.begun, "a read before the first write runs on its own"
        # the write lock is free: another writer gets it now (SQLite's; PostgreSQL has no lock to take)
        execute(db_path, "INSERT INTO kv VALUES ('outside', 0)", timeout=0)
        with inline_db.atomic() as inner:
            assert inner is outer
            put(inline_db, "a", 1)
        assert seen_from_outside(db_path) == {"outside": 0}, "the inner scope did not commit on its own"
    assert seen_from_outside(db_path) == {"outside": 0, "a": 1}


def test_a_commit_that_fails_rolls_the_scope_back_and_raises(inline_db, db_path):
    # A deferred foreign key is checked at COMMIT: a child without its parent makes the commit itself fail.
    run_inline(inline_db.write(lambda conn: conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")))
    run_inline(inline_db.write(lambda conn: conn.execute(
        "CREATE TABLE child (parent_id INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)")))
    with pytest.raises(StorageError, match="FOREIGN KEY|foreign key"):
        with inline_db.atomic():
            put(inline_db, "a", 1)
            run_inline(inline_db.write(lambda conn: conn.execute("INSERT INTO child VALUES (42)")))
    assert seen_from_outside(db_path) == {}, "the write before the failed commit is gone with it"
    assert inline_db.open_scope is None
    put(inline_db, "b", 2)
    assert seen_from_outside(db_path) == {"b": 2}


def test_a_part_that_raises_undoes_only_its_own_writes_and_the_rest_commits(inline_db, db_path):
    """A cell's handler in its shard's group is a part: a crash undoes what it wrote, and the handlers before and
    after it in the same transaction stay (supervision/cell_host.py)."""
    with inline_db.atomic() as scope:
        with scope.part():
            put(inline_db, "first handler", 1)
        with pytest.raises(RuntimeError):
            with scope.part():
                put(inline_db, "crashed handler", 2)
                put(inline_db, "first handler", 99)
                raise RuntimeError("the handler crashed after its writes")
        with scope.part():
            assert seen_inside(inline_db) == {"first handler": 1}
            put(inline_db, "third handler", 3)
        assert seen_from_outside(db_path) == {}, "nothing is visible before the transaction commits"
    assert seen_from_outside(db_path) == {"first handler": 1, "third handler": 3}


def test_a_part_that_only_reads_takes_no_savepoint_and_a_part_before_the_first_write_still_undoes(inline_db,
                                                                                               db_path):
    with inline_db.atomic() as scope:
        with scope.part():
            assert seen_inside(inline_db) == {}
            assert not scope.begun
        with pytest.raises(ValueError):
            with scope.part():   # begins the transaction, then fails: its write is undone, the transaction lives
                put(inline_db, "a", 1)
                raise ValueError("crashed")
        assert scope.begun
        with scope.part():
            put(inline_db, "b", 2)
    assert seen_from_outside(db_path) == {"b": 2}


def statements_of(db) -> list[str]:
    """Every statement the inline connection runs from now on (sqlite3's trace callback; on PostgreSQL each one the
    connection is given)."""
    seen: list[str] = []
    if db.dialect == "postgresql":
        run = db._conn.run
        db._conn.run = lambda sql, params=(): (seen.append(sql), run(sql, params))[1]
    else:
        db._conn._conn.set_trace_callback(seen.append)
    return seen


def test_a_read_inside_the_transaction_takes_no_savepoint_and_a_part_s_first_write_uses_the_part_s(inline_db,
                                                                                                  db_path):
    """Savepoints cost two statements each on the shard's loop: a read has nothing to undo, and the first write of
    a part is undone by the part's own savepoint."""
    with inline_db.atomic() as scope:
        put(inline_db, "a", 1)                       # begins the transaction
        seen = statements_of(inline_db)
        assert seen_inside(inline_db) == {"a": 1}
        assert not [s for s in seen if "SAVEPOINT" in s], f"a read took a savepoint: {seen}"
        with scope.part():
            put(inline_db, "b", 2)
        assert [s for s in seen if "SAVEPOINT" in s] == ["SAVEPOINT part"], seen
    assert seen_from_outside(db_path) == {"a": 1, "b": 2}


def test_a_failing_first_write_of_a_part_is_undone_and_the_part_goes_on(inline_db, db_path):
    with inline_db.atomic() as scope:
        put(inline_db, "before", 0)
        with scope.part():
            with pytest.raises(ValueError):
                put(inline_db, "undone", 1, then_raise=True)
            put(inline_db, "after", 2)
            assert seen_inside(inline_db) == {"before": 0, "after": 2}
    assert seen_from_outside(db_path) == {"before": 0, "after": 2}
