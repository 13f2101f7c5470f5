import json

import pytest

from storage import (AmbiguousId, ImportRefused, IllegalTransition, NotFound, Target, TranscriptEvent, cli,
                     session_key, short_id)

from .helpers import Src, open_store

KEY = session_key(Src())


async def test_admin_functions_return_json(databases, tmp_path):
    async with open_store(databases / "a.db") as store:
        info = await store.sessions.get_or_create(KEY, {"platform": "telegram"})
        await store.sessions.append(info.session_id, [
            TranscriptEvent("user", "message", {"text": "find the walrus", "blob": b"\x01"}, "t1")])
        listed = await cli.sessions_list(store)
        assert listed["count"] == 1 and listed["sessions"][0]["session_key"] == KEY
        for key_or_id in (KEY, info.session_id):
            shown = await cli.session_show(store, key_or_id, last_n=5)
            assert shown["session"]["session_id"] == info.session_id
            assert shown["events"][0]["payload"]["blob"] == {"$base64": "AQ=="}
        with pytest.raises(NotFound):
            await cli.session_show(store, "nope")
        found = await cli.sessions_search(store, "walrus")
        assert found["count"] == 1 and found["hits"][0]["seq"] == 1
        exported = await cli.session_export(store, info.session_id, tmp_path / "s.export")
        assert exported["bytes"] == (tmp_path / "s.export").stat().st_size
        ob = await store.ledger.record_obligation(KEY, "m1", Target("telegram", "1001"), "reply",
                                                  chunks=["word " * 100], claim=True)
        await store.ledger.mark_failed(ob.obligation_id, ob.fence, "HTTP 502")
        listing = await cli.deliveries(store, state="failed")
        assert listing["counts"]["failed"] == 1 and len(listing["deliveries"][0]["content_preview"]) == 200
        retried = await cli.delivery_retry(store, ob.obligation_id)
        assert retried["state"] == "pending" and retried["attempts"] == 0
        with pytest.raises(IllegalTransition):
            await cli.delivery_retry(store, ob.obligation_id)
        for result in (listed, shown, found, exported, listing, retried):
            json.dumps(result)
    async with open_store(databases / "b.db") as other:
        imported = await cli.session_import(other, tmp_path / "s.export", 1 << 20)
        assert imported["session"]["session_id"] == info.session_id and imported["last_seq"] == 1
        json.dumps(imported)
        (tmp_path / "bad.export").write_bytes((tmp_path / "s.export").read_bytes()[:-3])
        with pytest.raises(ImportRefused):
            await cli.session_import(other, tmp_path / "bad.export", 1 << 20)


async def test_an_export_never_writes_through_a_planted_symlink_and_is_private(databases, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "out.export").symlink_to(victim)
    for name in (".out.export.1234.tmp", ".out.export.tmp"):   # the temporary names exports used to take
        (tmp_path / name).symlink_to(victim)
    async with open_store(databases / "a.db") as store:
        info = await store.sessions.get_or_create(KEY, {"platform": "telegram"})
        await cli.session_export(store, info.session_id, tmp_path / "out.export")
    assert victim.read_text() == "precious"
    out = tmp_path / "out.export"
    assert not out.is_symlink() and out.stat().st_mode & 0o777 == 0o600
    assert not list(tmp_path.glob(".out.export.*.part"))


async def test_an_import_past_its_size_limit_is_refused_after_reading_at_most_the_limit(databases):
    async with open_store(databases / "a.db") as store:
        with pytest.raises(ImportRefused, match="larger than the import limit of 4,096 bytes"):
            await cli.session_import(store, "/dev/zero", 4096)


