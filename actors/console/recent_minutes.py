"""The last hour of the gateway's own counters, minute by minute: what the console's overview draws (no Prometheus
needed). Pure and bounded: at most MINUTES records of a few integers each, whatever the traffic.

The metrics actor keeps one and adds each fact as it arrives (``turn``, ``restart``); nothing here runs on a timer,
so an idle gateway does no work for it. A minute with no fact has no record; ``series`` fills it with zeros.
In memory only: after a restart of the metrics actor the hour starts again, as its counters do.
"""
from __future__ import annotations

import bisect
import math
from collections import deque

MINUTES = 60
# Upper bounds (seconds) of the latency buckets; a quantile is interpolated inside its bucket.
LATENCY_BOUNDS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0,
                  120.0, 300.0, math.inf)


class MinuteCounters:
    def __init__(self, minutes: int = MINUTES):
        self.minutes = minutes
        self.records: deque = deque(maxlen=minutes)   # [minute, turns, failed, restarts, latency bucket counts]

    def _record(self, now: float) -> list:
        minute = int(now // 60)
        if not self.records or self.records[-1][0] < minute:
            self.records.append([minute, 0, 0, 0, [0] * len(LATENCY_BOUNDS)])
        return self.records[-1]   # a fact stamped a moment earlier than the newest record counts in that record

    def turn(self, now: float, seconds: float, failed: bool) -> None:
        record = self._record(now)
        record[1] += 1
        record[2] += int(failed)
        record[4][bisect.bisect_left(LATENCY_BOUNDS, max(0.0, seconds))] += 1

    def restart(self, now: float) -> None:
        self._record(now)[3] += 1

    def rows(self) -> tuple:
        """What crosses to the console: ((minute, turns, failed, restarts, (bucket counts...)), ...)."""
        return tuple((m, t, f, r, tuple(h)) for m, t, f, r, h in self.records)


def quantile(buckets, q: float):
    """The q-quantile (0..1) of a latency histogram (counts per LATENCY_BOUNDS bucket), or None without turns."""
    total = sum(buckets)
    if not total:
        return None
    wanted, seen = q * total, 0
    for i, count in enumerate(buckets):
        if count and seen + count >= wanted:
            low = LATENCY_BOUNDS[i - 1] if i else 0.0
            high = LATENCY_BOUNDS[i] if math.isfinite(LATENCY_BOUNDS[i]) else low * 2
            return round(low + (high - low) * (wanted - seen) / count, 3)
        seen += count
    return None


def series(rows, now: float, minutes: int = MINUTES) -> list[dict]:
    """One point per minute of the last ``minutes`` (the current one last), zeros where nothing happened."""
    by_minute = {row[0]: row for row in rows}
    last = int(now // 60)
    points = []
    for minute in range(last - minutes + 1, last + 1):
        _m, turns, failed, restarts, buckets = by_minute.get(minute, (minute, 0, 0, 0, ()))
        points.append({"t": minute * 60, "turns": turns, "failed": failed, "restarts": restarts,
                       "p50": quantile(buckets, 0.5), "p99": quantile(buckets, 0.99)})
    return points


def totals(rows) -> dict:
    """The hour at once: turns, failures, restarts and the latency quantiles of every turn in it."""
    buckets = [0] * len(LATENCY_BOUNDS)
    for row in rows:
        for i, count in enumerate(row[4]):
            buckets[i] += count
    return {"turns": sum(r[1] for r in rows), "failed": sum(r[2] for r in rows),
            "restarts": sum(r[3] for r in rows), "p50": quantile(buckets, 0.5), "p99": quantile(buckets, 0.99)}
