import asyncio

import pytest

from storage import IllegalTransition, NotFound, RecordError, StorageError, TranscriptEvent, session_key
from storage.db import fetch_one

from .helpers import Src, open_store

KEY = session_key(Src())
OTHER = session_key(Src(chat_id="2002"))


def msg(role, text, turn="t1", kind="message"):
    return TranscriptEvent(role=role, kind=kind, payload={"text": text}, turn_id=turn)


async def test_get_or_create_returns_the_one_current_session(db_path):
    async with open_store(db_path) as store:
        first = await store.sessions.get_or_create(KEY, {"platform": "telegram", "chat_id": "1001"})
        again = await store.sessions.get_or_create(KEY, {"ignored": True})
        assert first.created and not again.created
        assert again.session_id == first.session_id and again.source == {"platform": "telegram", "chat_id": "1001"}
        racing = await asyncio.gather(*(store.sessions.get_or_create(OTHER) for _ in range(20)))
        assert len({s.session_id for s in racing}) == 1 and sum(s.created for s in racing) == 1
        with pytest.raises(ValueError, match="not a session key"):
            await store.sessions.get_or_create("../etc/passwd")


async def test_reset_keeps_the_old_session_findable(db_path):
    async with open_store(db_path) as store:
        old = await store.sessions.get_or_create(KEY, {"platform": "telegram"})
        await store.sessions.append(old.session_id, [msg("user", "remember the walrus")])
        new = await store.sessions.reset(KEY)
        assert new.session_id != old.session_id and new.state == "active" and new.source == old.source
        assert (await store.sessions.get(old.session_id)).state == "reset"
        assert (await store.sessions.get_or_create(KEY)).session_id == new.session_id
        assert {s.session_id for s in await store.sessions.list(session_key=KEY)} == {old.session_id, new.session_id}
        hits = await store.sessions.search("walrus")
        assert [h.session_id for h in hits] == [old.session_id]
        assert await store.sessions.load(new.session_id) == []


async def test_state_transitions(db_path):
    async with open_store(db_path) as store:
        s = await store.sessions.get_or_create(KEY)
        await store.sessions.suspend(s.session_id)
        assert (await store.sessions.get_or_create(KEY)).state == "suspended"  # still the current one
        with pytest.raises(IllegalTransition):
            await store.sessions.suspend(s.session_id)
        await store.sessions.resume(s.session_id)
        with pytest.raises(IllegalTransition):
            await store.sessions.resume(s.session_id)
        await store.sessions.close(s.session_id)
        with pytest.raises(IllegalTransition):
            await store.sessions.suspend(s.session_id)
        fresh = await store.sessions.get_or_create(KEY)
        assert fresh.created and fresh.session_id != s.session_id
        with pytest.raises(NotFound):
            await store.sessions.suspend("nope")


async def test_append_and_load_windows(db_path):
    async with open_store(db_path) as store:
        sid = (await store.sessions.get_or_create(KEY)).session_id
        assert await store.sessions.append(sid, [msg("user", "q1"), msg("assistant", "a1")]) == [1, 2]
        tool = TranscriptEvent("tool", "tool_result", {"name": "search", "result": [1, b"\x00"]}, "t1", 123.5)
        assert await store.sessions.append(sid, [tool, {"role": "user", "kind": "message", "payload": "q2"}]) == [3, 4]
        events = await store.sessions.load(sid)
        assert [e.seq for e in events] == [1, 2, 3, 4]
        assert events[2].payload == {"name": "search", "result": [1, b"\x00"]} and events[2].created_at == 123.5
        assert [e.seq for e in await store.sessions.load(sid, last_n=2)] == [3, 4]
        assert [e.seq for e in await store.sessions.load(sid, since_seq=1, until_seq=3)] == [2, 3]
        assert [e.seq for e in await store.sessions.load(sid, since_seq=1, until_seq=3, last_n=1)] == [3]
        with pytest.raises(ValueError, match="role"):
            await store.sessions.append(sid, [msg("user", "ok"), msg("robot", "no")])
        with pytest.raises(RecordError):
            await store.sessions.append(sid, [msg("user", "ok"), TranscriptEvent("user", "m", {"x": object()})])
        assert len(await store.sessions.load(sid)) == 4  # a refused batch adds nothing
        with pytest.raises(NotFound):
            await store.sessions.append("missing", [msg("user", "x")])
        with pytest.raises(StorageError, match="append-only"):
            await store._db.write(lambda c: c.execute("UPDATE transcript SET kind = 'x'"))


