"""The platform-independent parts of PlatformAdapter, without an actor system: the pure deciders, the per-chat
lanes, and the intake/outbound coroutines driven on a plain event loop against the in-process fake platform."""
from __future__ import annotations

import asyncio
import random
import time

import pytest

from actors.adapters import base, registry
from actors.adapters.outbound import ChatLanes, RetryPolicy, after_failure, backoff_s, classify_error
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.errors import (ConflictError, FloodError, FormattingError, MessageNotFoundError,
                                    PermanentError, RetryableError, TooLongError)
from actors.adapters.fake.adapter import FakePlatformAdapter
from actors.messages import PlatformOp
from storage import Store, StorageBusy, session_key
from tests.fakes.fakeplatform import FakePlatform

pytestmark = pytest.mark.timeout(30)


# ------------------------------------------------------------------------------------------------ pure parts

@pytest.mark.parametrize("exc, kind, retry_after", [
    (FloodError(2.5), "flood", 2.5),
    (RetryableError("down", retry_after=1.0), "retryable", 1.0),
    (ConflictError("webhook set"), "retryable", 0.0),
    (TooLongError("too_long"), "too_long", 0.0),
    (FormattingError("bad_markup"), "formatting", 0.0),
    (MessageNotFoundError("gone"), "not_found", 0.0),
    (PermanentError("blocked"), "permanent", 0.0),
    (ConnectionResetError(), "retryable", 0.0),
    (asyncio.TimeoutError(), "retryable", 0.0),
    (StorageBusy("locked"), "retryable", 0.0),
    (KeyError("bug"), "permanent", 0.0),
])
def test_errors_are_classified_by_what_to_do_next(exc, kind, retry_after):
    assert classify_error(exc) == (kind, retry_after)


def test_after_failure_decides_retry_wait_or_fail():
    policy = RetryPolicy(max_floods=2, max_failures=1)
    assert after_failure("edit", "not_modified", 0, 0, 0, policy) == ("done", 0.0)
    assert after_failure("send", "flood", 3.0, 0, 0, policy) == ("flood", 3.0)
    assert after_failure("send", "flood", 0.0, 1, 0, policy) == ("flood", policy.default_flood_s)
    assert after_failure("send", "flood", 3.0, 2, 0, policy)[0] == "fail"
    step, delay = after_failure("edit", "retryable", 0.0, 0, 0, policy)
    assert step == "retry" and policy.base_s / 2 <= delay <= policy.base_s
    assert after_failure("edit", "retryable", 9.0, 0, 0, policy) == ("retry", 9.0)
    assert after_failure("edit", "retryable", 0.0, 0, 1, policy)[0] == "fail"
    for kind in ("permanent", "too_long", "formatting", "not_found"):
        assert after_failure("send", kind, 0.0, 0, 0, policy) == ("fail", 0.0)
    assert after_failure("typing", "retryable", 0.0, 0, 0, policy) == ("fail", 0.0)
    assert after_failure("typing", "flood", 1.0, 0, 0, policy) == ("fail", 0.0)


def test_backoff_grows_with_jitter_up_to_the_cap():
    rng = random.Random(7)
    for failures, ceiling in ((1, 0.1), (2, 0.2), (4, 0.8), (30, 5.0)):
        delays = [backoff_s(failures, 0.1, 5.0, rng) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays) and len(set(delays)) > 1


def test_lanes_keep_each_chat_in_order_and_run_chats_side_by_side():
    done: list[tuple[str, int]] = []
    running: set[str] = set()
    overlap = []

    async def run(item):
        chat, n = item
        assert chat not in running, "two items of one chat at once"
        running.add(chat)
        overlap.append(len(running))
        await asyncio.sleep(random.uniform(0, 0.005))
        running.discard(chat)
        done.append(item)

    async def main():
        lanes = ChatLanes(run)
        for n in range(20):
            for chat in ("a", "b", "c"):
                lanes.submit(chat, (chat, n))
        assert lanes.busy("a")
        while any(lanes.busy(c) for c in "abc"):
            await asyncio.sleep(0.001)
        lanes.submit("a", ("a", 20))  # a lane that went idle starts again
        while lanes.busy("a"):
            await asyncio.sleep(0.001)

    asyncio.run(main())
    for chat in "abc":
        assert [n for c, n in done if c == chat] == list(range(20 + (chat == "a")))
    assert max(overlap) > 1


