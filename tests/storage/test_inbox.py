import pytest

from storage import IllegalTransition, InboundItem, NotFound, RecordError, session_key

from .helpers import Src, open_store

A = session_key(Src(chat_id="a"))
B = session_key(Src(chat_id="b"))


async def test_put_dedups_on_platform_message_id(db_path):
    async with open_store(db_path) as store:
        first = await store.inbox.put(A, "telegram", "m1", {"text": "hi"})
        assert first[1] is True
        assert await store.inbox.put(A, "telegram", "m1", {"text": "replayed"}) == (first[0], False)
        assert (await store.inbox.put(A, "slack", "m1", {"text": "other platform"}))[1] is True
        s2, _ = await store.inbox.put(B, "telegram", 12345, {"text": "int id"})
        assert s2 > first[0] and (await store.inbox.get(s2)).platform_message_id == "12345"
        assert (await store.inbox.get(first[0])).payload == {"text": "hi"}
    async with open_store(db_path) as store:  # dedup survives a restart
        assert await store.inbox.put(A, "telegram", "m1", {}) == (first[0], False)
        with pytest.raises(ValueError):
            await store.inbox.put(A, "telegram", "", {})
        with pytest.raises(RecordError):
            await store.inbox.put(A, "telegram", "m9", {"x": object()})


async def test_lifecycle_and_illegal_moves(db_path):
    async with open_store(db_path) as store:
        s1, _ = await store.inbox.put(A, "telegram", "1", {"n": 1})
        s2, _ = await store.inbox.put(A, "telegram", "2", {"n": 2})
        s3, _ = await store.inbox.put(B, "telegram", "3", {"n": 3})
        assert s1 < s2 < s3
        assert (await store.inbox.next_for(A)).seq == s1
        taken = await store.inbox.take(s1)
        assert taken.state == "taken" and taken.payload == {"n": 1}
        assert (await store.inbox.next_for(A)).seq == s2
        for bad in (store.inbox.take(s1), store.inbox.done(s2)):
            with pytest.raises(IllegalTransition):
                await bad
        assert (await store.inbox.done(s1)).state == "done"
        for bad in (store.inbox.take(s1), store.inbox.done(s1), store.inbox.drop(s1, "late")):
            with pytest.raises(IllegalTransition):
                await bad
        dropped = await store.inbox.drop(s2, "sender not allowed")
        assert dropped.state == "dropped" and dropped.reason == "sender not allowed"
        assert await store.inbox.next_for(A) is None
        with pytest.raises(NotFound):
            await store.inbox.take(999)
        assert await store.inbox.counts(A) == {"received": 0, "taken": 0, "done": 1, "dropped": 1}
        assert await store.inbox.counts() == {"received": 1, "taken": 0, "done": 1, "dropped": 1}
        assert [r.seq for r in await store.inbox.rows_in_state(A, ["done", "dropped"])] == [s1, s2]
        with pytest.raises(ValueError):
            await store.inbox.rows_in_state(A, ["bogus"])


async def test_restart_recovery(db_path):
    async with open_store(db_path) as store:
        s1, _ = await store.inbox.put(A, "telegram", "1", {})
        s2, _ = await store.inbox.put(A, "telegram", "2", {})
        await store.inbox.put(B, "telegram", "3", {})
        await store.inbox.take(s1)
    async with open_store(db_path) as store:  # the process that took s1 died
        assert await store.inbox.sessions_with_pending() == sorted([A, B])
        assert [r.seq for r in await store.inbox.rows_in_state(A, ["taken"])] == [s1]
        assert await store.inbox.requeue_taken(A) == 1
        assert [r.seq for r in await store.inbox.rows_in_state(A, ["received"])] == [s1, s2]
        assert (await store.inbox.next_for(A)).seq == s1
        for seq in (s1, s2):
            await store.inbox.take(seq)
            await store.inbox.done(seq)
        assert await store.inbox.sessions_with_pending() == [B]


