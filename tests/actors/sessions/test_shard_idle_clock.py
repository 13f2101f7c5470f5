"""The shard's idle clock (actors/sessions/shard.py): a doorbell for the gateway's own row (a scheduled run) is no
activity of the chat: it neither keeps a live session from passivating nor makes a session it starts look busy."""
from __future__ import annotations

import time
from types import SimpleNamespace

from actors.messages import InboxDoorbell
from actors.sessions.shard import SessionShard, session_cell_name


class Cells:
    """The part of the shard's CellHost the doorbell path uses: which cells live, starting one, delivering."""

    def __init__(self):
        self.cells, self.delivered = {}, []

    def start(self, spec):
        self.cells[spec.name] = state = SimpleNamespace(spec=spec)
        return state

    def deliver(self, name, message, sender=None):
        self.delivered.append((name, message))
        return True


def shard(idle_s: float = 600.0) -> SessionShard:
    s = SessionShard()
    s.cells, s.idle_s, s.max_live = Cells(), idle_s, 10
    return s


def test_an_internal_doorbell_leaves_a_live_sessions_idle_clock_alone():
    s = shard()
    s.on_InboxDoorbell(InboxDoorbell("k", 1), None)
    s.last_active["k"] = 1000.0                       # the chat's last message, long ago
    s.on_InboxDoorbell(InboxDoorbell("k", 2, internal=True), None)
    assert s.last_active["k"] == 1000.0, "a scheduled run is not the chat's activity"
    s.on_InboxDoorbell(InboxDoorbell("k", 3), None)
    assert s.last_active["k"] > 1000.0, "a user's message is"
    assert [m.seq for _n, m in s.cells.delivered] == [1, 2, 3], "every doorbell still rings the session"


def test_a_session_started_for_a_scheduled_run_counts_as_idle_already():
    s = shard(idle_s=600.0)
    before = time.time()
    s.on_InboxDoorbell(InboxDoorbell("cron-only", 1, internal=True), None)
    assert session_cell_name("cron-only") in s.cells.cells
    assert s.last_active["cron-only"] <= before - 600.0 + 1.0, "the next idle scan passivates it after its turn"
    s.on_InboxDoorbell(InboxDoorbell("user", 1), None)
    assert s.last_active["user"] >= before
