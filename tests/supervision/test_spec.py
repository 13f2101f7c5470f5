"""supervision/spec.py: the supervisor's decisions as pure functions (OTP semantics), tested without actors."""
from __future__ import annotations

import random

import pytest

from supervision.spec import (ChildSpec, Intensity, Restart, Strategy, SupervisorFlags, affected_children,
                              backoff_delay, flags_from_config, should_restart, wait_out_delay)


@pytest.mark.parametrize("restart, abnormal, expected", [
    (Restart.PERMANENT, True, True), (Restart.PERMANENT, False, True),
    (Restart.TRANSIENT, True, True), (Restart.TRANSIENT, False, False),
    (Restart.TEMPORARY, True, False), (Restart.TEMPORARY, False, False)])
def test_restart_types_decide_like_otp(restart, abnormal, expected):
    assert should_restart(restart, abnormal) is expected


@pytest.mark.parametrize("strategy, expected", [(Strategy.ONE_FOR_ONE, ["b"]), (Strategy.REST_FOR_ONE, ["b", "c"]),
                                                (Strategy.ONE_FOR_ALL, ["a", "b", "c"])])
def test_strategies_pick_who_restarts_with_the_failed_child(strategy, expected):
    assert affected_children(strategy, ["a", "b", "c"], "b") == expected


def test_intensity_counts_restarts_inside_the_sliding_period_only():
    intensity = Intensity(max_restarts=2, period_s=10.0)
    for now in (0.0, 1.0, 2.0):
        intensity.record(now)
    assert intensity.exceeded(2.0)
    assert intensity.recent(10.5) == 2 and not intensity.exceeded(10.5)   # the restart at 0 left the window
    assert intensity.recent(100.0) == 0


def test_backoff_grows_per_recent_restart_stays_under_its_cap_and_is_jittered():
    flags = SupervisorFlags(backoff_base_s=0.1, backoff_max_s=1.0)
    rng = random.Random(7)
    for recent, ceiling in ((0, 0.1), (1, 0.2), (2, 0.4), (3, 0.8), (4, 1.0), (10, 1.0)):
        delays = [backoff_delay(recent, flags, rng) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays), (recent, min(delays), max(delays))
        assert max(delays) - min(delays) > ceiling / 4          # spread: siblings do not come back in lockstep


def test_an_outside_cause_waits_the_longest_backoff():
    flags = SupervisorFlags(backoff_max_s=4.0)
    assert all(2.0 <= wait_out_delay(flags, random.Random(i)) <= 4.0 for i in range(50))


def test_flags_from_a_partial_config_take_the_schema_defaults():
    flags = flags_from_config({"supervision": {"max_restarts": 9}}, Strategy.REST_FOR_ONE)
    assert flags == SupervisorFlags(strategy=Strategy.REST_FOR_ONE, max_restarts=9, period_s=30.0,
                                    backoff_base_s=0.02, backoff_max_s=5.0)


def test_a_child_is_named_after_its_class_unless_given_a_kind():
    assert ChildSpec("s", "actors.sweeper.DeliverySweeper").kind_name == "DeliverySweeper"
    assert ChildSpec("s", "actors.sweeper.DeliverySweeper", kind="Sweeper").kind_name == "Sweeper"