async def test_offsets_commit_with_their_rows(db_path):
    async with open_store(db_path) as store:
        assert await store.inbox.get_offset("tg-bot-a", default=0) == 0
        await store.inbox.set_offset("tg-bot-a", 10)
        rows = [InboundItem(A, "telegram", "u11", {"n": 11}), (B, "telegram", "u12", {"n": 12}),
                (A, "telegram", "u11", {"n": 11})]
        result = await store.inbox.put_many_and_commit_offset(rows, "tg-bot-a", 13)
        assert [inserted for _, inserted in result] == [True, True, False] and result[0][0] == result[2][0]
        assert await store.inbox.get_offset("tg-bot-a") == 13
        with pytest.raises(RecordError):  # a bad row refuses the batch and the offset together
            await store.inbox.put_many_and_commit_offset([(A, "telegram", "u14", {1: object()})], "tg-bot-a", 15)
        with pytest.raises(ValueError):
            await store.inbox.put_many_and_commit_offset([(A, "telegram", None, {})], "tg-bot-a", 15)
        assert await store.inbox.get_offset("tg-bot-a") == 13
        await store.inbox.set_offset("slack", {"cursor": "abc"})
        assert await store.inbox.get_offset("slack") == {"cursor": "abc"}


async def test_atomicity_of_rows_and_offset_inside_the_transaction(db_path):
    async with open_store(db_path) as store:
        await store.inbox.put(A, "telegram", "u1", {})
        await store.inbox.set_offset("tg", 1)
        # a constraint failure after the first row of the batch was inserted rolls back the whole batch + offset
        bad_key = [(A, "telegram", "u2", {}), (B, "telegram", "u3", {})]
        original = store.inbox._db._transaction

        def failing(mode, fn, args):
            async def wrapped(conn, *a):
                result = await fn(conn, *a)
                await conn.execute("INSERT INTO inbox (seq, session_key, platform, platform_message_id, state, "
                                   "payload, received_at, updated_at) "
                                   "VALUES (1, 'x', 'x', 'x', 'received', ?, 0, 0)", (b"\x01\xc0",))
                return result
            return original(mode, wrapped, args)
        store.inbox._db._transaction = failing
        with pytest.raises(Exception, match="UNIQUE|unique constraint"):   # SQLite's words, PostgreSQL's
            await store.inbox.put_many_and_commit_offset(bad_key, "tg", 3)
        store.inbox._db._transaction = original
        assert await store.inbox.get_offset("tg") == 1
        assert await store.inbox.counts() == {"received": 1, "taken": 0, "done": 0, "dropped": 0}


async def test_purge_keeps_pending_rows(db_path):
    async with open_store(db_path) as store:
        s1, _ = await store.inbox.put(A, "telegram", "1", {})
        s2, _ = await store.inbox.put(A, "telegram", "2", {})
        await store.inbox.take(s1)
        await store.inbox.done(s1)
        later = (await store.inbox.get(s1)).updated_at + 100
        assert await store.inbox.purge(older_than_s=10, now=later) == 1
        assert await store.inbox.get(s1) is None and await store.inbox.get(s2) is not None
        assert await store.inbox.put(A, "telegram", "1", {}) != (s1, False)  # its dedup ended with it


async def test_the_newest_rows_of_a_key_from_one_adapter_come_newest_first_in_any_state_and_bounded(db_path):
    async with open_store(db_path) as store:
        seqs = [(await store.inbox.put(A, "whatsapp", f"w{n}", {"n": n}))[0] for n in range(5)]
        await store.inbox.put(A, "telegram", "t1", {"n": "other adapter"})
        await store.inbox.put(B, "whatsapp", "b1", {"n": "other key"})
        await store.inbox.take(seqs[4])
        await store.inbox.drop(seqs[3], "not allowed")
        newest = await store.inbox.newest_of(A, "whatsapp", limit=3)
        assert [(r.payload["n"], r.state) for r in newest] == [(4, "taken"), (3, "dropped"), (2, "received")]
        assert len(await store.inbox.newest_of(A, "whatsapp")) == 5
        assert await store.inbox.newest_of(A, "slack") == [] and await store.inbox.newest_of(A, "whatsapp", 0) == []


