"""How late an actor's asyncio loop runs, measured from the loop itself, and what it is doing when it is stuck.

A shard's cells share one loop (agent streams, storage): one coroutine that blocks it stalls every conversation of
the shard while the actor's own thread still answers pings. So the probe here wakes every ``interval_s`` on the loop
and records how late it woke (the loop's lag) and when it last ran. The actor reads those from its own thread:
``lag_ms`` for the admin views, ``stalled_s`` to stop answering the watchdog's pings (which then restarts the
shard, whose sessions recover from durable state), and ``loop_stack`` to log what the loop was running.
"""
from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback

PROBE_INTERVAL_S = 0.5


class LoopMonitor:
    def __init__(self, loop: asyncio.AbstractEventLoop, interval_s: float = PROBE_INTERVAL_S):
        self.loop, self.interval_s = loop, interval_s
        self.last_tick = time.monotonic()
        self.lag_ms = 0.0          # how late the latest probe woke
        self.max_lag_ms = 0.0      # the worst since the last ``take_max``
        self._thread_id: int | None = None
        self.stall_logged = False
        asyncio.run_coroutine_threadsafe(self._probe(), loop)

    async def _probe(self) -> None:
        self._thread_id = threading.get_ident()
        while True:
            expected = time.monotonic() + self.interval_s
            await asyncio.sleep(self.interval_s)
            now = time.monotonic()
            self.lag_ms = max(0.0, (now - expected) * 1000)
            self.max_lag_ms = max(self.max_lag_ms, self.lag_ms)
            self.last_tick = now

    def stalled_s(self) -> float:
        """How long the loop has not run the probe beyond its interval: 0 while it keeps up."""
        return max(0.0, time.monotonic() - self.last_tick - self.interval_s)

    def stuck(self, deadline_s: float, log, name: str) -> bool:
        """Whether the loop has not run for longer than ``deadline_s`` (its owner then leaves pings unanswered, so
        the watchdog restarts it); logged once per stall, with what the loop runs."""
        stalled = self.stalled_s()
        stuck = stalled > deadline_s
        if stuck and not self.stall_logged:
            log.error("%s: its loop has not run for %.1fs; not answering pings. The loop runs:\n%s", name, stalled,
                      self.loop_stack())
        self.stall_logged = stuck
        return stuck

    def take_max(self) -> float:
        worst, self.max_lag_ms = max(self.max_lag_ms, self.stalled_s() * 1000), self.lag_ms
        return worst

    def loop_stack(self) -> str:
        """What the loop's thread is running now (to log when it is stuck)."""
        frame = sys._current_frames().get(self._thread_id) if self._thread_id is not None else None
        return "".join(traceback.format_stack(frame)) if frame is not None else "(the loop's thread is not known)"
