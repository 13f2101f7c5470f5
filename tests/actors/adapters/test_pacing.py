"""Pacing as data and the pure deciders (budgets, edit throttle); and pacing across an adapter's restarts: budgets
that start spent, 429 bans kept in storage on the wall clock and brought back on the monotonic clock, and an
adapter's next life that waits out the ban its previous life received."""
from __future__ import annotations

import asyncio
import time

import pytest

from actors.adapters import registry
from actors.adapters.budgets import ChatBudgets
from actors.adapters.fake.adapter import FakePlatformAdapter
from actors.messages import PlatformOp
from actors.adapters.pacing import LENGTH_FUNCTIONS, DEFAULT_PACING, ChatBudget, PlatformPacing, on_monotonic_clock
from actors.adapters.registry import REGISTRY, pacing_for
from actors.sessions.edit_throttle import EditThrottle
from storage import Store
from tests.fakes.fakeplatform import FakePlatform


PACING = {name: entry.pacing for name, entry in REGISTRY.items()}   # each platform folder's row


def test_table_follows_platform_facts():
    assert set(PACING) >= {"telegram", "discord", "slack", "signal", "wecom", "matrix", "webchat", "cli", "fake"}
    telegram = PACING["telegram"]
    assert (telegram.text_limit, telegram.length, telegram.per_chat_ops_per_s) == (4096, "utf16", 1.0)
    assert telegram.group_ops_per_s == pytest.approx(20 / 60)
    assert (PACING["discord"].text_limit, PACING["discord"].length) == (2000, "chars")
    assert PACING["discord"].per_chat_burst / PACING["discord"].per_chat_ops_per_s == 5  # 5 per 5 s
    assert PACING["slack"].text_limit == 40000
    assert not PACING["signal"].supports_edit and not PACING["wecom"].supports_edit
    assert (PACING["wecom"].text_limit, PACING["wecom"].length) == (2048, "bytes")
    assert PACING["matrix"].length == "bytes" and PACING["matrix"].text_limit < 65536
    assert PACING["webchat"].edit_interval_s < 0.2 and PACING["cli"].text_limit >= 100_000
    for name, pacing in PACING.items():
        assert pacing.platform == name
        assert pacing.length in LENGTH_FUNCTIONS
        assert pacing.per_chat_ops_per_s > 0 and pacing.per_chat_burst >= 1


def test_pacing_is_frozen_data():
    with pytest.raises(Exception):
        PACING["telegram"].text_limit = 1


def test_pacing_for_unknown_platform_and_overrides():
    assert pacing_for("telegram") is PACING["telegram"]
    unknown = pacing_for("gopher")
    assert unknown.platform == "gopher" and unknown.text_limit == DEFAULT_PACING.text_limit
    assert not unknown.supports_edit
    tuned = pacing_for("telegram", {"edit_interval_s": 3.0})
    assert tuned.edit_interval_s == 3.0 and tuned.text_limit == 4096


def test_budget_allows_a_burst_then_paces():
    budget = ChatBudget(ops_per_s=1.0, burst=3, now=100.0)
    for _ in range(3):
        assert budget.wait_time(100.0) == 0.0
        budget.consume(100.0)
    assert budget.wait_time(100.0) == pytest.approx(1.0)
    assert budget.wait_time(100.5) == pytest.approx(0.5)
    assert budget.wait_time(101.0) == 0.0
    budget.consume(101.0)
    assert budget.wait_time(101.0) == pytest.approx(1.0)


def test_budget_refills_only_up_to_burst():
    budget = ChatBudget(ops_per_s=2.0, burst=2, now=0.0)
    budget.consume(0.0)
    budget.consume(0.0)
    assert budget.wait_time(1000.0) == 0.0
    budget.consume(1000.0)
    budget.consume(1000.0)
    assert budget.wait_time(1000.0) == pytest.approx(0.5)


def test_sends_and_edits_share_the_budget_and_overspending_goes_negative():
    budget = ChatBudget(ops_per_s=1.0, burst=1, now=0.0)
    budget.consume(0.0)   # a send
    budget.consume(0.0)   # an edit sent anyway
    assert budget.wait_time(0.0) == pytest.approx(2.0)


def test_flood_blocks_until_retry_after_then_allows_one():
    budget = ChatBudget(ops_per_s=1.0, burst=5, now=0.0)
    budget.flood(until=30.0)
    assert budget.wait_time(10.0) == pytest.approx(20.0)
    assert budget.wait_time(30.0) == 0.0
    budget.consume(30.0)
    assert budget.wait_time(30.0) == pytest.approx(1.0)
    budget.flood(until=20.0)         # an older, shorter flood never shortens the block
    assert budget.blocked_until == 30.0


def test_budget_for_groups_uses_the_stricter_rate():
    dm = ChatBudget.for_platform(PACING["telegram"], "dm")
    group = ChatBudget.for_platform(PACING["telegram"], "group")
    assert dm.ops_per_s == 1.0 and group.ops_per_s == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        ChatBudget(0, 1)