async def test_the_operator_abandons_a_failed_reply_but_never_one_in_flight(databases):
    async with open_store(databases / "a.db") as store:
        ob = await store.ledger.record_obligation(KEY, "m1", Target("telegram", "1001"), "reply", claim=True)
        with pytest.raises(IllegalTransition, match="being delivered right now"):
            await cli.delivery_abandon(store, ob.obligation_id)
        await store.ledger.mark_failed(ob.obligation_id, ob.fence, "HTTP 403: bot blocked")
        abandoned = await cli.delivery_abandon(store, ob.obligation_id)
        assert abandoned["state"] == "abandoned" and abandoned["last_error"] == "abandoned by the operator"
        assert await store.ledger.sweep_recoverable(["telegram"]) == [], "the sweeper leaves it alone"
        assert (await cli.delivery_retry(store, ob.obligation_id))["state"] == "pending", "and a retry undoes it"
        with pytest.raises(NotFound):
            await cli.delivery_abandon(store, "no-such-id")


async def test_the_operator_suspends_and_resumes_a_session_by_key_or_id(databases):
    async with open_store(databases / "a.db") as store:
        info = await store.sessions.get_or_create(KEY, {"platform": "telegram"})
        assert (await cli.session_set_state(store, KEY, suspended=True))["state"] == "suspended"
        assert (await store.sessions.current(KEY)).state == "suspended"
        assert (await cli.session_set_state(store, info.session_id, suspended=False))["state"] == "active"
        with pytest.raises(IllegalTransition):
            await cli.session_set_state(store, KEY, suspended=False)   # not suspended


async def test_a_session_is_named_by_any_unique_prefix_of_its_id_and_a_shared_one_lists_the_candidates(databases, tmp_path,
                                                                                                   monkeypatch):
    monkeypatch.setattr("storage.cli.MIN_ID_PREFIX", 1)   # a prefix shared by construction: one hex digit
    async with open_store(databases / "a.db") as store:
        # 17 sessions: two of them at least share the first hex digit of their ids (16 digits)
        infos = [await store.sessions.get_or_create(session_key(Src(chat_id=str(2000 + i)))) for i in range(17)]
        by_digit: dict = {}
        for info in infos:
            by_digit.setdefault(info.session_id[0], []).append(info)
        shared = next(group for group in by_digit.values() if len(group) > 1)
        one = infos[0]
        for prefix in (one.session_id, short_id(one.session_id), one.session_id[:len(one.session_id) - 3]):
            assert (await cli.session_show(store, prefix))["session"]["session_id"] == one.session_id
        listed = (await cli.sessions_list(store))["sessions"]
        assert {s["short_id"] for s in listed} == {short_id(i.session_id) for i in infos}
        with pytest.raises(AmbiguousId) as ambiguous:
            await cli.session_show(store, shared[0].session_id[0])
        for info in shared:   # every candidate, by the id form the listing shows, with its key
            assert short_id(info.session_id) in str(ambiguous.value) and info.session_key in str(ambiguous.value)
        with pytest.raises(NotFound, match="no session with id, id prefix, key, user or chat"):
            await cli.session_show(store, "zz-no-such")
        exported = await cli.session_export(store, short_id(one.session_id), tmp_path / "one.export")
        assert exported["session_id"] == one.session_id


async def test_an_import_as_new_is_a_copy_under_a_new_id_closed_beside_the_current_session(databases, tmp_path):
    async with open_store(databases / "a.db") as store:
        info = await store.sessions.get_or_create(KEY, {"platform": "telegram"})
        await store.sessions.append(info.session_id, [TranscriptEvent("user", "message", {"text": "hello"}, "t1")])
        await cli.session_export(store, info.session_id, tmp_path / "s.export")
        with pytest.raises(ImportRefused, match="already exists .*--as-new"):
            await cli.session_import(store, tmp_path / "s.export", 1 << 20)
        copy = await cli.session_import(store, tmp_path / "s.export", 1 << 20, as_new=True)
        assert copy["session"]["session_id"] != info.session_id and copy["last_seq"] == 1
        assert copy["session"]["state"] == "closed", "the key's current session stays the original"
        assert (await store.sessions.current(KEY)).session_id == info.session_id
        shown = await cli.session_show(store, copy["session"]["session_id"])
        assert shown["events"][0]["payload"]["text"] == "hello"
        assert (await cli.sessions_search(store, "hello"))["count"] == 2, "the copy is searchable too"
    async with open_store(databases / "b.db") as fresh:
        again = await cli.session_import(fresh, tmp_path / "s.export", 1 << 20, as_new=True)
        assert again["session"]["state"] == "active", "with no current session for the key, it stays as it was"


