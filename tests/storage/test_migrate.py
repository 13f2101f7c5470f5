"""``storage migrate`` (storage/migrate.py): a whole state copied SQLite -> PostgreSQL -> SQLite with a real server,
every table's rows the same (counts and digests) each way; a target holding rows, or one that stores a row
differently, is refused with nothing written to it."""
from __future__ import annotations

import pytest

from storage import CRON_PLATFORM, TASK_PLATFORM, InboundItem, RunClaim, Store, Target, TranscriptEvent
from storage.migrate import DERIVED, RUNTIME, TABLES, MigrationRefused, migrate_store

from .helpers import execute

pytestmark = pytest.mark.timeout(120)

KEY = "default.fake.dm.chat-1"


async def fill(path) -> None:
    """A state with a row in the tables a gateway writes: a session and its transcript, inbox rows and an adapter
    offset, a reply owed, a cron job and its run, a memory entry, a background task."""
    async with await Store.open(path) as store:
        session = await store.sessions.get_or_create(KEY, {"platform": "fake", "chat_id": "chat-1"})
        await store.sessions.append(session.session_id, [
            TranscriptEvent("user", "message", {"text": "where do pelicans nest"}, turn_id="t1"),
            TranscriptEvent("assistant", "message", {"text": "on islands, mostly é", "n": 1.25}, turn_id="t1")])
        await store.inbox.put_many_and_commit_offset([InboundItem(KEY, "fake", "m-1", {"text": "hi", "b": b"\0\xff"})],
                                                     "fake", {"offset": 7})
        await store.ledger.record_obligation(KEY, "m-1", Target("fake", "chat-1", reply_to="m-1"), "a reply")
        await store.cron.ensure_jobs(["job"], now=100.0)
        item = InboundItem(KEY, CRON_PLATFORM, "job:schedule:160", {"text": "tick", "internal": True})
        await store.cron.claim([RunClaim("job:schedule:160", "job", "schedule", 160.0, item)], {"job": 161.0},
                               now=161.0)
        await store.memory.add("default", "chat:fake:chat-1", "likes tea", 10, KEY, now=10.0)

        def task_item(number: int) -> InboundItem:
            return InboundItem(f"{KEY}.task-{number}", TASK_PLATFORM, f"{KEY}.task-{number}",
                               {"text": "dig", "internal": True})
        await store.tasks.start(KEY, session.session_id, "default", "look it up", 5, task_item, "fake:m-1", 100.0)


def counts(path, tables=TABLES) -> dict[str, int]:
    return {table: execute(path, f"SELECT count(*) FROM {table}")[0][0] for table in tables}


async def migrate(source, target):
    async with await Store.open(source) as source_store, await Store.open(target) as target_store:
        return await migrate_store(source_store, target_store)


async def test_a_state_goes_to_postgresql_and_back_the_same_row_for_row(sqlite_path, postgresql_path, tmp_path):
    await fill(sqlite_path)
    there = await migrate(sqlite_path, postgresql_path)
    assert [f.table for f in there] == list(TABLES)
    filled = {f.table for f in there if f.rows}
    assert {"sessions", "transcript", "inbox", "adapter_offsets", "obligations", "cron_jobs", "cron_runs", "memory",
            "tasks"} <= filled, f"the state written fills these tables; rows: {[(f.table, f.rows) for f in there]}"
    assert counts(postgresql_path) == counts(sqlite_path)

    back = tmp_path / "back.db"
    again = await migrate(postgresql_path, back)
    assert again == there, "the same rows (counts and digests) came back"

    async with await Store.open(postgresql_path) as store:
        [hit] = await store.sessions.search("pelicans")   # the index is rebuilt on the target from the transcript
        assert hit.session_key == KEY
        seq, inserted = await store.inbox.put(KEY, "fake", "m-2", {"text": "next"})
        highest = max(row[0] for row in execute(sqlite_path, "SELECT seq FROM inbox"))
        assert inserted and seq > highest, "a new row after the migration never takes a copied key"
        added = await store.memory.add("default", "chat:fake:chat-1", "hates coffee", 10, KEY, now=11.0)
        assert added.inserted


async def test_a_target_holding_rows_is_refused_and_left_as_it_was(sqlite_path, postgresql_path):
    await fill(sqlite_path)
    async with await Store.open(postgresql_path) as store:
        await store.memory.add("default", "chat:other", "was here first", 10, now=1.0)
    before = counts(postgresql_path)
    with pytest.raises(MigrationRefused, match="not empty"):
        await migrate(sqlite_path, postgresql_path)
    assert counts(postgresql_path) == before
    assert before["memory"] == 1 and before["sessions"] == 0


async def test_a_target_that_stores_a_row_differently_fails_verification_with_nothing_written(sqlite_path,
                                                                                            postgresql_path):
    """A trigger on the target (something an operator's database may carry) rewrites each memory text as it is
    inserted: the copy's read-back differs from the source, and the whole copy is rolled back."""
    await fill(sqlite_path)
    async with await Store.open(postgresql_path):
        pass   # the schema, no rows
    execute(postgresql_path, "CREATE FUNCTION shout() RETURNS trigger LANGUAGE plpgsql AS "
                             "$$ BEGIN NEW.text := upper(NEW.text); RETURN NEW; END $$")
    execute(postgresql_path, "CREATE TRIGGER shout BEFORE INSERT ON memory FOR EACH ROW EXECUTE FUNCTION shout()")
    with pytest.raises(MigrationRefused, match=r"verification failed.*memory: 1 rows"):
        await migrate(sqlite_path, postgresql_path)
    assert set(counts(postgresql_path).values()) == {0}, "nothing of the copy was committed"


async def test_every_table_of_the_schema_is_copied_or_derived(sqlite_path):
    """A table a new schema step adds must join TABLES (or DERIVED, or RUNTIME), else the migration would drop its
    rows."""
    async with await Store.open(sqlite_path):
        pass
    names = {row[0] for row in execute(sqlite_path, "SELECT name FROM sqlite_master WHERE type = 'table' AND name "
                                                    "NOT LIKE 'sqlite_%' AND name NOT LIKE 'transcript_fts_%'")}
    assert names == set(TABLES) | set(DERIVED) | set(RUNTIME)