def make_throttle(**changes):
    base = PlatformPacing("t", 100, "chars", edit_interval_s=1.0, min_edit_delta_chars=10, per_chat_ops_per_s=1.0,
                          per_chat_burst=1, supports_edit=True, typing_interval_s=None)
    return EditThrottle(PlatformPacing(**{**base.__dict__, **changes}))


def test_edit_needs_interval_and_delta():
    throttle = make_throttle()
    assert throttle.should_edit(0.0, "x" * 10)           # nothing shown yet, enough text
    throttle.record(0.0, "x" * 10)
    assert not throttle.should_edit(0.5, "x" * 30)       # too soon
    assert not throttle.should_edit(1.5, "x" * 15)       # too little new text
    assert throttle.should_edit(1.5, "x" * 20)
    assert throttle.next_edit_at() == 1.0


def test_final_edit_is_never_skipped():
    throttle = make_throttle()
    throttle.record(0.0, "abc")
    assert throttle.should_edit(0.01, "abcd", final=True)
    assert throttle.should_edit(0.01, "abc", final=True)


def test_rewritten_text_counts_as_changed():
    throttle = make_throttle(min_edit_delta_chars=5)
    throttle.record(0.0, "hello world")
    assert throttle.should_edit(2.0, "hello there")     # same length, 5 characters differ
    assert not throttle.should_edit(2.0, "hello world")


def test_no_intermediate_edits_where_unsupported():
    throttle = EditThrottle(PACING["signal"])
    assert not throttle.should_edit(100.0, "partial answer")
    assert throttle.should_edit(100.0, "complete answer", final=True)


# ------------------------------------------------------------------------------------ across restarts

TELEGRAM = PACING["telegram"]


def paced_sends(budget: ChatBudget, start: float, count: int) -> list[float]:
    """The times at which ``count`` operations go when each waits as the budget says."""
    now, times = start, []
    for _ in range(count):
        now += budget.wait_time(now)
        budget.consume(now)
        times.append(now)
    return times


def over_budget(times: list[float], rate: float, burst: int) -> list[tuple]:
    """Windows holding more operations than a bucket of ``rate``/s and ``burst`` allows (the fakes' rule)."""
    return [(i, k) for i in range(len(times)) for k in range(i + 1, len(times))
            if k - i + 1 > burst + rate * (times[k] - times[i]) + 1e-9]


# ------------------------------------------------------------------------------------------------ ChatBudget

def test_a_budget_spent_at_start_lets_the_first_operation_go_one_refill_interval_later():
    budget = ChatBudget.for_platform(TELEGRAM, "dm", now=100.0, spent_at=100.0)
    assert budget.wait_time(100.0) == pytest.approx(1.0)
    group = ChatBudget.for_platform(TELEGRAM, "group", now=100.0, spent_at=100.0)
    assert group.wait_time(100.0) == pytest.approx(3.0), "20 per minute in groups"


def test_a_budget_spent_at_start_refills_only_from_then():
    budget = ChatBudget.for_platform(TELEGRAM, "dm", now=101.5, spent_at=100.0)
    assert budget.wait_time(101.5) == 0.0
    budget.consume(101.5)
    assert budget.wait_time(101.5) == pytest.approx(0.5), "1.5 tokens had come back, one is spent"
    rested = ChatBudget.for_platform(TELEGRAM, "dm", now=160.0, spent_at=100.0)
    assert paced_sends(rested, 160.0, 4) == pytest.approx([160.0, 160.0, 160.0, 161.0]), "never beyond the burst"


def test_a_full_life_then_a_restart_never_exceeds_the_budget_whatever_the_gap():
    for gap in (0.0, 0.2, 0.9, 1.7, 3.5):
        first_life = ChatBudget.for_platform(TELEGRAM, "dm", now=0.0)
        before = paced_sends(first_life, 0.0, 8)          # burst, then one a second, until the kill
        restart = before[-1] + gap
        second_life = ChatBudget.for_platform(TELEGRAM, "dm", now=restart, spent_at=restart)
        after = paced_sends(second_life, restart, 8)
        assert not over_budget(before + after, TELEGRAM.per_chat_ops_per_s, TELEGRAM.per_chat_burst), gap
    naive = ChatBudget.for_platform(TELEGRAM, "dm", now=before[-1])   # what a fresh, full bucket would do
    assert over_budget(before + paced_sends(naive, before[-1], 3), TELEGRAM.per_chat_ops_per_s,
                       TELEGRAM.per_chat_burst), "the check would catch the budget an unspent start allows"


def test_a_flood_blocks_until_its_end_then_lets_one_operation_go():
    budget = ChatBudget.for_platform(TELEGRAM, "dm", now=0.0, spent_at=0.0)
    budget.flood(5.0)
    assert budget.wait_time(1.0) == pytest.approx(4.0) and budget.blocked_until == 5.0
    assert paced_sends(budget, 1.0, 2) == pytest.approx([5.0, 6.0])


def test_a_wall_clock_end_maps_onto_the_monotonic_clock():
    assert on_monotonic_clock(1_000_002.5, wall_now=1_000_000.0, monotonic_now=40.0) == pytest.approx(42.5)
    assert on_monotonic_clock(999_990.0, wall_now=1_000_000.0, monotonic_now=40.0) == 40.0, "past: no wait"


