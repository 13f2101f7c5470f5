import asyncio
import hashlib
import logging
import multiprocessing
import os
import signal
import socket
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from storage import (IllegalTransition, NotFound, Owner, StaleFence, Store, StorageError, Target, best_effort,
                     current_owner, is_owner_alive, obligation_id, session_key)
from storage import ledger as ledger_mod

from .helpers import Src, execute, open_store

KEY = session_key(Src())
TG = Target("telegram", "1001", reply_to="m1")


def dead_pid() -> int:
    with open("/proc/sys/kernel/pid_max") as f:
        return int(f.read()) + 1  # above pid_max: no process can ever have it


def owner_of(kind: str) -> Owner:
    me = current_owner()
    return {"alive": me, "dead_pid": Owner(dead_pid(), me.start_time, me.host),
            "wrong_start": Owner(me.pid, me.start_time - 1000, me.host),
            "other_host": Owner(me.pid, me.start_time, me.host + ".elsewhere")}[kind]


async def claim_as(store, oid, owner, monkeypatch) -> int:
    with monkeypatch.context() as m:
        m.setattr(ledger_mod, "current_owner", lambda generation=0: owner)
        return await store.ledger.mark_attempting(oid)


_counter = iter(range(10**9))


async def in_state(store, state, monkeypatch, owner="alive", platform="telegram"):
    """A fresh obligation driven to ``state``; returns (id, current fence)."""
    ob = await store.ledger.record_obligation(KEY, f"in-{next(_counter)}", Target(platform, "1001"), "reply")
    oid, fence = ob.obligation_id, 0
    if state == "pending":
        return oid, fence
    fence = await claim_as(store, oid, owner_of(owner), monkeypatch)
    if state == "delivered":
        await store.ledger.mark_delivered(oid, fence)
    elif state == "failed":
        await store.ledger.mark_failed(oid, fence, "HTTP 502")
    elif state == "abandoned":
        await store.ledger.abandon(oid, fence, "given up")
    return oid, fence


OPS = {
    "mark_attempting": lambda L, oid, f: L.mark_attempting(oid, f),
    "mark_delivered": lambda L, oid, f: L.mark_delivered(oid, f),
    "mark_failed": lambda L, oid, f: L.mark_failed(oid, f, "err"),
    "abandon": lambda L, oid, f: L.abandon(oid, f, "why"),
    "record_part": lambda L, oid, f: L.record_part(oid, f, 0, "pm-1"),
    "set_chunks": lambda L, oid, f: L.set_chunks(oid, f, ["a", "b"]),
    "requeue": lambda L, oid, f: L.requeue(oid),
    "record_send_intent": lambda L, oid, f: L.record_send_intent(oid, f, 0),
    "mark_ambiguous": lambda L, oid, f: L.mark_ambiguous(oid, f),
    "set_streamed": lambda L, oid, f: L.set_streamed(oid, f, {"from": 0, "parts": ["a"]}),
}
LEGAL = {
    "pending": {"mark_attempting": "attempting", "abandon": "abandoned"},
    "attempting": {"mark_delivered": "delivered", "mark_failed": "failed", "abandon": "abandoned",
                   "record_part": "attempting", "set_chunks": "attempting", "record_send_intent": "attempting",
                   "mark_ambiguous": "attempting", "set_streamed": "attempting"},
    "failed": {"mark_attempting": "attempting", "abandon": "abandoned", "requeue": "pending"},
    "delivered": {},
    "abandoned": {"requeue": "pending"},
}


async def test_every_transition_is_checked(db_path, monkeypatch):
    async with open_store(db_path) as store:
        for state, legal in LEGAL.items():
            for op, call in OPS.items():
                oid, fence = await in_state(store, state, monkeypatch)
                if op in legal:
                    await call(store.ledger, oid, fence)
                    assert (await store.ledger.get(oid)).state == legal[op], (state, op)
                else:
                    with pytest.raises(IllegalTransition):
                        await call(store.ledger, oid, fence)
                    assert (await store.ledger.get(oid)).state == state, (state, op)
        with pytest.raises(NotFound):
            await store.ledger.mark_attempting("0" * 64)


