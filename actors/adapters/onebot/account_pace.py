"""The whole QQ account's pace: a person's, not a program's (pure; every call takes ``now``).

QQ punishes an account that writes like a program: many messages a minute, at machine-even intervals, all day.
OneBot passes every action straight on, so the adapter holds the account to three bounds, across all its chats
(the kit's per-chat budget still applies to each chat under them):

* ``per_minute``: at most this many messages in any 60 s window (a sliding window of the send times);
* ``min_gap_s`` plus a random ``jitter_s``: never two messages closer than the gap, and the gaps uneven;
* ``daily``: at most this many a day (UTC). Reached, a send is refused with the reason (``DailyBoundReached``)
  rather than held: a reply held for hours answers a question nobody is waiting on, and a lane held that long
  blocks the chat's later messages too. The day's count outlives the process: the adapter commits it (``day``)
  before each message goes and hands it back (``restore``) when it starts, so a restart, even a kill -9, carries
  the day's count over and never lets the account past its bound.

A burst of answers therefore queues: ``wait_s`` says how long the next message waits, ``spend`` records it as it
sets out and ``accepted`` when the implementation took it (the gap runs from there).
"""
from __future__ import annotations

import collections
import random
from dataclasses import dataclass
from typing import Callable, Optional

DAY_S = 86400.0
WINDOW_S = 60.0


class DailyBoundReached(Exception):
    """The account sent its daily bound of messages; nothing more goes until the day ends."""


@dataclass(frozen=True)
class PaceRule:
    per_minute: float
    min_gap_s: float
    jitter_s: float
    daily: int

    def describe(self) -> str:
        return (f"{self.per_minute:g}/min, gap >= {self.min_gap_s:g} s (+ up to {self.jitter_s:g} s), "
                f"{self.daily}/day")


class AccountPace:
    """Sends of one account. ``now`` is monotonic seconds; ``wall`` is epoch seconds (for the UTC day)."""

    def __init__(self, rule: PaceRule, rand: Optional[Callable[[], float]] = None):
        self.rule = rule
        self._rand = rand or random.random
        self._recent: collections.deque = collections.deque()   # send times within the last WINDOW_S
        self._last: Optional[float] = None
        self._next_gap = rule.min_gap_s
        self._day = -1
        self.today = 0
        self.waited_s = 0.0           # total time messages waited for the pace (shown in status)

    def wait_s(self, now: float, wall: float) -> float:
        """Seconds until the next message may go (0.0: now); DailyBoundReached when today's bound is spent."""
        self._roll_day(wall)
        if self.today >= self.rule.daily:
            raise DailyBoundReached(f"the account sent its daily bound of {self.rule.daily} messages; sending "
                                    f"resumes at 00:00 UTC (option daily_limit)")
        while self._recent and self._recent[0] <= now - WINDOW_S:
            self._recent.popleft()
        wait = 0.0
        if self._last is not None:
            wait = max(wait, self._last + self._next_gap - now)
        per_minute = max(1, int(self.rule.per_minute))
        if len(self._recent) >= per_minute:
            wait = max(wait, self._recent[len(self._recent) - per_minute] + WINDOW_S - now)
        return wait

    def spend(self, now: float, wall: float) -> None:
        self._roll_day(wall)
        self.today += 1
        self._recent.append(now)
        self._last = now
        self._next_gap = self.rule.min_gap_s + self.rule.jitter_s * self._rand()

    def day(self) -> tuple[int, int]:
        """(the UTC day number, the messages spent on it): what the adapter commits before a message goes."""
        return self._day, self.today

    def restore(self, day: int, spent: int, wall: float) -> None:
        """A count committed by an earlier life: taken when it is of today's UTC day (a count of another day is
        spent)."""
        self._roll_day(wall)
        if day == self._day:
            self.today = max(self.today, spent)

    def accepted(self, now: float) -> None:
        """The message last spent was accepted by the implementation at ``now``: the next gap counts from here, not
        from when it set out, so a message held up on its way (a busy machine, a slow implementation) never arrives
        closer than the gap behind the one before it."""
        if self._last is not None:
            self._last = max(self._last, now)

    def _roll_day(self, wall: float) -> None:
        day = int(wall // DAY_S)
        if day != self._day:
            self._day, self.today = day, 0

    def status(self) -> str:
        return f"{self.rule.describe()}; {self.today} sent today, {self.waited_s:.0f} s waited"
