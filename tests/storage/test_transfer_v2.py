"""Moving a live session between hosts (storage/moving.py): export format version 2 with the runtime row, pending
inbox rows and open obligations; import idempotent and all or nothing; forget on the source all or nothing."""
import asyncio
import multiprocessing
import os
import signal

import pytest

from storage import ImportRefused, Store, Target, TranscriptEvent, TurnRunning, moving, session_key, transfer

from .helpers import Src, dump, open_store

pytestmark = pytest.mark.timeout(30)
KEY = session_key(Src())
OTHER = session_key(Src(chat_id="other"))


async def live_session(store, mid_turn=True):
    """A session answering its second message when the process died: the first answered and delivered, the
    second taken with its turn in flight (resumed once already), a third waiting, the reply half sent."""
    info = await store.sessions.get_or_create(KEY, {"platform": "telegram", "chat_id": "1001"})
    sid = info.session_id
    await store.sessions.set_display(sid, {"chat_title": "Fam"})
    done, _ = await store.inbox.put(KEY, "telegram", "m1", {"text": "first"})
    await store.inbox.take(done)
    await store.sessions.append(sid, [TranscriptEvent("user", "message", {"text": "first"}, "t1"),
                                      TranscriptEvent("assistant", "message", {"text": "answer"}, "t1")])
    await store.sessions.put_request(sid, "t1", {"model": "m"})
    delivered = await store.ledger.record_obligation(KEY, "telegram:m1", Target("telegram", "1001"), "reply",
                                                     ["answer"], claim=True)
    await store.ledger.mark_delivered(delivered.obligation_id, delivered.fence)
    await store.inbox.done(done)
    seq, _ = await store.inbox.put(KEY, "telegram", "m2", {"text": "second", "raw": b"\x00\xff"})
    await store.inbox.put(KEY, "telegram", "m3", {"text": "third"})
    await store.inbox.put(OTHER, "telegram", "x1", {"text": "another chat"})
    await store.inbox.take(seq)
    await store.sessions.append(sid, [TranscriptEvent("user", "message", {"text": "second"}, "t2")])
    await store.sessions.begin_turn(sid, "t2", seq)
    await store.sessions.set_compression_cursor(sid, 1)
    await store.sessions.claim_resume(sid, max_resumes=2)
    half = await store.ledger.record_obligation(KEY, "telegram:m2", Target("telegram", "1001", None, "m2"), "reply",
                                                ["part one ", "part two"], claim=True, send_intent=0)
    await store.ledger.record_part(half.obligation_id, half.fence, 0, "900")
    await store.ledger.record_send_intent(half.obligation_id, half.fence, 1)
    await store.ledger.record_obligation(OTHER, "telegram:x1", Target("telegram", "other"), "reply", ["hi"])
    if not mid_turn:
        await store.sessions.end_turn(sid, "t2")
    return sid, half.obligation_id


async def exported(databases, name="a.db"):
    async with open_store(databases / name) as a:
        sid, oid = await live_session(a)
        return sid, oid, await a.sessions.export_for_move(sid, interrupted=True)


async def test_the_live_state_moves_and_round_trips_byte_for_byte(databases):
    sid, oid, x = await exported(databases)
    maps = transfer.decode_maps(x)
    assert [m["type"] for m in maps[-4:]] == ["runtime", "inbox", "inbox", "obligation"]
    assert [m["platform_message_id"] for m in maps if m["type"] == "inbox"] == ["m2", "m3"], "pending rows only"
    assert [m["obligation_id"] for m in maps if m["type"] == "obligation"] == [oid], "open obligations of the key"
    async with open_store(databases / "b.db") as b:
        await b.inbox.put(OTHER, "telegram", "y1", {"text": "seqs differ here"})
        outcome = await b.sessions.import_moved(x)
        assert (outcome.changed, outcome.events, outcome.inbox, outcome.obligations) == (True, 3, 2, 1)
        assert await b.sessions.export_for_move(sid, interrupted=True) == x
        rt = await b.sessions.runtime(sid)
        row = await b.inbox.get(rt.resume_inbox_seq)
        assert row.platform_message_id == "m2" and row.state == "taken" and row.payload["raw"] == b"\x00\xff"
        assert rt.resume_already_attempted and rt.resume_attempts == 1 and rt.compression_cursor == 1
        assert [s.session_id for s in await b.sessions.pending_resumes()] == [sid], "the destination resumes it"
        ob = await b.ledger.get(oid)
        assert ob.parts == {0: "900"} and ob.send_intent == 1 and ob.state == "attempting"
        assert await b.inbox.put(KEY, "telegram", "m3", {}) == (row.seq + 1, False), "dedupe keys move too"


