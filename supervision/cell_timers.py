"""The timers of a cell host: every cell's ``after`` in one heap, served by as few Thespian wakeups as possible.

Owned by the cell host (supervision/cell_host.py) and called on its host actor's thread only. A wakeup is asked for
(``arm(seconds, token)``) only when a timer is due before every wakeup already coming: the host's wakeups are not
free (Thespian keeps them in a list it sorts on every add), and a wakeup that re-armed unconditionally would leave
one more behind each time it fired. What survives kill -9: nothing; timers are memory, and a restarted cell sets its
own again.
"""
from __future__ import annotations

import heapq
import itertools
import time
from typing import Any, Callable, Optional


class CellTimers:
    def __init__(self, arm: Callable[[float, float], None]):
        self._arm = arm
        self._heap: list = []                  # (due, seq, entry)
        self._seq = itertools.count()
        self._armed: list = []                 # due times of the wakeups still to come

    def schedule(self, seconds: float, entry: Any) -> None:
        due = time.monotonic() + max(0.0, seconds)
        heapq.heappush(self._heap, (due, next(self._seq), entry))
        self._arm_for(due, time.monotonic())

    def due(self, token: Optional[float] = None) -> list:
        """A wakeup came (``token``: the due time it was asked for): the entries now due, in due order; a wakeup is
        asked for the next one unless one is already coming."""
        now = time.monotonic()
        if token is not None and token in self._armed:
            self._armed.remove(token)
            heapq.heapify(self._armed)
        entries = []
        while self._heap and self._heap[0][0] <= now:
            entries.append(heapq.heappop(self._heap)[2])
        while self._armed and self._armed[0] < now - 1.0:
            heapq.heappop(self._armed)   # its wakeup was lost (or never came): it must not hold the next one back
        if self._heap:
            self._arm_for(self._heap[0][0], now)
        return entries

    def _arm_for(self, due: float, now: float) -> None:
        if not self._armed or due < self._armed[0]:
            heapq.heappush(self._armed, due)
            self._arm(max(0.0, due - now), due)