def test_a_failing_item_does_not_stop_its_lane():
    seen = []

    async def run(item):
        seen.append(item)
        if item == 1:
            raise RuntimeError("broken promise")

    async def main():
        lanes = ChatLanes(run)
        for item in (1, 2, 3):
            lanes.submit("x", item)
        while lanes.busy("x"):
            await asyncio.sleep(0.001)
    asyncio.run(main())
    assert seen == [1, 2, 3]


# ------------------------------------------------------------------------------ the adapter, actor-less

class Posts:
    """Stands in for the bridge: what the loop side hands to the actor thread."""

    def __init__(self):
        self.items = []

    def post(self, item):
        self.items.append(item)

    def of(self, kind):
        return [i for i in self.items if isinstance(i, kind)]


def make_adapter(fake: FakePlatform, tmp_path, **settings) -> tuple[FakePlatformAdapter, Posts]:
    adapter = FakePlatformAdapter()
    adapter.name = "bot"
    adapter.settings = registry.validate_adapter("bot", {"type": "fake", "base_url": fake.base_url, **settings})
    adapter.profile = adapter.settings["profile"]
    adapter.pacing = registry.pacing_of(adapter.settings)
    adapter.config = {"gateway": {"state_dir": str(tmp_path)}, "storage": {"durability": "normal"}}
    adapter._loop_bridge = posts = Posts()
    return adapter, posts


@pytest.fixture
def fake():
    with FakePlatform() as platform:
        yield platform


def test_a_round_is_stored_with_its_offset_deduplicated_and_rung_once(fake, tmp_path):
    adapter, posts = make_adapter(fake, tmp_path, profile="work")
    fake.inject("c1", "one", user="u1")
    fake.inject("c1", "two", user="u1")

    async def main():
        await adapter.intake.open_store()
        assert adapter.offset is None
        await adapter.connect()
        raws, offset = await adapter.fetch()
        bad = {"id": 99, "chat": "", "text": "x", "message_id": "m"}
        results = await adapter.intake.ingest(raws + [bad, raws[0]], offset)   # a malformed one, a duplicate
        again = await adapter.intake.ingest(raws, offset)                        # the platform re-delivers the round
        await adapter.disconnect()
        stored = await adapter.store.inbox.get_offset("bot")
        key = session_key(adapter.normalise(raws[0]).source)
        rows = await adapter.store.inbox.rows_in_state(key)
        await adapter.store.close()
        return results, again, stored, rows, key

    results, again, stored, rows, key = asyncio.run(main())
    assert stored == 3 and adapter.offset == 3
    assert [inserted for _, inserted in results] == [True, True, False]
    assert [inserted for _, inserted in again] == [False, False]
    assert [r.payload["text"] for r in rows] == ["one", "two"] and key.startswith("work.bot.dm.")
    assert rows[0].payload["source"] == {"platform": "bot", "chat_id": "c1", "chat_type": "dm", "thread_id": None,
                                         "user_id": "u1", "user_name": "u1", "profile": "work", "community": None}
    [rung] = posts.of(base.Ingested)
    assert [seq for _, seq in rung.rings] == [r.seq for r in rows]
    [warning] = [line for line in posts.of(base.LogLine) if "malformed" in line.text]
    assert "bot" in warning.text and "chat must be a non-empty string" in warning.text and adapter.intake.malformed == 1


@pytest.mark.parametrize("raw, reason", [
    ("not a dict", "not an object"),
    ({"id": 1, "chat": "c", "text": None, "message_id": "1"}, "text must be a string"),
    ({"id": 1, "chat": "c", "text": "t"}, "message_id missing"),
    ({"id": 1, "chat": "c", "text": "t", "message_id": "1", "chat_type": "channel"}, "unknown chat_type"),
])
def test_normalise_refuses_malformed_updates(fake, tmp_path, raw, reason):
    adapter, _ = make_adapter(fake, tmp_path)
    with pytest.raises(MalformedPayload, match=reason):
        adapter.normalise(raw)


def perform(adapter, op):
    async def main():
        try:
            return await adapter._perform(op)
        finally:
            await adapter.close()
    return asyncio.run(main())


def test_a_flood_blocks_the_chat_until_retry_after_then_the_op_goes(fake, tmp_path):
    adapter, _ = make_adapter(fake, tmp_path)
    fake.set_faults(next=["flood", "flood"], flood_retry_after=0.3)
    started = time.monotonic()
    result = perform(adapter, PlatformOp("op1", "send", "c1", text="hi"))
    assert result.ok and result.message_id and time.monotonic() - started >= 0.6
    assert [o["status"] for o in fake.ops("c1")] == [429, 429, 200]
    assert fake.stats()["retry_after_violations"] == 0


