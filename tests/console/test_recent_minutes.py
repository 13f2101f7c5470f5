"""The last hour minute by minute (actors/recent_minutes.py): bounded, quantiles from the buckets, zeros filled."""
from __future__ import annotations

import pytest

from actors.console.recent_minutes import MINUTES, MinuteCounters, quantile, series, totals, LATENCY_BOUNDS

pytestmark = pytest.mark.timeout(10)


def test_an_hour_of_traffic_keeps_at_most_an_hour_of_records():
    counters = MinuteCounters()
    for minute in range(5 * MINUTES):
        for _ in range(100):
            counters.turn(minute * 60.0 + 1, 0.4, failed=False)
    assert len(counters.rows()) == MINUTES
    assert counters.rows()[0][0] == 4 * MINUTES   # the oldest kept is an hour ago


def test_series_fills_quiet_minutes_with_zeros_and_counts_failures_and_restarts():
    counters = MinuteCounters()
    now = 1_000_000 * 60.0
    counters.turn(now - 120, 1.2, failed=True)
    counters.turn(now - 120, 0.2, failed=False)
    counters.restart(now)
    points = series(counters.rows(), now + 5)
    assert len(points) == MINUTES and points[-1]["t"] == now
    assert [p["turns"] for p in points[-3:]] == [2, 0, 0]
    assert [p["failed"] for p in points[-3:]] == [1, 0, 0]
    assert points[-1]["restarts"] == 1 and points[-2]["p50"] is None
    hour = totals(counters.rows())
    assert (hour["turns"], hour["failed"], hour["restarts"]) == (2, 1, 1)
    assert 0.1 < hour["p50"] <= 0.2 and 1.0 < hour["p99"] <= 1.5   # the buckets of 0.2 s and 1.2 s


def test_quantiles_land_in_the_bucket_of_the_turns():
    buckets = [0] * len(LATENCY_BOUNDS)
    buckets[LATENCY_BOUNDS.index(1.0)] = 98      # 0.75 .. 1.0 s
    buckets[LATENCY_BOUNDS.index(30.0)] = 2      # 20 .. 30 s
    assert 0.75 < quantile(buckets, 0.5) <= 1.0
    assert 20.0 < quantile(buckets, 0.99) <= 30.0
    assert quantile([0] * len(LATENCY_BOUNDS), 0.5) is None
    buckets = [0] * len(LATENCY_BOUNDS)
    buckets[-1] = 1                                # over the last bound: still a number
    assert quantile(buckets, 0.5) == pytest.approx(450.0)