async def test_record_is_idempotent_and_id_is_deterministic(db_path):
    async with open_store(db_path) as store:
        a = await store.ledger.record_obligation(KEY, "m1", TG, "Hello", chunks=["Hel", "lo"])
        b = await store.ledger.record_obligation(KEY, "m1", TG, "Hello")
        assert a == b and a.chunks == ["Hel", "lo"] and a.state == "pending" and a.fence == 0
        assert a.obligation_id == hashlib.sha256(f"{KEY}\0m1\0Hello".encode()).hexdigest()
        assert a.obligation_id == obligation_id(KEY, "m1", "Hello") != obligation_id(KEY, "m2", "Hello")
        assert (await store.ledger.counts())["pending"] == 1
        claimed = await store.ledger.record_obligation(KEY, "m2", TG, "Hi", claim=True)
        assert claimed.state == "attempting" and claimed.fence == 1 and claimed.owner == current_owner(1)
        again = await store.ledger.record_obligation(KEY, "m2", TG, "Hi", claim=True)
        assert again.fence == 1  # not claimed twice


async def test_stale_fences_are_refused(db_path):
    async with open_store(db_path) as store:
        oid = (await store.ledger.record_obligation(KEY, "m1", TG, "Hello")).obligation_id
        f1 = await store.ledger.mark_attempting(oid)
        await store.ledger.record_part(oid, f1, 0, "tg-500")
        await store.ledger.mark_failed(oid, f1, "timeout")
        f2 = await store.ledger.mark_attempting(oid)
        assert f2 == f1 + 1
        for op in ("mark_delivered", "mark_failed", "abandon", "record_part", "set_chunks", "mark_attempting"):
            with pytest.raises(StaleFence, match="stale"):
                await OPS[op](store.ledger, oid, f1)
        await store.ledger.mark_failed(oid, f2, "timeout again")
        await store.ledger.requeue(oid)
        with pytest.raises(StaleFence):
            await store.ledger.abandon(oid, f2, "the requeue moved the fence on")
        ob = await store.ledger.get(oid)
        assert (ob.state, ob.attempts, ob.last_error, ob.parts) == ("pending", 0, "timeout again", {0: "tg-500"})


async def test_parts_are_recorded_once(db_path):
    async with open_store(db_path) as store:
        ob = await store.ledger.record_obligation(KEY, "m1", TG, "long", claim=True)
        await store.ledger.record_part(ob.obligation_id, ob.fence, 0, 111)
        await store.ledger.record_part(ob.obligation_id, ob.fence, 0, "111")  # same id again: fine
        await store.ledger.record_part(ob.obligation_id, ob.fence, 1, "112")
        with pytest.raises(IllegalTransition, match="already recorded"):
            await store.ledger.record_part(ob.obligation_id, ob.fence, 1, "999")
        await store.ledger.record_part(ob.obligation_id, ob.fence, 1, "999", replace=True)
        await store.ledger.set_chunks(ob.obligation_id, ob.fence, ["lo", "ng"])
        got = await store.ledger.get(ob.obligation_id)
        assert got.parts == {0: "111", 1: "999"} and got.chunks == ["lo", "ng"]


async def test_the_parts_sent_as_an_answer_was_written_are_kept_with_what_each_shows(db_path):
    async with open_store(db_path) as store:
        ob = await store.ledger.record_obligation(KEY, "m1", TG, "reply", chunks=[], claim=True)
        assert ob.streamed is None
        streamed = {"from": 1, "parts": ["first paragraph", "second", {"file": {"name": "card.png"}}]}
        await store.ledger.set_streamed(ob.obligation_id, ob.fence, streamed)
        await store.ledger.record_part(ob.obligation_id, ob.fence, 0, "wamid.A")
        got = await store.ledger.get(ob.obligation_id)
        assert got.streamed == streamed and got.chunks == [] and got.parts == {0: "wamid.A"}
        with pytest.raises(StaleFence):
            await store.ledger.set_streamed(ob.obligation_id, ob.fence - 1, streamed)


