"""The search index, brought up to date in batches (storage/search_index.py): an append only marks its events, a
catch-up indexes them, a search catches up first. Nothing is indexed twice or missed, across reopening and across
ids SQLite hands out again."""
from __future__ import annotations

import pytest

from storage import Database, Store, session_key
from storage.schema import MIGRATIONS
from storage.sessions import TranscriptEvent

from .helpers import Src, execute, open_store

pytestmark = pytest.mark.timeout(60)
KEY = session_key(Src())
OTHER = session_key(Src(chat_id="2002"))


def msg(text: str) -> TranscriptEvent:
    return TranscriptEvent("user", "message", {"text": text})


def fts_rows(path) -> int:
    return execute(path, "SELECT COUNT(*) FROM transcript_fts")[0][0]


async def test_an_append_is_pending_until_a_catch_up_and_a_search_always_sees_it(db_path):
    async with open_store(db_path) as store:
        sid = (await store.sessions.get_or_create(KEY)).session_id
        await store.sessions.append(sid, [msg("walrus tusks"), msg("narwhal horn")])
        assert await store.sessions.pending_search_index() == 2 and fts_rows(db_path) == 0
        assert [h.seq for h in await store.sessions.search("walrus")] == [1]   # caught up by the search itself
        assert await store.sessions.pending_search_index() == 0 and fts_rows(db_path) == 2
        await store.sessions.append(sid, [msg("walrus again")])
        assert await store.sessions.index_pending() == 1
        assert await store.sessions.index_pending() == 0
        assert sorted(h.seq for h in await store.sessions.search("walrus")) == [1, 3]
        assert fts_rows(db_path) == 3, "nothing indexed twice"


async def test_a_backlog_goes_a_batch_at_a_time_oldest_first(db_path):
    async with open_store(db_path) as store:
        sid = (await store.sessions.get_or_create(KEY)).session_id
        await store.sessions.append(sid, [msg(f"word{i}") for i in range(5)])
        assert [await store.sessions.index_pending(limit=2) for _ in range(4)] == [2, 2, 1, 0]
        assert [h.seq for h in await store.sessions.search("word0")] == [1]
        assert [h.seq for h in await store.sessions.search("word4")] == [5]


async def test_what_is_pending_survives_closing_the_store_without_a_catch_up(db_path):
    async with open_store(db_path) as store:
        sid = (await store.sessions.get_or_create(KEY)).session_id
        await store.sessions.append(sid, [msg("kept across a kill")])
    # The mark committed with the event (as a kill -9 right after the append would leave it).
    async with open_store(db_path) as store:
        assert await store.sessions.pending_search_index() == 1
        assert [h.seq for h in await store.sessions.search("kill")] == [1]


async def test_ids_given_out_again_after_a_deletion_are_still_indexed(db_path):
    async with open_store(db_path) as store:
        a = (await store.sessions.get_or_create(KEY)).session_id
        b = (await store.sessions.get_or_create(OTHER)).session_id
        await store.sessions.append(a, [msg("first chat")])
        await store.sessions.append(b, [msg("second chat forgotten"), msg("more of it")])
        await store.sessions.index_pending()
    # the newest session deleted (as a forget does): on SQLite its ids are free again
    execute(db_path, "DELETE FROM sessions WHERE session_id = ?", (b,))
    assert fts_rows(db_path) == 1, "a deleted event takes its index row along"
    async with open_store(db_path) as store:
        c = (await store.sessions.get_or_create(OTHER)).session_id
        await store.sessions.append(c, [msg("third chat reuses ids"), msg("zebra")])
        assert [h.session_id for h in await store.sessions.search("zebra")] == [c]
        assert await store.sessions.search("forgotten") == []


async def test_rebuild_indexes_every_event_once(db_path):
    async with open_store(db_path) as store:
        sid = (await store.sessions.get_or_create(KEY)).session_id
        await store.sessions.append(sid, [msg("alpha"), msg("beta"), TranscriptEvent("tool", "call", {"x": 1})])
        await store.sessions.index_pending(limit=1)
        assert await store.sessions.rebuild_search_index() == 3
        assert await store.sessions.pending_search_index() == 0 and fts_rows(db_path) == 2   # the tool call has no text


async def test_a_database_of_the_version_before_opens_with_its_events_searchable_and_none_pending(sqlite_path):
    # SQLite only: no PostgreSQL database was ever written by the version before the pending marks.
    db_path = sqlite_path
    marks = next(n for n, step in enumerate(MIGRATIONS) if "CREATE TABLE search_pending" in str(step))
    old = await Database.open(db_path, migrations=MIGRATIONS[:marks])   # the version before the pending marks
    store = Store(old)
    sid = (await store.sessions.get_or_create(KEY)).session_id
    async def indexed_append(conn):   # what that version's append did: the row and its index row at once
        cur = await conn.execute("INSERT INTO transcript (session_id, seq, role, kind, created_at, payload) "
                                 "VALUES (?, 1, 'user', 'message', 0, ?)", (sid, b"\x81\xa4text\xa6oldies"))
        await conn.execute("INSERT INTO transcript_fts (rowid, body) VALUES (?, 'oldies')", (cur.lastrowid,))
    await old.write(indexed_append)
    await old.close()
    async with open_store(db_path) as store:
        assert await store.sessions.pending_search_index() == 0
        assert [h.seq for h in await store.sessions.search("oldies")] == [1]
        assert fts_rows(db_path) == 1


async def test_a_search_that_cannot_catch_up_searches_the_index_as_it_stands(db_path, monkeypatch):
    import storage.search_index as search_index
    from storage import StorageFull
    async with open_store(db_path) as store:
        sid = (await store.sessions.get_or_create(KEY)).session_id
        await store.sessions.append(sid, [msg("indexed before the disk filled")])
        await store.sessions.index_pending()
        await store.sessions.append(sid, [msg("appended after")])

        async def disk_full(conn, limit=None):
            raise StorageFull("database or disk is full")
        monkeypatch.setattr(search_index, "catch_up", disk_full)
        assert [h.seq for h in await store.sessions.search("indexed")] == [1]
        assert await store.sessions.search("appended") == []   # still pending: found once the disk has room