async def test_search_across_sessions(db_path):
    async with open_store(db_path) as store:
        a = (await store.sessions.get_or_create(KEY)).session_id
        b = (await store.sessions.get_or_create(OTHER)).session_id
        await store.sessions.append(a, [msg("user", "The Quick brown fox"), msg("assistant", "jumps")])
        await store.sessions.append(b, [msg("user", "a quick reply"),
                                        TranscriptEvent("assistant", "message", {"content": [{"text": "café"}]})])
        assert {h.session_id for h in await store.sessions.search("quick")} == {a, b}
        assert [h.seq for h in await store.sessions.search("quick fox")] == [1]
        assert [h.session_id for h in await store.sessions.search("cafe")] == [b]  # diacritics folded
        assert [h.session_id for h in await store.sessions.search("quick", session_key=OTHER)] == [b]
        hit = (await store.sessions.search("fox"))[0]
        assert hit.session_key == KEY and "[fox]" in hit.snippet
        for hostile in ['"', 'fox"', "AND OR NOT", "*", "(", "NEAR(", "col:fox", ""]:
            await store.sessions.search(hostile)  # user text never breaks the FTS query
        assert await store.sessions.rebuild_search_index() == 4
        assert {h.session_id for h in await store.sessions.search("quick")} == {a, b}


async def test_rename_list_display_and_sidecar(db_path):
    async with open_store(db_path) as store:
        a = (await store.sessions.get_or_create(KEY)).session_id
        b = (await store.sessions.get_or_create(OTHER)).session_id
        await store.sessions.rename(a, "Walrus talk")
        assert [s.session_id for s in await store.sessions.list()] == [a, b]
        assert (await store.sessions.get(a)).title == "Walrus talk"
        assert [s.session_id for s in await store.sessions.list(state="active", limit=1, offset=1)] == [b]
        assert await store.sessions.set_display(a, {"chat_title": "Fam", "platform_name": "Telegram"}) == {
            "chat_title": "Fam", "platform_name": "Telegram"}
        assert await store.sessions.set_display(a, {"chat_title": None}) == {"platform_name": "Telegram"}
        assert await store.sessions.get_display(a) == {"platform_name": "Telegram"}
        assert await store.sessions.get_display(b) == {}
        with pytest.raises(RecordError, match="limit"):
            await store.sessions.set_display(a, {"big": "x" * 20000})
        request = {"model": "m", "messages": [{"role": "system", "content": "you are"}], "tools": []}
        await store.sessions.put_request(a, "t1", request)
        assert await store.sessions.get_request(a, "t1") == request
        await store.sessions.put_request(a, "t1", {**request, "messages": []})
        assert (await store.sessions.get_request(a, "t1"))["messages"] == []
        assert await store.sessions.get_request(a, "t2") is None
        assert await store.sessions.load(a) == []  # the sidecar is not the transcript


async def test_prune(db_path):
    async with open_store(db_path) as store:
        old = (await store.sessions.get_or_create(KEY)).session_id
        await store.sessions.append(old, [msg("user", "ancient walrus")])
        await store.sessions.put_request(old, "t1", {"x": 1})
        await store.sessions.begin_turn(old, "tok", 1)
        cutoff_now = (await store.sessions.get(old)).updated_at + 10
        new = (await store.sessions.get_or_create(OTHER)).session_id
        await store.sessions._db.write(lambda c: c.execute("UPDATE sessions SET updated_at = ? WHERE session_id = ?",
                                                           (cutoff_now + 100, new)))
        counts = await store.sessions.prune(older_than_s=5, now=cutoff_now)
        assert counts == {"closed": 1, "sidecars_deleted": 1, "runtime_deleted": 1, "sessions_deleted": 0}
        assert (await store.sessions.get(old)).state == "closed"
        assert len(await store.sessions.load(old)) == 1 and await store.sessions.get_request(old, "t1") is None
        assert (await store.sessions.get(new)).state == "active"
        counts = await store.sessions.prune(older_than_s=5, keep_transcripts=False, now=cutoff_now)
        assert counts["sessions_deleted"] == 1
        assert await store.sessions.get(old) is None and await store.sessions.search("walrus") == []
        assert await store.sessions._db.read(fetch_one, "SELECT COUNT(*) FROM transcript") == (0,)
        assert await store.sessions.get(new) is not None