async def test_a_receipt_is_kept_on_its_part_never_stepping_back_and_a_failed_one_is_visible(db_path):
    async with open_store(db_path) as store:
        ob = await store.ledger.record_obligation(KEY, "m1", TG, "two parts", claim=True)
        await store.ledger.record_part(ob.obligation_id, ob.fence, 0, "wamid.A")
        await store.ledger.record_part(ob.obligation_id, ob.fence, 1, "wamid.B")
        await store.ledger.mark_delivered(ob.obligation_id, ob.fence)
        assert (await store.ledger.record_receipt("telegram", "wamid.A", "read")).obligation_id == ob.obligation_id
        await store.ledger.record_receipt("telegram", "wamid.A", "delivered")   # late: read stays
        await store.ledger.record_receipt("telegram", "wamid.B", "sent")
        assert (await store.ledger.record_receipt("whatsapp", "wamid.A", "failed")).obligation_id is None, \
            "another platform's"
        unknown = await store.ledger.record_receipt("telegram", "wamid.UNKNOWN", "read")
        assert unknown.obligation_id is None and not unknown.kept, "no bound given: nothing kept"
        got = await store.ledger.get(ob.obligation_id)
        assert got.receipts == {0: "read", 1: "sent"} and not got.not_received and got.last_error is None
        await store.ledger.record_receipt("telegram", "wamid.B", "failed", "131026 Message undeliverable")
        await store.ledger.record_receipt("telegram", "wamid.B", "read")   # nothing comes after failed
        got = await store.ledger.get(ob.obligation_id)
        assert got.receipts == {0: "read", 1: "failed"} and got.not_received and got.state == "delivered"
        assert got.last_error == "part 2 not received: 131026 Message undeliverable"
        with pytest.raises(ValueError, match="unknown receipt"):
            await store.ledger.record_receipt("telegram", "wamid.A", "deleted")


WA = Target("whatsapp", "15551230001")
KEEP = {"keep_s": 3600.0, "keep_max": 10}


def pending_receipts(db_path) -> list[tuple]:
    return [tuple(row) for row in execute(db_path, "SELECT platform, platform_message_id, receipt FROM pending_receipts "
                                                   "ORDER BY platform, platform_message_id")]


async def test_a_receipt_that_comes_before_its_part_is_recorded_is_kept_and_applied_with_the_record(db_path):
    async with open_store(db_path) as store:
        ob = await store.ledger.record_obligation(KEY, "m1", WA, "three parts", claim=True)
        early = await store.ledger.record_receipt("whatsapp", "wamid.A", "failed", "131026 Message undeliverable",
                                                  **KEEP)
        assert (early.obligation_id, early.kept) == (None, True), early
        await store.ledger.record_receipt("whatsapp", "wamid.A", "delivered", **KEEP)   # late: failed stays
        await store.ledger.record_receipt("whatsapp", "wamid.B", "sent", **KEEP)
        await store.ledger.record_receipt("whatsapp", "wamid.B", "read", **KEEP)
        await store.ledger.record_receipt("whatsapp_tpl", "wamid.C", "failed", "another number's", **KEEP)
        assert pending_receipts(db_path) == [("whatsapp", "wamid.A", "failed"), ("whatsapp", "wamid.B", "read"),
                                             ("whatsapp_tpl", "wamid.C", "failed")]
        for index, wamid in enumerate(("wamid.A", "wamid.B", "wamid.C")):
            await store.ledger.record_part(ob.obligation_id, ob.fence, index, wamid)
        await store.ledger.mark_delivered(ob.obligation_id, ob.fence)
        got = await store.ledger.get(ob.obligation_id)
        assert (got.state, got.receipts, got.not_received) == ("delivered", {0: "failed", 1: "read"}, True), got
        assert got.last_error == "part 1 not received: 131026 Message undeliverable"
        assert pending_receipts(db_path) == [("whatsapp_tpl", "wamid.C", "failed")], "another adapter's stays"
        # The same id recorded again (a consumer recording what the adapter had recorded): its receipt stays.
        ob2 = await store.ledger.record_obligation(KEY, "m2", WA, "again", claim=True)
        await store.ledger.record_receipt("whatsapp", "wamid.D", "read", **KEEP)
        await store.ledger.record_part(ob2.obligation_id, ob2.fence, 0, "wamid.D")
        await store.ledger.record_part(ob2.obligation_id, ob2.fence, 0, "wamid.D", replace=True)
        assert (await store.ledger.get(ob2.obligation_id)).receipts == {0: "read"}


