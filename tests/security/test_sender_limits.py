"""Per-sender limits at intake: a flood from one sender costs at most its burst in turns and one notice, and the
other senders are answered meanwhile. The pure part first, then the real daemon against the fake platform."""
from __future__ import annotations

import sqlite3
import time

import pytest

from actors.adapters.sender_limits import (MAX_BACKLOG_S, NOTICE, LimitPolicy, SenderLimits, charge_time,
                                          limit_problems, policy_of, sender_of)
from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import pipeline_gateway, settled_answers, visible


def test_a_sender_gets_their_burst_then_the_sustained_rate():
    limits = SenderLimits(LimitPolicy(per_minute=60, burst=3))
    assert [limits.take("a", 0.0) for _ in range(5)] == [True, True, True, False, False]
    assert limits.take("b", 0.0)                       # another sender has a bucket of their own
    assert not limits.take("a", 0.5) and limits.take("a", 1.0)   # one message a second comes back
    assert limits.limited == 3


def test_one_notice_per_streak_over_the_limit():
    limits = SenderLimits(LimitPolicy(per_minute=60, burst=1))
    limits.take("a", 0.0)
    assert not limits.take("a", 0.1) and limits.notice_due("a") and not limits.notice_due("a")
    assert not limits.take("a", 0.2) and not limits.notice_due("a")
    assert limits.take("a", 5.0)                       # admitted again: the next streak gets its own notice
    assert not limits.take("a", 5.1) and limits.notice_due("a")


def test_a_message_is_charged_when_the_platform_says_it_was_sent():
    wall, now = 1_000_000.0, 50.0
    assert charge_time(wall - 30, wall, now) == 20.0             # sent 30 s ago: charged 30 s ago
    assert charge_time(None, wall, now) == now                   # no platform time: when it arrived
    assert charge_time(wall + 99, wall, now) == now              # a platform clock ahead of ours: no earlier than now
    assert charge_time(0, wall, now) == now - MAX_BACKLOG_S      # a clock gone wrong buys at most a day's refill
    assert charge_time(True, wall, now) == charge_time(float("nan"), wall, now) == now


def test_a_backlog_sent_at_the_senders_pace_passes_and_a_flood_does_not():
    limits = SenderLimits(LimitPolicy(per_minute=60, burst=2))
    # Six messages sent 3 s apart while the gateway was down, all arriving at once: none is over the limit...
    assert all(limits.take("a", t) for t in (0.0, 3.0, 6.0, 9.0, 12.0, 15.0))
    # ...while six sent in the same second are, however they arrive.
    assert [limits.take("b", 20.0) for _ in range(6)] == [True, True, False, False, False, False]


def test_an_old_stamp_after_a_new_one_earns_no_refill():
    limits = SenderLimits(LimitPolicy(per_minute=60, burst=2))
    assert limits.take("a", 10.0) and limits.take("a", 10.0)
    # A late backlog message stamped before what the bucket has seen refills nothing, then or later.
    assert not limits.take("a", 1.0) and not limits.take("a", 10.5) and limits.take("a", 11.0)


def test_the_senders_tracked_are_bounded():
    limits = SenderLimits(LimitPolicy(per_minute=1, burst=1), max_senders=100)
    for i in range(1000):
        limits.take(f"made-up-{i}", 0.0)
    assert len(limits._buckets) == 100


def test_a_zero_rate_turns_the_limit_off():
    limits = SenderLimits(policy_of({"limits": {"per_minute": 0}}))
    assert all(limits.take("a", 0.0) for _ in range(1000))


@pytest.mark.parametrize("table, problem", [({"per_minut": 1}, "unknown key 'per_minut'"),
                                            ({"burst": -1}, "burst must be a number >= 0"),
                                            ({"burst": True}, "burst must be a number >= 0"),
                                            ({"burst": 0}, "burst must be at least 1"), ("x", "must be a table")])
def test_bad_limit_tables_are_explained(table, problem):
    assert any(problem in p for p in limit_problems(table))


def test_the_sender_is_the_chat_and_the_user_in_it():
    assert sender_of({"source": {"chat_id": "c", "user_id": "u"}}) == "c/u"
    assert sender_of({"source": {"chat_id": "c"}}) == "c"


def inbox_rows_of(gw, platform, chat: str) -> int:
    ids = [u["message_id"] for u in platform.timeline(chat)["inbound"]]
    with sqlite3.connect(gw.state / "gateway.db") as db:
        return db.execute(f"SELECT COUNT(*) FROM inbox WHERE platform_message_id IN ({','.join('?' * len(ids))})",
                          ids).fetchone()[0]


@pytest.mark.timeout(180)
def test_a_flood_from_one_sender_becomes_at_most_its_burst_and_one_notice(tmp_path):
    burst = 5
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform,
                              adapter_extra=f"limits = {{ per_minute = 6, burst = {burst}, max_queued_turns = 50 }}")
        try:
            gw.start()
            gw.wait_ready()
            for i in range(300):
                platform.inject("flood", f"message {i}", user="flooder")
            last = platform.inject("calm", "hello there", user="calm")
            assert settled_answers(platform, "calm", 1, timeout=60, gw=gw)
            # Every flood message is acknowledged (the platform stops re-delivering) and at most the burst, plus
            # what 6 a minute refilled meanwhile, was stored as turns.
            wait_for(lambda: platform.stats()["acked_offset"] > last, 60, 0.2, "the flood acknowledged")
            stored = inbox_rows_of(gw, platform, "flood")
            assert burst <= stored <= burst + 2, f"{stored} flood messages became turns"
            answers = settled_answers(platform, "flood", stored + 1, timeout=90, gw=gw)
            notices = [text for text in answers if text == NOTICE]
            assert len(notices) == 1, answers
            assert len(visible(platform, "flood")) == stored + 1
        finally:
            gw.cli("stop")
            gw.kill_everything()


@pytest.mark.timeout(180)
def test_a_backlog_held_by_the_platform_while_the_gateway_was_down_is_answered_whole(tmp_path):
    """The messages a sender sent at their own pace while the gateway was stopped reach it in one round when it
    starts; charged when they were sent, none of them is turned away."""
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform, adapter_extra="limits = { per_minute = 60, burst = 2 }")
        try:
            sent_from = time.time() - 30
            for i in range(6):    # one message every 3 s, 30 to 15 s ago: a pace the limit allows
                last = platform.inject("patient", f"question {i}", user="patient", date=sent_from + 3 * i)
            gw.start()
            gw.wait_ready()
            # The rows commit before their offset is acknowledged: once it is, what was stored is final.
            wait_for(lambda: platform.stats()["acked_offset"] > last, 60, 0.1, "the backlog acknowledged")
            assert inbox_rows_of(gw, platform, "patient") == 6
            answers = settled_answers(platform, "patient", 6, timeout=90, gw=gw)
            assert NOTICE not in answers, answers
        finally:
            gw.cli("stop")
            gw.kill_everything()