async def test_a_turn_in_flight_moves_only_when_asked_as_interrupted(databases):
    async with open_store(databases / "a.db") as a:
        sid, _ = await live_session(a)
        with pytest.raises(TurnRunning, match="--interrupted"):
            await a.sessions.export_for_move(sid)
        await a.sessions.end_turn(sid, "t2")
        x = await a.sessions.export_for_move(sid)
        assert transfer.decode_maps(x)[0]["version"] == 2
        assert transfer.decode_maps(await a.sessions.export_session(sid))[0]["version"] == 1, "plain stays v1"


async def test_importing_the_same_file_twice_changes_nothing_the_second_time(databases):
    sid, _, x = await exported(databases)
    async with open_store(databases / "b.db") as b:
        await b.sessions.import_moved(x)
    before = dump(databases / "b.db")
    async with open_store(databases / "b.db") as b:
        again = await b.sessions.import_moved(x)
        assert (again.changed, again.inbox, again.obligations) == (False, 0, 0)
        assert (await b.sessions.import_session(x)).session_id == sid, "sessions import reads version 2 as well"
        with pytest.raises(ImportRefused, match="--as-new"):
            await b.sessions.import_session(x, as_new=True)
    assert dump(databases / "b.db") == before


async def test_conflicts_are_refused_and_change_nothing(databases):
    sid, _, x = await exported(databases)
    cases = {
        "differs from the file": lambda b: b.sessions.import_moved(x),   # then served here: see below
        "another session key": lambda b: b.inbox.put(OTHER, "telegram", "m3", {"text": "same id, other chat"}),
        "already has a current session": lambda b: b.sessions.get_or_create(KEY),
    }
    for why, prepare in cases.items():
        path = databases / f"{len(why)}.db"
        async with open_store(path) as b:
            await prepare(b)
            if why == "differs from the file":
                await b.sessions.append(sid, [TranscriptEvent("user", "message", {"text": "served here"})])
        before = dump(path)
        async with open_store(path) as b:
            with pytest.raises(ImportRefused, match=why):
                await b.sessions.import_moved(x)
        assert dump(path) == before, why


async def test_truncated_or_corrupted_files_are_refused_before_anything_changes(databases):
    sid, _, x = await exported(databases)
    target = databases / "b.db"
    async with open_store(target) as b:
        await b.inbox.put(OTHER, "telegram", "y1", {})
    before, source = dump(target), dump(databases / "a.db")
    async with open_store(target) as b, open_store(databases / "a.db") as a:
        for cut in range(0, len(x), 7):
            with pytest.raises(ImportRefused, match="nothing was changed"):
                await b.sessions.import_moved(x[:cut])
            with pytest.raises(ImportRefused, match="forget refused, nothing was changed"):
                await a.sessions.forget_moved(x[:cut])
        recs = transfer.decode_maps(x)
        forged = [*recs[:-1], dict(recs[-1], obligation_id="0" * 64)]
        with pytest.raises(ImportRefused, match="obligation id does not match"):
            await b.sessions.import_moved(transfer.frame(forged))
        plain = await a.sessions.export_session(sid)
        with pytest.raises(ImportRefused, match="no live state"):
            await b.sessions.import_moved(plain)
        with pytest.raises(ImportRefused, match="forget refused, nothing was changed: version 1 file"):
            await a.sessions.forget_moved(plain)
    assert dump(target) == before and dump(databases / "a.db") == source


async def test_forget_deletes_exactly_what_the_file_holds_once(databases):
    sid, oid, x = await exported(databases)
    async with open_store(databases / "a.db") as a:
        gone = await a.sessions.forget_moved(x)
        assert (gone.changed, gone.inbox, gone.obligations) == (True, 2, 1)
        assert await a.sessions.get(sid) is None and await a.ledger.get(oid) is None
        assert await a.inbox.rows_in_state(KEY) == [] and (await a.inbox.counts(KEY))["done"] == 1, \
            "the done row was not in the file: it stays, with its dedupe protection"
        assert [r.platform_message_id for r in await a.inbox.rows_in_state(OTHER)] == ["x1"]
        assert (await a.ledger.counts())["delivered"] == 1 and (await a.ledger.counts())["pending"] == 1
        assert await a.sessions.search("second") == []
    before = dump(databases / "a.db")
    async with open_store(databases / "a.db") as a:
        again = await a.sessions.forget_moved(x)
        assert (again.changed, again.inbox, again.obligations) == (False, 0, 0)
    assert dump(databases / "a.db") == before


