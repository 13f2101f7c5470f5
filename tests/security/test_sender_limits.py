"""Per-sender limits at intake: a flood from one sender costs at most its burst in turns and one notice, and the
other senders are answered meanwhile. The pure part first, then the real daemon against the fake platform."""
from __future__ import annotations

import sqlite3

import pytest

from actors.adapters.sender_limits import NOTICE, LimitPolicy, SenderLimits, limit_problems, policy_of, sender_of
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