def test_retryable_failures_are_retried_then_given_up(fake, tmp_path):
    adapter, _ = make_adapter(fake, tmp_path)
    adapter.retry_policy = RetryPolicy(max_failures=2, base_s=0.01, cap_s=0.02)
    fake.set_faults(next=["error"])
    assert perform(adapter, PlatformOp("op1", "send", "c1", text="hi")).ok
    fake.set_faults(next=["error"] * 3)
    failed = perform(adapter, PlatformOp("op2", "send", "c2", text="hi"))
    assert not failed.ok and failed.error_kind == "retryable" and len(fake.ops("c2")) == 3


def test_typing_is_never_retried(fake, tmp_path):
    adapter, _ = make_adapter(fake, tmp_path)
    fake.set_faults(next=["error"])
    result = perform(adapter, PlatformOp("t1", "typing", "c1"))
    assert not result.ok and len(fake.ops("c1", "typing")) == 1


def test_errors_answered_to_the_sender_are_redacted(fake, tmp_path):
    class Leaky(FakePlatformAdapter):
        async def send_message(self, op):
            raise PermanentError(f"bot token sekrit-123456 refused for {op.chat_id}")

    adapter = Leaky()
    adapter.__dict__.update({k: v for k, v in make_adapter(fake, tmp_path)[0].__dict__.items()
                             if k in ("name", "settings", "pacing", "config", "_loop_bridge")})
    adapter.secrets = ["sekrit-123456"]
    result = perform(adapter, PlatformOp("op1", "send", "c1", text="hi"))
    assert not result.ok and result.error_kind == "permanent"
    assert "sekrit" not in result.error and "[redacted]" in result.error and "c1" in result.error


def test_a_subclass_cannot_shadow_actor_send():
    with pytest.raises(TypeError, match="send_message"):
        type("Broken", (FakePlatformAdapter,), {"send": lambda self, op: None})


def test_the_first_store_open_rings_sessions_left_with_work(fake, tmp_path):
    adapter, posts = make_adapter(fake, tmp_path)

    async def main():
        async with await Store.open(tmp_path / "gateway.db") as store:
            await store.inbox.put("default.bot.dm.chat-0123456789abcdef", "bot", "m1", {"text": "unrung"})
        await adapter.intake.open_store()
        await adapter.store.close()
    asyncio.run(main())
    [rung] = posts.of(base.Ingested)
    assert rung.rings == (("default.bot.dm.chat-0123456789abcdef", 0),)


def test_a_refused_configuration_keeps_the_adapter_up_reported_down_and_asking_again(fake, tmp_path):
    """A revoked token used to crash the adapter; its restarts then escalated and took the gateway down."""
    adapter, posts = make_adapter(fake, tmp_path)
    adapter.settings["base_url"] = fake.base_url + "/no-such-api"   # 404: permanent, like a revoked token
    adapter.refused_retry_s = 0.05

    async def main():
        task = asyncio.get_running_loop().create_task(adapter.intake.run_forever())
        try:
            while len(posts.of(base.IntakeRetrying)) < 2:
                assert not task.done(), f"the intake ended: {task.exception() if task.done() else ''}"
                await asyncio.sleep(0.01)
            adapter.settings["base_url"] = fake.base_url   # the configuration fixed: the next ask connects
            while not posts.of(base.IntakeConnected):
                assert not task.done(), "the intake goes on: the adapter does not crash"
                await asyncio.sleep(0.01)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await adapter.store.close()
    asyncio.run(asyncio.wait_for(main(), 10))
    refused = posts.of(base.IntakeRetrying)[0]
    assert refused.error.startswith("refused: ") and "404" in refused.error, refused
    assert any("refuses this adapter" in line.text for line in posts.of(base.LogLine))