async def test_pending_receipts_expire_and_at_most_keep_max_are_kept_per_platform_the_oldest_dropped(db_path):
    now = time.time()
    bound = {"keep_s": 3600.0, "keep_max": 3}
    async with open_store(db_path) as store:
        ob = await store.ledger.record_obligation(KEY, "m1", WA, "five parts", claim=True)
        await store.ledger.record_receipt("whatsapp", "wamid.OLD", "failed", "old", now=now - 2 * 3600, **bound)
        await store.ledger.record_part(ob.obligation_id, ob.fence, 0, "wamid.OLD")   # its receipt expired: not applied
        outcomes = [await store.ledger.record_receipt("whatsapp", f"wamid.N{i}", "read", now=now + i, **bound)
                    for i in range(1, 5)]
        assert [(o.kept, o.expired, o.over_bound) for o in outcomes] == \
            [(True, 1, 0), (True, 0, 0), (True, 0, 0), (True, 0, 1)], outcomes
        other = await store.ledger.record_receipt("whatsapp_tpl", "wamid.N1", "read", now=now + 10, **bound)
        assert (other.expired, other.over_bound) == (0, 0), "another adapter's own count"
        await store.ledger.record_part(ob.obligation_id, ob.fence, 1, "wamid.N1")   # dropped over the bound
        await store.ledger.record_part(ob.obligation_id, ob.fence, 2, "wamid.N4")
        assert (await store.ledger.get(ob.obligation_id)).receipts == {2: "read"}
        assert await store.ledger.drop_expired_receipts(now=now + 3600 + 3) == 2, "N2 and N3 (N4 was applied)"
        assert pending_receipts(db_path) == [("whatsapp_tpl", "wamid.N1", "read")]


def test_is_owner_alive():
    assert is_owner_alive(owner_of("alive"))
    for kind in ("dead_pid", "wrong_start", "other_host"):
        assert not is_owner_alive(owner_of(kind)), kind
    assert not is_owner_alive(None)
    assert current_owner().host == socket.gethostname()


def test_a_live_owner_stays_alive_when_the_wall_clock_moves(monkeypatch):
    """The boot time in /proc/stat is a whole second that moves when the wall clock is adjusted (NTP, a VM's clock
    catching up); a start time derived from it would make a live owner look dead, and its reply be sent twice."""
    import psutil
    import time as time_mod
    owner = current_owner()
    boot = psutil.boot_time()
    monkeypatch.setattr(psutil, "boot_time", lambda: boot + 1.0)
    monkeypatch.setattr("psutil._pslinux.boot_time", lambda: boot + 1.0)
    monkeypatch.setattr(time_mod, "time", lambda real=time_mod.time: real() + 1.0)
    assert is_owner_alive(owner)


async def test_sweep_claims_only_what_no_live_owner_holds(db_path, monkeypatch):
    async with open_store(db_path) as store:
        rows = {}
        for state in ("pending", "attempting", "failed"):
            for owner in ("alive", "dead_pid", "wrong_start", "other_host"):
                if state == "pending" and owner != "alive":
                    continue
                rows[(state, owner)] = (await in_state(store, state, monkeypatch, owner))[0]
        offline = (await in_state(store, "attempting", monkeypatch, "dead_pid", platform="slack"))[0]
        finished = [(await in_state(store, s, monkeypatch, "dead_pid"))[0] for s in ("delivered", "abandoned")]
        claimed = await store.ledger.sweep_recoverable({"telegram"})
        # A failed row has no owner any more: whoever failed it gave it up (Ledger.mark_failed).
        expected = {oid for (state, owner), oid in rows.items() if state != "attempting" or owner != "alive"}
        assert {ob.obligation_id for ob in claimed} == expected
        me = current_owner()
        for ob in claimed:
            assert ob.state == "attempting" and ob.owner == Owner(me.pid, me.start_time, me.host, ob.fence)
            await store.ledger.mark_delivered(ob.obligation_id, ob.fence)  # the returned fence is current
        ob = await store.ledger.get(rows[("attempting", "alive")])
        assert ob.state == "attempting" and ob.fence == 1  # untouched
        assert (await store.ledger.get(offline)).state == "attempting"  # platform not connected
        assert [(await store.ledger.get(f)).state for f in finished] == ["delivered", "abandoned"]
        assert await store.ledger.sweep_recoverable({"telegram", "slack"}) != []  # now the slack one
        assert await store.ledger.sweep_recoverable({"telegram", "slack"}) == []  # held by a live owner: us


