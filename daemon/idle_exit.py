"""Scale to zero: the activity clock and the launcher's idle exit ([gateway] idle_exit_s; docs/background.md).

A gateway started on demand (its service manager starts it when a webhook or the web chat connects: the units in
deploy/on-demand/) stops cleanly, exit 0, once it has been idle for ``idle_exit_s``. Idle means two things:

- **No platform traffic** for that long. The clock is read from the inbox, the one place every platform's messages
  are committed (on every host, whatever the adapter): the arrival time of its newest row that did not come from
  the gateway itself. So what the gateway does on its own never counts: a cron tick that finds nothing due writes no
  row, a cron run's row, a background task's prompt, a watch's change and an approval deadline's row are the
  gateway's own (``INTERNAL_PLATFORMS``), a start-up replay or a platform's redelivery of an event already stored
  adds no row, and sweeps, health rounds and a background task's completion write none. The clock starts when the gateway
  became ready, so a fresh start is not idle.
- **No work in flight**: no inbox row waiting for or in its turn, no reply still to be delivered. Work never moves
  the clock (it is not traffic); it only holds the exit until it is done, so a gateway idle past its bound stops as
  soon as its last reply is delivered.

What survives: everything is in storage already; the exit is the graceful shutdown (intake stopped, every actor
flushed), so a kill -9 during it loses nothing either. Only platforms that call a server of ours can start the
gateway again; the configuration check refuses the others (actors/adapters/on_demand.py).

``IdleClock`` is the pure rule (tested without a daemon); ``IdleExit`` reads the facts from storage for the
launcher's wait loop, on the launcher's thread, at most every ``check_interval`` seconds.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from actors.sessions.approval_flow import EXPIRY_PLATFORM
from storage import Store, StorageError
from storage.cron import CRON_PLATFORM
from storage.tasks import TASK_PLATFORM
from storage.watches import WATCH_PLATFORM

log = logging.getLogger("gateway.launcher")

# Inbox rows the gateway writes for itself: not traffic (a background task's prompt is the chat's /bg, counted once).
INTERNAL_PLATFORMS = (CRON_PLATFORM, EXPIRY_PLATFORM, TASK_PLATFORM, WATCH_PLATFORM)


@dataclass(frozen=True)
class Activity:
    """What storage says: when the newest platform message arrived (None: never), and whether work is in flight."""
    last_traffic: Optional[float]
    busy: bool


@dataclass(frozen=True)
class IdleClock:
    """The rule, on the wall clock (inbox rows carry wall-clock arrival times). ``started_at``: when the gateway
    became ready. ``idle_exit_s`` 0: never idle."""
    idle_exit_s: float
    started_at: float

    def idle_for(self, activity: Activity, now: float) -> float:
        """Seconds since the last platform traffic, or since the start if later."""
        return now - max(self.started_at, activity.last_traffic or 0.0)

    def due(self, activity: Activity, now: float) -> bool:
        return self.idle_exit_s > 0 and not activity.busy and self.idle_for(activity, now) >= self.idle_exit_s


def check_interval(idle_exit_s: float) -> float:
    """How often the launcher reads the facts: a tenth of the bound, between half a second and ten seconds, so the
    exit comes at most that late and an idle gateway costs one small read per interval."""
    return min(10.0, max(0.5, idle_exit_s / 10))


async def read_activity(path: Path, durability: str) -> Activity:
    async with await Store.open(path, durability) as store:
        last = await store.inbox.newest_arrival(INTERNAL_PLATFORMS)
        busy = await store.inbox.any_pending() or await store.ledger.any_open()
        return Activity(last, busy)


class IdleExit:
    """The launcher's side: ``due()`` is True once the gateway has been idle for ``idle_exit_s`` (logged once)."""

    def __init__(self, config: dict, store_path: Path):
        self.clock = IdleClock(float(config["gateway"]["idle_exit_s"]), time.time())
        self.interval = check_interval(self.clock.idle_exit_s)
        self.path, self.durability = store_path, config["storage"]["durability"]
        self.next_check = time.monotonic() + self.interval

    @property
    def enabled(self) -> bool:
        return self.clock.idle_exit_s > 0

    def due(self) -> bool:
        if not self.enabled or time.monotonic() < self.next_check:
            return False
        self.next_check = time.monotonic() + self.interval
        try:
            activity = asyncio.run(read_activity(self.path, self.durability))
        except StorageError as exc:   # unreadable now: not idle for sure; the next check reads again
            log.warning("idle exit: storage unreadable (%s); checking again in %.1fs", exc, self.interval)
            return False
        if not self.clock.due(activity, time.time()):
            return False
        log.info("idle for %.0fs with no work in flight ([gateway] idle_exit_s = %g): stopping",
                 self.clock.idle_for(activity, time.time()), self.clock.idle_exit_s)
        return True
