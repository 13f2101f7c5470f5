"""The delivery sweeper: finishes obligations a crash left behind (DESIGN.md §2.6).

State: the obligations it knows to be pending (shown as its pending work in the admin views).
It re-sends recoverable obligations at start and whenever an adapter (re)connects.
"""
from __future__ import annotations

from supervision.actor import GatewayActor


class DeliverySweeper(GatewayActor):
    def __init__(self):
        super().__init__()
        self.pending = 0

    def pending_work(self) -> int:
        return self.pending