async def test_sweep_abandons_exhausted_and_stale_rows(db_path, monkeypatch):
    async with open_store(db_path) as store:
        tired, _ = await in_state(store, "failed", monkeypatch, "dead_pid")
        for _ in range(2):
            fence = await claim_as(store, tired, owner_of("dead_pid"), monkeypatch)
            await store.ledger.mark_failed(tired, fence, "502")
        old, _ = await in_state(store, "pending", monkeypatch)
        fresh, _ = await in_state(store, "pending", monkeypatch)
        live_old, _ = await in_state(store, "attempting", monkeypatch, "alive")
        now = (await store.ledger.get(fresh)).created_at + 3600
        await store.ledger._db.write(lambda c: c.execute(
            "UPDATE obligations SET created_at = created_at - 100000 WHERE obligation_id IN (?, ?)", (old, live_old)))
        claimed = await store.ledger.sweep_recoverable({"telegram"}, max_attempts=3, stale_after_s=86400, now=now)
        assert [ob.obligation_id for ob in claimed] == [fresh]
        assert (await store.ledger.get(tired)).last_error == "swept: too many attempts"
        assert (await store.ledger.get(old)).state == "abandoned"
        assert (await store.ledger.get(live_old)).state == "attempting"  # a live owner's row is never touched


async def test_sweep_spaces_the_retries_of_a_reply_that_keeps_failing(db_path, monkeypatch):
    """Attempts are spaced by ``spacing_s``: a storm of faults a minute long cannot spend a reply's last attempt."""
    from actors.sweeper import SWEEP_MAX_ATTEMPTS, retry_spacing_s
    async with open_store(db_path) as store:
        oid, _ = await in_state(store, "failed", monkeypatch, "dead_pid")
        tries, now = 1, (await store.ledger.get(oid)).updated_at
        while (await store.ledger.get(oid)).state != "abandoned":
            claimed = await store.ledger.sweep_recoverable({"telegram"}, max_attempts=SWEEP_MAX_ATTEMPTS,
                                                           now=now, spacing_s=retry_spacing_s)
            if claimed:
                [ob] = claimed
                tries += 1
                await store.ledger.mark_failed(oid, ob.fence, "HTTP 502")
                await store.ledger._db.write(lambda c: c.execute(   # ... at the test's clock
                    "UPDATE obligations SET updated_at = ? WHERE obligation_id = ?", (now, oid)))
            now += 1.0   # a sweep every second, as fast as the daemon's tests run them
            assert now - ob.created_at < 3600, "the sweep never gave the reply up"
        assert tries == SWEEP_MAX_ATTEMPTS
        assert now - (await store.ledger.get(oid)).created_at > 300, "twelve attempts span minutes, not a storm"
        quick, _ = await in_state(store, "failed", monkeypatch, "dead_pid")
        start = (await store.ledger.get(quick)).updated_at
        assert await store.ledger.sweep_recoverable({"telegram"}, now=start, spacing_s=retry_spacing_s), \
            "a reply that failed once is retried at the next sweep (a restart delays nothing)"


async def test_release_frees_a_claim_of_this_process_for_the_sweep(db_path, monkeypatch):
    """A shard's consumer cell that died holding a claim: the shard lives, so only a release lets the sweep in."""
    async with open_store(db_path) as store:
        mine, fence = await in_state(store, "attempting", monkeypatch, "alive")
        assert await store.ledger.sweep_recoverable({"telegram"}) == [], "a live owner's claim is never swept"
        assert await store.ledger.release(mine, "its consumer died")
        ob = await store.ledger.get(mine)
        assert (ob.state, ob.owner, ob.fence, ob.last_error) == ("failed", None, fence + 1, "its consumer died")
        with pytest.raises(StaleFence):
            await store.ledger.mark_delivered(mine, fence)   # the gone part's late write
        assert [o.obligation_id for o in await store.ledger.sweep_recoverable({"telegram"})] == [mine]
        other, _ = await in_state(store, "attempting", monkeypatch, "wrong_start")   # another process's claim
        assert not await store.ledger.release(other, "not ours")
        assert (await store.ledger.get(other)).state == "attempting"
        assert not await store.ledger.release("no-such-reply", "gone")


def _claim_then_die(path, conn):
    async def run():
        store = await Store.open(path)
        ob = await store.ledger.record_obligation(KEY, "m-crash", TG, "reply", claim=True)
        await store.ledger.record_part(ob.obligation_id, ob.fence, 0, "sent-before-crash")
        conn.send(ob.fence)
        os.kill(os.getpid(), signal.SIGKILL)
    asyncio.run(run())


