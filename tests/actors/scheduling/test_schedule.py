"""When a job runs (actors/scheduling/schedule.py): cron expressions read by croniter, on-time runs, and the catch-up
rule for times that fell while the gateway was down. Pure: times are numbers, no clock is read."""
from __future__ import annotations

import datetime

import pytest

from actors.scheduling.schedule import MAX_RUNS_PER_TICK, Plan, Schedule, ScheduleError, parse_schedule, plan

UTC = datetime.timezone.utc
T0 = datetime.datetime(2026, 3, 2, 8, 0, 0, tzinfo=UTC).timestamp()   # a Monday, 08:00 UTC


def at(hour, minute=0, second=0, day=2, month=3) -> float:
    return datetime.datetime(2026, month, day, hour, minute, second, tzinfo=UTC).timestamp()


def test_five_fields_six_with_seconds_last_and_aliases():
    assert Schedule("0 9 * * 1-5").next_after(T0) == at(9)
    assert Schedule("30 0 9 * * *").next_after(T0) == at(9, 0, 30), "six fields: seconds first"
    assert Schedule("*/2 * * * * *").times(T0, T0 + 5, 10) == [T0 + 2, T0 + 4], "every two seconds"
    assert Schedule("* * * * * *").times(T0, T0 + 3, 10) == [T0 + 1, T0 + 2, T0 + 3]
    assert Schedule("@daily").next_after(T0) == at(0, day=3)
    assert Schedule("  0   9 * * *  ").expression == "0 9 * * *"


def test_a_time_zone_follows_daylight_saving_time():
    berlin = Schedule("0 9 * * *", "Europe/Berlin")
    assert berlin.next_after(at(0, day=27)) == at(8, day=27), "CET: 09:00 is 08:00 UTC"
    assert berlin.next_after(at(0, day=30)) == at(7, day=30), "CEST from 29 March: 09:00 is 07:00 UTC"


@pytest.mark.parametrize("expression,why", [
    ("", "is empty"), ("61 * * * *", "not a cron expression"), ("* * * *", "has 4 fields"),
    ("* * * * * * *", "has 7 fields"), ("every day", "has 2 fields"), ("0 0 31 2 *", "never fires")],
    ids=["empty", "out-of-range", "four-fields", "seven-fields", "words", "never"])
def test_bad_expressions_are_refused_with_the_reason(expression, why):
    with pytest.raises(ScheduleError, match=why):
        parse_schedule(expression, "UTC", now=T0)


def test_an_unknown_time_zone_is_refused():
    with pytest.raises(ScheduleError, match="time zone 'Mars/Olympus' is unknown"):
        Schedule("0 9 * * *", "Mars/Olympus")


def test_nothing_due_means_nothing_to_write():
    assert plan(Schedule("0 9 * * *"), cursor=T0, started_at=T0, now=at(8, 59, 59)) == Plan()
    assert not Plan().changed


def test_a_due_time_runs_once_and_the_cursor_moves_past_it():
    daily = Schedule("0 9 * * *")
    first = plan(daily, cursor=T0, started_at=T0, now=at(9, 0, 1))
    assert [r.at for r in first.runs] == [at(9)] and not first.runs[0].caught_up and first.cursor == at(9, 0, 1)
    assert plan(daily, cursor=first.cursor, started_at=T0, now=at(9, 0, 2)) == Plan(), "never twice"


def test_a_late_tick_while_up_runs_every_time_it_finds():
    """The scheduler was up all along (its tick ran late): these times were not missed, each runs."""
    every_second = Schedule("* * * * * *")
    decided = plan(every_second, cursor=T0, started_at=T0 - 60, now=T0 + 5)
    assert [r.at for r in decided.runs] == [T0 + s for s in range(1, 6)] and decided.skipped is None


def test_at_most_a_bounded_number_of_runs_per_tick_and_the_rest_at_the_next():
    every_second = Schedule("* * * * * *")
    decided = plan(every_second, cursor=T0, started_at=T0 - 1, now=T0 + 500)
    assert len(decided.runs) == MAX_RUNS_PER_TICK and decided.cursor == decided.runs[-1].at
    following = plan(every_second, cursor=decided.cursor, started_at=T0 - 1, now=T0 + 500)
    assert following.runs[0].at == decided.runs[-1].at + 1


def test_catch_up_latest_runs_the_most_recent_missed_time_once():
    """Down from 08:30 to 11:10 on a Monday: 09:00, 10:00 and 11:00 were missed; only 11:00 runs, once, marked."""
    hourly = Schedule("0 * * * *")
    decided = plan(hourly, cursor=at(8, 30), started_at=at(11, 10), now=at(11, 10, 1), catch_up="latest")
    assert [(r.at, r.caught_up, r.missed) for r in decided.runs] == [(at(11), True, 3)]
    assert decided.skipped is None and decided.cursor == at(11, 10, 1)
    assert plan(hourly, cursor=decided.cursor, started_at=at(11, 10), now=at(11, 30)) == Plan()


def test_catch_up_skip_runs_none_and_records_the_latest_as_skipped():
    hourly = Schedule("0 * * * *")
    decided = plan(hourly, cursor=at(8, 30), started_at=at(11, 10), now=at(11, 10, 1), catch_up="skip")
    assert decided.runs == () and (decided.skipped.at, decided.skipped.missed) == (at(11), 3)
    assert decided.cursor == at(11, 10, 1)


def test_missed_times_and_on_time_ones_in_one_tick():
    """The first tick after a start finds both: what fell before the start (the rule) and what came since (runs)."""
    every_second = Schedule("* * * * * *")
    latest = plan(every_second, cursor=T0, started_at=T0 + 10.5, now=T0 + 12, catch_up="latest")
    assert [(r.at, r.caught_up) for r in latest.runs] == [(T0 + 10, True), (T0 + 11, False), (T0 + 12, False)]
    assert latest.runs[0].missed == 10
    skip = plan(every_second, cursor=T0, started_at=T0 + 10.5, now=T0 + 12, catch_up="skip")
    assert [r.at for r in skip.runs] == [T0 + 11, T0 + 12] and skip.skipped.at == T0 + 10


def test_a_time_exactly_at_the_start_is_on_time():
    every_minute = Schedule("* * * * *")
    decided = plan(every_minute, cursor=T0, started_at=T0 + 60, now=T0 + 61, catch_up="skip")
    assert [r.at for r in decided.runs] == [T0 + 60] and decided.skipped is None


def test_a_week_down_counts_its_missed_times_up_to_a_bound():
    every_second = Schedule("* * * * * *")
    decided = plan(every_second, cursor=T0, started_at=T0 + 7 * 86400, now=T0 + 7 * 86400, catch_up="latest")
    assert len(decided.runs) == 2 and decided.runs[0].missed == 1_000, "counted to the bound, not 604,800 times"


def test_a_paused_job_runs_nothing_and_lets_its_times_pass():
    hourly = Schedule("0 * * * *")
    decided = plan(hourly, cursor=at(8, 30), started_at=at(8), now=at(11, 10), active=False)
    assert decided.runs == () and decided.skipped is None and decided.cursor == at(11, 10)
    assert plan(hourly, cursor=at(8, 30), started_at=at(8), now=at(8, 40), active=False) == Plan()


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="catch_up"):
        plan(Schedule("* * * * *"), T0, T0, T0 + 60, catch_up="all")