async def test_late_rows_are_the_untaken_ones_past_the_bound_whose_session_runs_no_turn(databases):
    import time
    idle, busy = session_key(Src(chat_id="idle")), session_key(Src(chat_id="busy"))
    async with open_store(databases / "a.db") as store:
        old = await store.inbox.put(idle, "telegram", "1", {"text": "waiting"})
        await store.inbox.put(busy, "telegram", "2", {"text": "queued behind a turn"})
        info = await store.sessions.get_or_create(busy, {"platform": "telegram"})
        await store.sessions.begin_turn(info.session_id, "turn-1", 2)
        later = time.time() + 120
        assert await store.inbox.late(60, now=later) == [(idle, old[0], pytest.approx(later - 120, abs=5))]
        assert await store.inbox.late(600, now=later) == [], "not past the bound yet"
        await store.inbox.take(old[0])
        assert await store.inbox.late(60, now=later) == [], "taken: a turn has it"


async def test_a_row_forwarded_to_another_host_is_done_there_and_deduplicated_on_both(databases):
    """The leader keeps the row (with its offset) until the shard's host stored it; the host dedups a second
    forward, and a forwarded row here keeps its dedup against a platform's re-delivery."""
    async with open_store(databases / "leader.db") as leader, open_store(databases / "worker.db") as worker:
        (seq, _), (other, _) = await leader.inbox.put_many_and_commit_offset(
            [InboundItem(A, "telegram", "m1", {"text": "hi"}), InboundItem(B, "telegram", "m2", {})], "telegram", 7)
        item = InboundItem(A, "telegram", "m1", {"text": "hi"})
        [(there, inserted)] = await worker.inbox.put_many([item])
        assert inserted and await worker.inbox.put_many([item]) == [(there, False)], "a second forward is one row"
        assert await leader.inbox.forwarded([seq], "shard:w1/0") == 1
        assert await leader.inbox.forwarded([seq], "shard:w1/0") == 0, "an answer that came twice moves nothing"
        row = await leader.inbox.get(seq)
        assert (row.state, row.reason) == ("done", "forwarded to shard:w1/0")
        assert await leader.inbox.sessions_with_pending() == [B]
        assert await leader.inbox.put(A, "telegram", "m1", {}) == (seq, False), "re-delivered: still deduplicated"
        assert (await worker.inbox.next_for(A)).payload == {"text": "hi"}
        assert (await leader.inbox.get(other)).state == "received"


async def test_received_rows_are_walked_a_page_at_a_time_past_a_cursor(db_path):
    async with open_store(db_path) as store:
        seqs = [(await store.inbox.put(f"k{i}", "telegram", f"m{i}", {}))[0] for i in range(5)]
        await store.inbox.put("k9", "slack", "m0", {})
        await store.inbox.take(seqs[1])
        later = __import__("time").time() + 10
        page = await store.inbox.received_after("telegram", 0, older_than_s=1, limit=2, now=later)
        assert [r.seq for r in page] == [seqs[0], seqs[2]], "taken rows and other platforms are left out"
        page = await store.inbox.received_after("telegram", seqs[2], older_than_s=1, limit=2, now=later)
        assert [r.seq for r in page] == seqs[3:]
        assert await store.inbox.received_after("telegram", 0, older_than_s=60) == [], "fresh rows are in flight"


async def test_the_walk_leaves_out_a_key_whose_session_is_still_in_this_database(db_path):
    """A key moving to another host's shard (actors/sessions/moves_out.py) keeps its session here until the move
    is done: its rows go with the session's records or are answered here, never forwarded on their own as well."""
    async with open_store(db_path) as store:
        moving, _ = await store.inbox.put("k-moving", "telegram", "m1", {})
        alone, _ = await store.inbox.put("k-alone", "telegram", "m2", {})
        await store.sessions.get_or_create("k-moving")
        later = __import__("time").time() + 10
        page = await store.inbox.received_after("telegram", 0, older_than_s=1, now=later)
        assert [r.seq for r in page] == [alone]
        assert await store.sessions.current_keys() == ["k-moving"]