async def test_sweep_takes_over_from_a_process_killed_mid_send(db_path):
    parent, child = multiprocessing.get_context("fork").Pipe()
    proc = multiprocessing.get_context("fork").Process(target=_claim_then_die, args=(str(db_path), child))
    proc.start()
    fence = await asyncio.get_running_loop().run_in_executor(None, parent.recv)
    await asyncio.get_running_loop().run_in_executor(None, proc.join)
    assert proc.exitcode == -signal.SIGKILL
    async with open_store(db_path) as store:
        [ob] = await store.ledger.sweep_recoverable({"telegram"})
        assert ob.fence == fence + 1 and ob.parts == {0: "sent-before-crash"} and ob.attempts == 2


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from(list(LEGAL)), st.sampled_from(
    ["alive", "dead_pid", "wrong_start", "other_host"]), st.sampled_from(["telegram", "slack"])), max_size=12),
    connected=st.sets(st.sampled_from(["telegram", "slack"])), max_attempts=st.integers(1, 3))
def test_sweep_never_claims_a_live_owners_row(tmp_path_factory, rows, connected, max_attempts):
    monkeypatch = pytest.MonkeyPatch()

    async def run():
        async with open_store(tmp_path_factory.mktemp("sweep") / "l.db") as store:
            made = [(await in_state(store, s, monkeypatch, o, p))[0] for s, o, p in rows]
            before = {oid: await store.ledger.get(oid) for oid in made}
            claimed = {ob.obligation_id for ob in await store.ledger.sweep_recoverable(connected, max_attempts)}
            for oid, old in before.items():
                new = await store.ledger.get(oid)
                if old.state in ("attempting", "failed") and is_owner_alive(old.owner):
                    assert new == old and oid not in claimed
                if oid in claimed:
                    assert old.state == "pending" or not is_owner_alive(old.owner)
                    assert old.target.platform in connected and new.fence == old.fence + 1
    try:
        asyncio.run(run())
    finally:
        monkeypatch.undo()


async def test_retention(db_path, monkeypatch):
    async with open_store(db_path) as store:
        done = [(await in_state(store, s, monkeypatch))[0] for s in ("delivered", "abandoned", "delivered")]
        open_ = [(await in_state(store, s, monkeypatch))[0] for s in ("pending", "attempting", "failed")]
        now = (await store.ledger.get(done[-1])).updated_at
        assert await store.ledger.purge(older_than_days=1, now=now) == 0
        assert await store.ledger.purge(older_than_days=1, now=now + 2 * 86400) == 3
        assert {ob.obligation_id for ob in await store.ledger.list()} == set(open_)
        more = [(await in_state(store, "delivered", monkeypatch))[0] for _ in range(3)]
        assert await store.ledger.purge(older_than_days=30, max_rows=4) == 2  # oldest finished first
        assert {ob.obligation_id for ob in await store.ledger.list()} == set(open_) | {more[-1]}
        assert await store.ledger.purge(older_than_days=30, max_rows=0) == 1  # unfinished rows are never purged
        assert len(await store.ledger.list(state="pending")) == 1


async def test_best_effort_logs_and_swallows_storage_failures(db_path, caplog):
    async with open_store(db_path) as store:
        ob = await best_effort(store.ledger.record_obligation(KEY, "m1", TG, "x"), "recording the reply")
        assert ob.state == "pending"
        with caplog.at_level(logging.ERROR, logger="storage.ledger"):
            assert await best_effort(store.ledger.mark_delivered(ob.obligation_id, 7), "marking delivered") is None
        [record] = caplog.records
        assert record.levelno == logging.ERROR and "marking delivered" in record.getMessage()
        assert "StaleFence" in record.getMessage()
    with pytest.raises(StorageError):
        await store.ledger.counts()  # closed: a plain call still raises
    assert await best_effort(store.ledger.counts(), "counting") is None

    async def not_storage():
        raise RuntimeError("a bug, not a storage failure")
    with pytest.raises(RuntimeError):
        await best_effort(not_storage(), "bug")


async def test_chunks_are_stored_as_given(db_path):
    async with open_store(db_path) as store:
        unchunked = await store.ledger.record_obligation(KEY, "m1", TG, "whole reply")
        assert unchunked.chunks == ["whole reply"]
        not_yet = await store.ledger.record_obligation(KEY, "m2", TG, "slot", chunks=[])
        assert not_yet.chunks == []  # "not chunked yet": a sweeper must not send it as is


# ------------------------------------------------------------------------------------------- the ambiguous send