@pytest.mark.parametrize("change", ["served", "new input", "delivery went on"])
async def test_forget_is_refused_when_the_source_changed_since_the_export(databases, change):
    sid, oid, x = await exported(databases)
    async with open_store(databases / "a.db") as a:
        if change == "served":
            await a.sessions.append(sid, [TranscriptEvent("assistant", "message", {"text": "more"}, "t2")])
        elif change == "new input":
            await a.inbox.put(KEY, "telegram", "m4", {"text": "arrived after the export"})
        else:
            ob = await a.ledger.get(oid)
            await a.ledger.record_part(oid, ob.fence, 1, "901")
    before = dump(databases / "a.db")
    async with open_store(databases / "a.db") as a:
        with pytest.raises(ImportRefused, match="forget refused, nothing was changed"):
            await a.sessions.forget_moved(x)
    assert dump(databases / "a.db") == before


def _forget_until_killed(path, data, ready_fd, hold_fd):
    """In a child: forget, but stop inside the transaction (after the inbox rows are deleted) until killed."""
    original = moving._obligation_here

    async def announce_then_hold(conn, oid):
        os.write(ready_fd, b"x")
        os.read(hold_fd, 1)   # never answered: the parent kills this process here
        return await original(conn, oid)
    moving._obligation_here = announce_then_hold

    async def run():
        store = await Store.open(path)
        await store.sessions.forget_moved(data)
    asyncio.run(run())


def test_a_forget_killed_half_way_leaves_everything(databases):
    sid, oid, x = asyncio.run(exported(databases))
    path = databases / "a.db"
    before = dump(path)
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    child = multiprocessing.get_context("fork").Process(target=_forget_until_killed,
                                                        args=(str(path), x, ready_w, hold_r))
    child.start()
    try:
        assert os.read(ready_r, 1) == b"x"
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
        assert child.exitcode == -signal.SIGKILL
    finally:
        for fd in (ready_r, ready_w, hold_r, hold_w):
            os.close(fd)
    assert dump(path) == before, "killed inside the transaction: nothing of the forget happened"

    async def then_forget():
        async with open_store(path) as a:
            assert (await a.sessions.forget_moved(x)).changed and await a.sessions.get(sid) is None
    asyncio.run(then_forget())


async def test_a_second_file_of_a_session_served_here_since_adds_only_the_input_that_came_after_the_first(databases):
    """A live move (actors/sessions/moves_out.py): the source's forget met a message that came after its first
    file, so it sends a second one. The destination has served the session since: its transcript stays as it is,
    and only the rows and obligations it does not hold yet are added. Without ``served_here_ok`` it is refused."""
    async with open_store(databases / "a.db") as a:
        sid, _ = await live_session(a, mid_turn=False)
        first = await a.sessions.export_for_move(sid)
    async with open_store(databases / "b.db") as b:
        await b.sessions.import_moved(first)
        await b.sessions.append(sid, [TranscriptEvent("user", "message", {"text": "served here"}, "t9")])
    async with open_store(databases / "a.db") as a:
        await a.inbox.put(KEY, "telegram", "m4", {"text": "came after the first file"})
        with pytest.raises(ImportRefused):
            await a.sessions.forget_moved(first)
        second = await a.sessions.export_for_move(sid)
    async with open_store(databases / "b.db") as b:
        with pytest.raises(ImportRefused, match="differs from the file"):
            await b.sessions.import_moved(second)
        outcome = await b.sessions.import_moved(second, served_here_ok=True)
        assert (outcome.inbox, outcome.obligations) == (1, 0), outcome
        assert [r.platform_message_id for r in await b.inbox.rows_in_state(KEY)] == ["m2", "m3", "m4"]
        texts = [e.payload["text"] for e in await b.sessions.load(sid)]
        assert texts[-1] == "served here", "what the destination served since is kept"
    async with open_store(databases / "a.db") as a:
        assert (await a.sessions.forget_moved(second)).changed
        assert await a.sessions.current(KEY) is None and await a.inbox.rows_in_state(KEY) == []


async def test_a_model_chosen_with_slash_model_moves_with_the_session(databases):
    async with open_store(databases / "a.db") as a:
        sid, _oid = await live_session(a, mid_turn=False)
        assert await a.sessions.load(sid, 1, kind="model") == []
        for model in ("small", "large"):
            await a.sessions.append(sid, [TranscriptEvent("system", "model", {"model": model})])
        await a.sessions.append(sid, [TranscriptEvent("user", "message", {"text": "later"}, "t3")])
        x = await a.sessions.export_for_move(sid)
    async with open_store(databases / "b.db") as b:
        await b.sessions.import_moved(x)
        (moved,) = await b.sessions.load(sid, 1, kind="model")
        assert (moved.role, moved.payload) == ("system", {"model": "large"}), moved