def test_a_retryable_intake_error_reconnects_with_backoff(fake, tmp_path):
    adapter, posts = make_adapter(fake, tmp_path, poll_timeout_s=0.1)
    adapter.settings["base_url"] = "http://127.0.0.1:9"   # nothing listens: connection refused
    adapter.reconnect_base_s, adapter.reconnect_max_s = 0.01, 0.04

    async def main():
        task = asyncio.get_running_loop().create_task(adapter.intake.run_forever())
        while len([p for p in posts.of(base.LogLine) if "reconnecting" in p.text]) < 4:
            await asyncio.sleep(0.01)
        adapter.settings["base_url"] = fake.base_url   # the platform is back
        fake.inject("c1", "hello again")
        while not posts.of(base.Ingested):
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await adapter.store.close()
    asyncio.run(asyncio.wait_for(main(), 10))
    warnings = [p for p in posts.of(base.LogLine) if "reconnecting" in p.text]
    assert all("retryable" in w.text and "bot" in w.text for w in warnings)
    assert posts.of(base.IntakeConnected), "connected is announced once a fetch succeeds"


# ----------------------------------------------------------------------- the actor-thread side, with stubs

class Thespian:
    """Stands in for Actor.send and the bridge on the actor thread."""

    def __init__(self):
        self.sent, self.submitted = [], []

    def send(self, address, message):
        self.sent.append((address, message))

    def call(self, fn, *args):
        self.submitted.append(args)


def actor_side(fake, tmp_path):
    adapter, _ = make_adapter(fake, tmp_path)
    stub = Thespian()
    adapter.send, adapter.bridge = stub.send, stub
    return adapter, stub


def test_doorbells_wait_for_the_directory_then_ring(fake, tmp_path):
    from actors.messages import AdapterConnected, InboxDoorbell
    from supervision.messages import Directory
    adapter, stub = actor_side(fake, tmp_path)
    adapter.take_bridge_item(base.Ingested((("k1", 1), ("k2", 2))))
    adapter.take_bridge_item(base.IntakeConnected())
    assert stub.sent == []
    adapter.on_Directory(Directory(1, sessions="sessions", sweeper="sweeper"), None)
    assert stub.sent == [("sessions", InboxDoorbell("k1", 1)), ("sessions", InboxDoorbell("k2", 2)),
                         ("sweeper", AdapterConnected("bot"))]
    adapter.take_bridge_item(base.Ingested((("k3", 3),)))
    adapter.after_bridge_items()     # what one drain of the bridge produced goes out when the drain is done
    assert stub.sent[-1] == ("sessions", InboxDoorbell("k3", 3))


def test_ops_are_counted_until_answered_and_typing_is_dropped_while_the_chat_is_busy(fake, tmp_path):
    from actors.messages import OpResult
    adapter, stub = actor_side(fake, tmp_path)
    adapter.on_PlatformOp(PlatformOp("s1", "send", "c1", text="hi"), "consumer")
    adapter.on_PlatformOp(PlatformOp("t1", "typing", "c1"), "consumer")
    adapter.on_PlatformOp(PlatformOp("t2", "typing", "c2"), "consumer")
    adapter.on_PlatformOp(PlatformOp("x1", "shout", "c2"), "consumer")
    assert adapter.pending_work() == 2 and [t for _, (t, op) in stub.submitted] == [1, 2]
    skipped, unknown = [m for _, m in stub.sent]
    assert skipped.op_id == "t1" and skipped.ok and unknown.op_id == "x1" and unknown.error_kind == "permanent"
    adapter.take_bridge_item(base.OpDone(1, OpResult("s1", True, message_id="7")))
    adapter.after_bridge_items()
    assert adapter.pending_work() == 1 and stub.sent[-1] == ("consumer", OpResult("s1", True, message_id="7"))
    adapter.take_bridge_item(base.OpDone(1, OpResult("s1", True)))   # answered once only
    adapter.after_bridge_items()
    assert len(stub.sent) == 3


def test_answers_and_doorbells_of_one_drain_go_as_one_message_per_recipient(fake, tmp_path):
    from actors.messages import InboxDoorbell, OpResult
    from supervision.messages import Batch, Directory
    adapter, stub = actor_side(fake, tmp_path)
    adapter.on_Directory(Directory(1, sessions="sessions"), None)
    for n in (1, 2, 3):
        adapter.on_PlatformOp(PlatformOp(f"s{n}", "send", f"c{n}", text="hi"), "shard")
    adapter.on_PlatformOp(PlatformOp("w1", "send", "c9", text="hi"), "sweeper")
    stub.sent.clear()
    for ticket, op_id in ((1, "s1"), (2, "s2"), (4, "w1"), (3, "s3")):
        adapter.take_bridge_item(base.OpDone(ticket, OpResult(op_id, True)))
    adapter.take_bridge_item(base.Ingested((("k1", 1), ("k2", 2))))
    assert stub.sent == [], "nothing leaves before the drain is done"
    adapter.after_bridge_items()
    assert stub.sent == [("shard", Batch((OpResult("s1", True), OpResult("s2", True), OpResult("s3", True)))),
                         ("sweeper", OpResult("w1", True)),
                         ("sessions", Batch((InboxDoorbell("k1", 1), InboxDoorbell("k2", 2))))]