async def test_a_send_intent_rides_in_the_claim_and_the_platform_id_replaces_it(db_path, monkeypatch):
    async with open_store(db_path) as store:
        ob = await store.ledger.record_obligation(KEY, "m-int", TG, "reply", chunks=[], claim=True, send_intent=0)
        assert ob.state == "attempting" and ob.send_intent == 0 and not ob.ambiguous
        oid, fence = ob.obligation_id, ob.fence
        await store.ledger.record_part(oid, fence, 0, "pm-1")
        assert (await store.ledger.get(oid)).send_intent is None
        await store.ledger.record_send_intent(oid, fence, 1)
        await store.ledger.record_part(oid, fence, 0, "pm-1")           # another part's id leaves the intent alone
        assert (await store.ledger.get(oid)).send_intent == 1
        await store.ledger.record_part(oid, fence, 1, "pm-2")
        await store.ledger.mark_failed(oid, fence, "502")
        again = await claim_as(store, oid, owner_of("alive"), monkeypatch)  # nothing unresolved: no ambiguity
        done = await store.ledger.get(oid)
        assert again == fence + 1 and done.send_intent is None and not done.ambiguous
        # An existing row is not claimed by record_obligation, so its intent is not touched either.
        same = await store.ledger.record_obligation(KEY, "m-int", TG, "reply", claim=True, send_intent=0)
        assert same.send_intent is None and same.fence == again


async def test_a_claim_keeps_an_unresolved_send_for_its_new_owner_to_resolve(db_path, monkeypatch):
    """The intent a dead owner left survives the claim (the new owner looks for the copy, or marks the reply); a
    marked reply stays marked once its re-sent copy is recorded."""
    async with open_store(db_path) as store:
        with monkeypatch.context() as m:    # a consumer that dies after its send left, before the id came back
            m.setattr(ledger_mod, "current_owner", lambda generation=0: owner_of("dead_pid"))
            ob = await store.ledger.record_obligation(KEY, "m-amb", TG, "reply", claim=True, send_intent=0)
        clean, _ = await in_state(store, "failed", monkeypatch, owner="dead_pid")
        [swept, other] = await store.ledger.sweep_recoverable({"telegram"})
        assert swept.obligation_id == ob.obligation_id and swept.send_intent == 0 and not swept.ambiguous
        assert other.obligation_id == clean and other.send_intent is None
        assert swept.fence == ob.fence + 1 and swept.parts == {}
        await store.ledger.mark_ambiguous(swept.obligation_id, swept.fence)   # the new owner cannot look: it marks
        await store.ledger.record_part(swept.obligation_id, swept.fence, 0, "pm-resent")
        await store.ledger.mark_delivered(swept.obligation_id, swept.fence)
        done = await store.ledger.get(swept.obligation_id)
        assert done.state == "delivered" and done.ambiguous and done.send_intent is None  # the flag stays
        assert await store.ledger.count_ambiguous() == 1
        assert (await store.ledger.counts())["delivered"] == 1


async def test_the_owner_itself_can_record_an_ambiguity(db_path, monkeypatch):
    async with open_store(db_path) as store:
        oid, fence = await in_state(store, "attempting", monkeypatch)
        await store.ledger.mark_ambiguous(oid, fence)
        assert (await store.ledger.get(oid)).ambiguous
        assert await store.ledger.part_ids_in_chat("telegram", "1001") == set()
        await store.ledger.record_part(oid, fence, 0, "pm-7")
        other, other_fence = await in_state(store, "attempting", monkeypatch, platform="slack")
        await store.ledger.record_part(other, other_fence, 0, "pm-8")
        assert await store.ledger.part_ids_in_chat("telegram", "1001") == {"pm-7"}, "one chat of one platform"
        with pytest.raises(StaleFence):
            await store.ledger.record_send_intent(oid, fence - 1, 0)


def _send_then_die(path, conn):
    async def run():
        store = await Store.open(path)
        ob = await store.ledger.record_obligation(KEY, "m-kill", TG, "reply", chunks=["a", "b"], claim=True,
                                                  send_intent=0)
        await store.ledger.record_part(ob.obligation_id, ob.fence, 0, "pm-0")
        await store.ledger.record_send_intent(ob.obligation_id, ob.fence, 1)
        conn.send(ob.fence)
        os.kill(os.getpid(), signal.SIGKILL)   # part 1 may exist on the platform; its id never comes back
    asyncio.run(run())


