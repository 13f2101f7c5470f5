"""The ticker: housekeeping on a timer (every ``interval_s``, 60 s by default).

State: the number of ticks so far and when the last one ran; the admin views show them. Retention runs on the
sweeper's own timer, not here. It holds no work of its own: killing it at any moment loses nothing.
"""
from __future__ import annotations

import time

from supervision.actor import GatewayActor

DEFAULT_INTERVAL_S = 60.0


class Ticker(GatewayActor):
    def __init__(self):
        super().__init__()
        self.ticks = 0
        self.last_tick = 0.0

    def on_start(self, args) -> None:
        self.interval = (args or {}).get("interval_s", DEFAULT_INTERVAL_S) if isinstance(args, dict) \
            else DEFAULT_INTERVAL_S
        self.after(self.interval, "tick")

    def on_timer_tick(self, _data) -> None:
        self.ticks += 1
        self.last_tick = time.time()
        self.after(self.interval, "tick")
