import pytest

from actors.sessions.chunking import LENGTH_FUNCTIONS
from actors.sessions.pacing import (DEFAULT_PACING, PACING, ChatBudget, EditThrottle, PlatformPacing, pacing_for)


def test_table_follows_platform_facts():
    assert set(PACING) >= {"telegram", "discord", "slack", "signal", "wechat", "matrix", "webchat", "cli", "fake"}
    telegram = PACING["telegram"]
    assert (telegram.text_limit, telegram.length, telegram.per_chat_ops_per_s) == (4096, "utf16", 1.0)
    assert telegram.group_ops_per_s == pytest.approx(20 / 60)
    assert (PACING["discord"].text_limit, PACING["discord"].length) == (2000, "chars")
    assert PACING["discord"].per_chat_burst / PACING["discord"].per_chat_ops_per_s == 5  # 5 per 5 s
    assert PACING["slack"].text_limit == 40000
    assert not PACING["signal"].supports_edit and not PACING["wechat"].supports_edit
    assert (PACING["wechat"].text_limit, PACING["wechat"].length) == (2048, "bytes")
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
    unknown = pacing_for("irc")
    assert unknown.platform == "irc" and unknown.text_limit == DEFAULT_PACING.text_limit
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