# --------------------------------------------------------------------------------------- the stored bans

def test_bans_are_kept_per_adapter_and_chat_never_shortened_and_pruned_once_over(tmp_path):
    async def main():
        async with await Store.open(tmp_path / "gateway.db") as store:
            await store.pacing.ban("tg", "1", until=1_010.0, now=1_000.0)
            await store.pacing.ban("tg", "1", until=1_005.0, now=1_000.0)   # an earlier end: the later one holds
            await store.pacing.ban("tg", "2", until=1_002.0, now=1_000.0)
            await store.pacing.ban("other", "1", until=1_020.0, now=1_000.0)
            first = await store.pacing.active("tg", now=1_001.0)
            later = await store.pacing.active("tg", now=1_003.0)
            await store.pacing.ban("tg", "3", until=1_030.0, now=1_012.0)   # drops the adapter's expired rows
        async with await Store.open(tmp_path / "gateway.db") as reopened:    # what a restarted process reads
            kept = await reopened.pacing.active("tg", now=0.0)
            other = await reopened.pacing.active("other", now=1_001.0)
        return first, later, kept, other

    first, later, kept, other = asyncio.run(main())
    assert first == {"1": 1_010.0, "2": 1_002.0}
    assert later == {"1": 1_010.0}
    assert kept == {"3": 1_030.0}, "expired bans of the adapter are gone from the file"
    assert other == {"1": 1_020.0}


def test_chat_budgets_hold_operations_until_loaded_then_apply_a_stored_ban(tmp_path):
    async def main():
        async with await Store.open(tmp_path / "gateway.db") as store:
            await store.pacing.ban("tg", "chat-a", until=time.time() + 2.0)
            loop = asyncio.get_running_loop()
            budgets = ChatBudgets(started_at=loop.time() - 10.0)   # started long ago: buckets full again
            waiting = asyncio.create_task(budgets.ready())
            await asyncio.sleep(0.05)
            held = not waiting.done() and not budgets.loaded
            assert await budgets.load(store, "tg") == 1
            await asyncio.wait_for(waiting, 1.0)
            banned = budgets.of("chat-a", "dm", TELEGRAM).wait_time(loop.time())
            free = budgets.of("chat-b", "dm", TELEGRAM).wait_time(loop.time())
        return held, banned, free

    held, banned, free = asyncio.run(main())
    assert held, "no operation goes before the bans of the previous life are known"
    assert 1.5 < banned <= 2.0 and free == 0.0


def test_without_an_earlier_life_budgets_start_full_and_nothing_waits():
    async def main():
        budgets = ChatBudgets()
        await asyncio.wait_for(budgets.ready(), 0.1)
        return budgets.loaded, budgets.of("c", "dm", TELEGRAM).wait_time(asyncio.get_running_loop().time())
    assert asyncio.run(main()) == (True, 0.0)


# ----------------------------------------------------------------------------------- an adapter's next life

def adapter_life(fake: FakePlatform, tmp_path) -> FakePlatformAdapter:
    """An adapter as on_start leaves it (less the actor thread): its settings, a fresh start time, a store."""
    adapter = FakePlatformAdapter()
    adapter.name = "bot"
    adapter.settings = registry.validate_adapter("bot", {"type": "fake", "base_url": fake.base_url})
    adapter.pacing = registry.pacing_of(adapter.settings)
    adapter.config = {"gateway": {"state_dir": str(tmp_path)}, "storage": {"durability": "normal"}}
    adapter._loop_bridge = type("Posts", (), {"post": lambda self, item: None})()
    adapter._budgets = ChatBudgets(started_at=time.monotonic())
    return adapter


def test_the_next_life_of_an_adapter_waits_out_the_ban_its_previous_life_received(tmp_path):
    with FakePlatform() as fake:
        fake.set_faults(next=["flood"], flood_retry_after=1.5)

        async def first_life():
            adapter = adapter_life(fake, tmp_path)
            await adapter.intake.open_store()
            await adapter._budgets.load(adapter.store, adapter.name)
            # The 429 arrives; the op waits it out in memory, and dies (kill -9) before its retry goes.
            attempt = asyncio.create_task(adapter._perform(PlatformOp("op1", "send", "c1", text="hi")))
            await_ban = time.monotonic() + 5
            while not await adapter.store.pacing.active("bot") and time.monotonic() < await_ban:
                await asyncio.sleep(0.01)
            attempt.cancel()
            await adapter.store.close()

        async def second_life():
            adapter = adapter_life(fake, tmp_path)
            await adapter.intake.open_store()
            await adapter._budgets.load(adapter.store, adapter.name)
            try:
                return await adapter._perform(PlatformOp("op2", "send", "c1", text="again"))
            finally:
                await adapter.close()
                await adapter.store.close()

        asyncio.run(first_life())
        result = asyncio.run(second_life())
        flood, sent = fake.ops("c1")
        assert result.ok and [flood["status"], sent["status"]] == [429, 200]
        assert sent["at"] - flood["at"] >= 1.5, "the restarted adapter waited for the ban's end"
        assert fake.stats()["retry_after_violations"] == 0