def test_a_message_retried_through_storage_failures_and_re_deliveries_is_charged_to_its_sender_once(fake, tmp_path):
    """A platform re-delivers a round its store failed (and a page retries through a full disk): each attempt must
    not spend the sender's budget again, or the message would end refused as over the limit and be lost."""
    from actors.adapters.sender_limits import LimitPolicy, SenderLimits
    from storage import StorageFull

    adapter, _ = make_adapter(fake, tmp_path)
    adapter.intake.sender_limits = SenderLimits(LimitPolicy(per_minute=0.001, burst=2, max_queued_turns=0))
    fake.inject("c1", "first", user="u1")

    async def main():
        await adapter.intake.open_store()
        await adapter.connect()
        raws, offset = await adapter.fetch()
        real_put, failures = adapter.store.inbox.put_many_and_commit_offset, []

        async def full_disk(*args, **kwargs):
            failures.append(1)
            raise StorageFull("database or disk is full")
        adapter.store.inbox.put_many_and_commit_offset = full_disk
        for _ in range(5):
            with pytest.raises(StorageFull):
                await adapter.intake.ingest(raws, offset)
        adapter.store.inbox.put_many_and_commit_offset = real_put
        stored = await adapter.intake.ingest(raws, offset)
        redelivered = [await adapter.intake.ingest(raws, offset) for _ in range(5)]
        fake.inject("c1", "second", user="u1")
        more, offset = await adapter.fetch()
        second = await adapter.intake.ingest(more[-1:], offset)
        await adapter.disconnect()
        await adapter.store.close()
        return len(failures), stored, redelivered, second

    failures, stored, redelivered, second = asyncio.run(main())
    assert failures == 5 and [inserted for _, inserted in stored] == [True]
    assert all(r == [(stored[0][0], False)] for r in redelivered)
    assert [inserted for _, inserted in second] == [True], "the sender's second message is within a burst of 2"


# --------------------------------------------------------------------------- a send's intent and id, in the adapter

def perform_on_the_ledger(adapter, fence_offset: int = 0):
    """Claim a reply in a fresh store, perform the send of its part 0 with the adapter (its store the same file),
    and return (the answer, the obligation as the ledger then holds it)."""
    from storage import Target

    async def main():
        store = await Store.open(adapter.config["gateway"]["state_dir"] + "/gateway.db", inline=True)
        adapter.store = store
        try:
            ob = await store.ledger.record_obligation("k", "in-1", Target("bot", "c1"), "reply", chunks=[],
                                                      claim=True)
            result = await adapter._perform(PlatformOp("op1", "send", "c1", text="hi",
                                                       ledger=(ob.obligation_id, ob.fence + fence_offset, 0)))
            return result, await store.ledger.get(ob.obligation_id)
        finally:
            await adapter.close()
            await store.close()
    return asyncio.run(main())


def test_a_send_commits_its_intent_just_before_it_leaves_and_its_id_with_the_answer(fake, tmp_path):
    adapter, _ = make_adapter(fake, tmp_path)
    seen_intent = []
    original = FakePlatformAdapter.send_message

    async def looking(op):
        seen_intent.append((await adapter.store.ledger.get(op.ledger[0])).send_intent)
        return await original(adapter, op)
    adapter.send_message = looking
    result, ob = perform_on_the_ledger(adapter)
    assert seen_intent == [0], "the intent was in the ledger when the request left"
    assert result.ok and result.recorded and ob.parts == {0: result.message_id} and ob.send_intent is None


def test_a_send_for_a_claim_that_is_no_longer_current_never_leaves(fake, tmp_path):
    adapter, _ = make_adapter(fake, tmp_path)
    result, ob = perform_on_the_ledger(adapter, fence_offset=-1)   # the fence of an earlier owner
    assert not result.ok and result.error_kind == "lost_claim" and "stale" in result.error
    assert fake.ops("c1") == [] and ob.send_intent is None