async def test_a_delivery_shows_the_first_words_of_its_reply_on_one_line(databases):
    async with open_store(databases / "a.db") as store:
        ob = await store.ledger.record_obligation(KEY, "m1", Target("telegram", "1001"), "reply",
                                                  chunks=["The answer is\nforty-two, ", "as computed."], claim=True)
        [listed] = (await cli.deliveries(store))["deliveries"]
        assert listed["content_preview"] == "The answer is forty-two, as computed."
        assert listed["content_chars"] == len("The answer is\nforty-two, as computed.")
        await store.ledger.record_obligation(KEY, "m2", Target("telegram", "1001"), "reply", chunks=[])
        unfinished = [d for d in (await cli.deliveries(store))["deliveries"] if d["obligation_id"] != ob.obligation_id]
        assert unfinished[0]["content_preview"] == "", "a reply with no final text yet has none to show"


async def test_a_session_is_named_by_its_user_or_chat_and_a_name_shared_by_two_chats_lists_both(databases,
                                                                                               monkeypatch):
    monkeypatch.setattr("storage.sessions.SUMMARY_BATCH", 1)     # a listing's summaries read in several batches
    async with open_store(databases / "a.db") as store:
        ada = await store.sessions.get_or_create(session_key(Src(chat_id="42")), {
            "platform": "telegram", "chat_id": "42", "user_id": "7", "user_name": "ada"})
        await store.sessions.reset(ada.session_key, {"platform": "telegram", "chat_id": "42", "user_name": "ada"})
        current = await store.sessions.current(ada.session_key)
        other = await store.sessions.get_or_create(session_key(Src(platform="discord", chat_id="43")), {
            "platform": "discord", "chat_id": "43", "user_name": "ada"})
        for name in ("telegram:ada", "telegram:42", "42", "7"):    # its conversation's current session
            assert (await cli.session_show(store, name))["session"]["session_id"] == current.session_id, name
        assert (await cli.session_show(store, "discord:ada"))["session"]["session_id"] == other.session_id
        with pytest.raises(AmbiguousId) as ambiguous:
            await cli.session_show(store, "ada")
        assert short_id(current.session_id) in str(ambiguous.value) and short_id(other.session_id) in str(
            ambiguous.value) and short_id(ada.session_id) not in str(ambiguous.value)
        with pytest.raises(NotFound):
            await cli.session_show(store, "slack:ada")
        matrix = await store.sessions.get_or_create(session_key(Src(platform="matrix", chat_id="!r:m.org")), {
            "platform": "matrix", "chat_id": "!r:m.org", "user_id": "@ada:m.org"})
        for name in ("@ada:m.org", "matrix:@ada:m.org", "matrix:!r:m.org"):      # values with a colon of their own
            assert (await cli.session_show(store, name))["session"]["session_id"] == matrix.session_id, name
        await store.sessions.append(current.session_id, [TranscriptEvent("user", "message", {"text": "hi there"}),
                                                         TranscriptEvent("assistant", "message", {"text": "hello"})])
        listed = {s["session_id"]: s for s in (await cli.sessions_list(store))["sessions"]}
        assert listed[other.session_id]["user"] == "discord:ada" and listed[other.session_id]["messages"] == 0
        assert listed[current.session_id]["messages"] == 2 and listed[current.session_id]["preview"] == "hello"
        assert listed[current.session_id]["user"] == "telegram:ada"