async def test_kill_9_between_a_send_and_its_id_leaves_an_ambiguous_obligation(db_path):
    parent, child = multiprocessing.get_context("fork").Pipe()
    proc = multiprocessing.get_context("fork").Process(target=_send_then_die, args=(str(db_path), child))
    proc.start()
    fence = await asyncio.get_running_loop().run_in_executor(None, parent.recv)
    await asyncio.get_running_loop().run_in_executor(None, proc.join)
    assert proc.exitcode == -signal.SIGKILL
    async with open_store(db_path) as store:
        [ob] = await store.ledger.sweep_recoverable({"telegram"})
        assert ob.fence == fence + 1 and ob.parts == {0: "pm-0"} and ob.send_intent == 1


async def test_a_database_from_before_send_intents_migrates_with_no_ambiguity(db_path):
    from storage.db import Database
    from storage.schema import MIGRATIONS
    old = await Database.open(db_path, migrations=MIGRATIONS[:2])
    await old.write(lambda c: c.execute(
        "INSERT INTO obligations (obligation_id, session_key, inbound_ref, platform, chat_id, content, chunks, state, "
        "created_at, updated_at) VALUES ('x', 'k', 'm', 'telegram', '1', 'c', ?, 'delivered', 0, 0)",
        (b"\x01\x90",)))
    await old.close()
    async with open_store(db_path) as store:
        ob = await store.ledger.get("x")
        assert ob.state == "delivered" and ob.send_intent is None and not ob.ambiguous


async def test_a_sweep_leaves_a_reply_without_final_text_to_its_session_and_counts_no_attempt(db_path):
    """A turn cut short (no chunks recorded) is its session's to resume: sweeps after restarts neither claim it nor
    use up its attempts (counted, a few of them abandoned a reply its session was about to finish)."""
    async with open_store(db_path) as store:
        ob = await store.ledger.record_obligation("k", "m1", Target("telegram", "1"), "reply", chunks=[],
                                                  claim=True)
        await store.ledger.mark_failed(ob.obligation_id, ob.fence, "its process died")
        async def owner_dead(conn):
            await conn.execute("UPDATE obligations SET owner_pid = 4194000")
        await store._db.write(owner_dead)
        for _ in range(10):
            assert await store.ledger.sweep_recoverable({"telegram"}, max_attempts=5) == []
        left = await store.ledger.get(ob.obligation_id)
        assert left.state == "failed" and left.attempts == 1, left
        old = await store.ledger.sweep_recoverable({"telegram"}, now=time.time() + 2 * 86400)
        assert old == [] and (await store.ledger.get(ob.obligation_id)).state == "abandoned", "too old: given up"


async def test_a_sweep_leaves_the_replies_of_a_key_this_host_does_not_serve_untouched(db_path, monkeypatch):
    """A session moving to another host keeps its open replies here until that host imported them and finishes
    them itself (actors/sweeper.py ``serves``): the sweep here neither claims nor abandons them."""
    async with open_store(db_path) as store:
        ours = (await in_state(store, "attempting", monkeypatch, "dead_pid"))[0]
        moving = await store.ledger.record_obligation("a-moving-key", "in-moving", Target("telegram", "7"), "reply",
                                                      ["the answer"])
        before = await store.ledger.get(moving.obligation_id)
        claimed = await store.ledger.sweep_recoverable({"telegram"}, max_attempts=0,
                                                       serves=lambda key: key != "a-moving-key")
        assert [ob.obligation_id for ob in claimed] == [] and (await store.ledger.get(ours)).state == "abandoned"
        assert await store.ledger.get(moving.obligation_id) == before, "not claimed, not abandoned: untouched"
        claimed = await store.ledger.sweep_recoverable({"telegram"})
        assert [ob.obligation_id for ob in claimed] == [moving.obligation_id], "served again: swept as any other"


async def test_a_parts_text_is_found_by_its_platform_id_in_its_chat_only(db_path, monkeypatch):
    async with open_store(db_path) as store:
        ob = await store.ledger.record_obligation(KEY, "m-parts", TG, "first. second.", chunks=["first.", "second."],
                                                  claim=True)
        await store.ledger.record_part(ob.obligation_id, ob.fence, 0, "pm-1")
        await store.ledger.record_part(ob.obligation_id, ob.fence, 1, "pm-2")
        assert await store.ledger.part_text("telegram", "1001", "pm-2") == "second."
        assert await store.ledger.part_text("telegram", "1001", "pm-1") == "first."
        assert await store.ledger.part_text("telegram", "1002", "pm-2") is None, "another chat's id names nothing"
        assert await store.ledger.part_text("slack", "1001", "pm-2") is None
        assert await store.ledger.part_text("telegram", "1001", "pm-3") is None
