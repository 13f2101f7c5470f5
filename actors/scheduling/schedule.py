"""When a job runs: its schedule in cron syntax (read by croniter) and the catch-up rule, as pure functions of times.

Times are wall-clock seconds (``time.time()``): they are stored, and the next process reads them. A schedule is
evaluated in its job's time zone (UTC by default), so "0 9 * * *" in Europe/Berlin follows daylight saving time.

The decision at each tick of the scheduler (``plan``), for one job whose times up to ``cursor`` are decided:

* times in (cursor, now] at or after ``started_at`` (when this scheduler started) are on time: each runs once,
  however late the tick that finds them (at most ``MAX_RUNS_PER_TICK`` per tick; the rest at the next tick);
* times before ``started_at`` fell while the gateway was down (or its scheduler was restarting): **missed**. The
  job's ``catch_up`` says what happens to them: ``"latest"`` runs the most recent one once, late (marked caught up,
  with how many were missed); ``"skip"`` runs none and records the most recent as skipped. The others are never
  run: a gateway down for a week does not answer a daily job seven times;
* a job that is paused or disabled runs nothing, and its cursor moves past the times it let pass.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Optional
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter

CATCH_UP_RULES = ("latest", "skip")
MAX_RUNS_PER_TICK = 60          # on-time runs of one job decided by one tick (a tick late by minutes catches up next)
MAX_MISSED_COUNTED = 1_000      # missed times counted one by one; past it the count says "at least"


class ScheduleError(ValueError):
    """An expression croniter does not take, or one that never fires; the message says why."""


class Schedule:
    """A cron expression in a time zone: 5 fields (minute hour day month weekday), 6 with seconds **first**, as
    Quartz, Spring and most 6-field crons have them (``"*/10 * * * * *"`` is every ten seconds, ``"30 0 9 * * *"``
    09:00:30; croniter's ``second_at_beginning``), or an alias such as ``@daily``."""

    def __init__(self, expression: str, timezone: str = "UTC"):
        if not isinstance(expression, str) or not expression.strip():
            raise ScheduleError("is empty; e.g. \"0 9 * * *\" (09:00 every day)")
        self.expression = " ".join(expression.split())
        fields = self.expression.split(" ")
        if not self.expression.startswith("@") and len(fields) not in (5, 6):
            raise ScheduleError(f"has {len(fields)} fields; a schedule has 5 (minute hour day month weekday) or 6 "
                                f"(seconds first), e.g. \"0 9 * * 1-5\"")
        try:
            self.zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ScheduleError(f"time zone {timezone!r} is unknown (an IANA name such as \"UTC\" or "
                                f"\"Europe/Berlin\")") from None
        self.timezone = timezone
        try:
            self._iter(0.0)
        except (CroniterError, ValueError, KeyError) as exc:
            raise ScheduleError(f"{self.expression!r} is not a cron expression: {exc}") from None

    def __eq__(self, other) -> bool:   # the same expression in the same zone: the same schedule (a reload's check)
        return isinstance(other, Schedule) and (self.expression, self.timezone) == (other.expression, other.timezone)

    def __hash__(self) -> int:
        return hash((self.expression, self.timezone))

    def _iter(self, t: float) -> croniter:
        return croniter(self.expression, datetime.datetime.fromtimestamp(t, self.zone), second_at_beginning=True)

    def next_after(self, t: float) -> Optional[float]:
        """The first time of the schedule strictly after ``t``; None if there is none (``0 0 31 2 *``)."""
        try:
            return self._iter(t).get_next(float)
        except CroniterBadDateError:
            return None

    def previous_before(self, t: float) -> Optional[float]:
        """The last time of the schedule strictly before ``t``; None if there is none."""
        try:
            return self._iter(t).get_prev(float)
        except CroniterBadDateError:
            return None

    def times(self, after: float, until: float, limit: int) -> list[float]:
        """The times in (after, until], oldest first, at most ``limit`` of them."""
        out: list[float] = []
        try:
            it = self._iter(after)
            while len(out) < limit:
                t = it.get_next(float)
                if t > until:
                    break
                out.append(t)
        except CroniterBadDateError:
            pass
        return out


def parse_schedule(expression: str, timezone: str = "UTC", now: float = 0.0) -> Schedule:
    """The schedule, refused (``ScheduleError``) if croniter does not take it or it never fires after ``now``."""
    schedule = Schedule(expression, timezone)
    if now and schedule.next_after(now) is None:
        raise ScheduleError(f"{schedule.expression!r} never fires")
    return schedule


@dataclass(frozen=True)
class PlannedRun:
    at: float                      # the time of the schedule this run is for
    caught_up: bool = False        # a missed time run late (catch_up = "latest"), or recorded skipped ("skip")
    missed: int = 0                # how many times fell while down (at least this many past MAX_MISSED_COUNTED)


@dataclass(frozen=True)
class Plan:
    runs: tuple = ()               # PlannedRun: to claim and run, oldest first
    skipped: Optional[PlannedRun] = None   # missed times not run (catch_up = "skip"): recorded, as the latest
    cursor: Optional[float] = None         # the job's new cursor; None: nothing was due, nothing to write

    @property
    def changed(self) -> bool:
        return self.cursor is not None


def plan(schedule: Schedule, cursor: float, started_at: float, now: float, catch_up: str = "latest",
         active: bool = True, limit: int = MAX_RUNS_PER_TICK) -> Plan:
    """What a tick at ``now`` decides for one job (the module docstring gives the rule)."""
    if catch_up not in CATCH_UP_RULES:
        raise ValueError(f"catch_up must be one of {CATCH_UP_RULES}, not {catch_up!r}")
    first = schedule.next_after(cursor)
    if first is None or first > now:
        return Plan()
    if not active:
        return Plan(cursor=now)
    runs: list[PlannedRun] = []
    skipped = None
    after = cursor
    if first < started_at:
        latest = schedule.previous_before(min(started_at, now + 1e-6))
        if latest is not None and latest > cursor:
            missed = len(schedule.times(cursor, latest, MAX_MISSED_COUNTED))
            record = PlannedRun(latest, caught_up=True, missed=missed)
            if catch_up == "latest":
                runs.append(record)
            else:
                skipped = record
            after = latest
    on_time = schedule.times(after, now, limit)
    runs += [PlannedRun(t) for t in on_time]
    new_cursor = on_time[-1] if len(on_time) >= limit else now
    return Plan(tuple(runs), skipped, new_cursor)