def test_a_send_the_platform_refused_leaves_no_intent_behind(fake, tmp_path):
    class Refusing(FakePlatformAdapter):
        async def send_message(self, op):
            raise PermanentError("chat not found")

    adapter = Refusing()
    adapter.__dict__.update({k: v for k, v in make_adapter(fake, tmp_path)[0].__dict__.items()
                             if k in ("name", "settings", "pacing", "config", "_loop_bridge")})
    result, ob = perform_on_the_ledger(adapter)
    assert not result.ok and result.error_kind == "permanent"
    assert ob.send_intent is None, "refused: nothing was sent, so a later claim has nothing to mark"


def test_the_route_decides_profile_session_and_whether_a_group_message_is_taken(fake, tmp_path):
    from actors.adapters.intake import NotAddressed
    adapter, _ = make_adapter(fake, tmp_path, profile="work")
    adapter.config = dict(adapter.config, adapters={"bot": dict(adapter.settings)}, profiles={"vip": {}}, routes=[
        {"chat": "g", "user": "ann", "profile": "vip", "per_user_in_groups": True},
        {"chat": "open", "respond": "all"}])

    def key(chat, user, mentioned=None):
        raw = {"id": 1, "chat": chat, "user": user, "text": "hi", "message_id": "1", "chat_type": "group"}
        return adapter.intake.item(dict(raw, **({} if mentioned is None else {"mentioned": mentioned}))).session_key

    ann, bob = key("g", "ann"), key("g", "bob")
    assert ann.startswith("vip.bot.group.") and ".user-" in ann, "the route's profile and its per-user sessions"
    assert bob.startswith("work.bot.group.") and ".user-" not in bob, "no route: the adapter's profile"
    assert key("g", "bob", mentioned=True) == bob
    with pytest.raises(NotAddressed):
        key("g", "bob", mentioned=False)
    assert key("open", "bob", mentioned=False).startswith("work.bot.group."), "respond = all takes it"


# ------------------------------------------------------------- the send hold (fault injection: send_hold.py)

def test_a_send_hold_is_refused_without_fault_injection_and_armed_with_it(fake, tmp_path):
    from actors.messages import HoldNextSend, ReleaseSend
    adapter, stub = actor_side(fake, tmp_path)
    adapter.on_HoldNextSend(HoldNextSend("c1"), "suite")
    adapter.on_ReleaseSend(ReleaseSend(), "suite")
    assert stub.submitted == [], "[debug] fault_injection is off: nothing reaches the loop"
    adapter.config = dict(adapter.config, debug={"fault_injection": True})
    adapter.on_HoldNextSend(HoldNextSend("c1"), "suite")
    assert stub.submitted == [("c1", "suite")]


def test_a_held_send_is_on_the_platform_and_not_in_the_ledger_until_released(fake, tmp_path):
    from storage import Target
    adapter, posts = make_adapter(fake, tmp_path)
    adapter.send_hold.arm("c2", "suite")      # another chat's: this send is not held
    seen = {}

    async def main():
        store = await Store.open(adapter.config["gateway"]["state_dir"] + "/gateway.db", inline=True)
        adapter.store = store
        try:
            ob = await store.ledger.record_obligation("k", "in-1", Target("bot", "c1"), "reply", chunks=[],
                                                      claim=True)
            first = await adapter._perform(PlatformOp("op1", "send", "c1", text="not held",
                                                      ledger=(ob.obligation_id, ob.fence, 0)))
            adapter.send_hold.arm("c1", "suite")
            held = asyncio.ensure_future(adapter._perform(PlatformOp("op2", "send", "c1", text="held",
                                                                     ledger=(ob.obligation_id, ob.fence, 1))))
            deadline = time.monotonic() + 5
            while adapter.send_hold.held is None and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            seen["held"] = adapter.send_hold.held
            seen["on the platform"] = [m["text"] for m in fake.messages("c1")]
            seen["in the ledger while held"] = await store.ledger.get(ob.obligation_id)
            adapter.send_hold.release()
            second = await asyncio.wait_for(held, 5)
            return first, second, await store.ledger.get(ob.obligation_id)
        finally:
            await adapter.close()
            await store.close()

    first, second, ob = asyncio.run(main())
    assert seen["held"] == ("c1", second.message_id)
    assert seen["on the platform"] == ["not held", "held"]
    while_held = seen["in the ledger while held"]
    assert while_held.parts == {0: first.message_id} and while_held.send_intent == 1, "sent, not recorded"
    assert second.ok and second.recorded and ob.parts == {0: first.message_id, 1: second.message_id}
    [notice] = posts.of(base.SendHeldNow)
    assert notice.armer == "suite" and notice.held.message_id == second.message_id
