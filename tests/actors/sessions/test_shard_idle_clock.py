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


def test_rows_from_another_host_are_committed_here_answered_and_rung_once(tmp_path):
    """StoreInbound (actors/sessions/shard.py): committed in this shard's own inbox before the answer, a second
    forward of the same rows adds nothing and rings nobody, and each session is rung once for its rows."""
    from actors.messages import InboundStored, StoreInbound

    s = shard()
    s.name, s.config = "shard:w1/0", {"gateway": {"state_dir": str(tmp_path)}, "storage": {"durability": "normal"}}
    sent = []
    s.send = lambda to, message: sent.append((to, message))
    s.open_store()
    try:
        rows = ((11, "a", "fake", "m1", {"text": "one"}), (12, "a", "fake", "m2", {"text": "two"}),
                (13, "b", "fake", "m3", {"text": "three"}))
        s.on_StoreInbound(StoreInbound(rows), "the adapter")
        assert sent == [("the adapter", InboundStored((11, 12, 13), "shard:w1/0"))]
        stored = s.db(s.store.inbox.rows_in_state("a"))
        assert [r.payload["text"] for r in stored] == ["one", "two"]
        assert [(n, m.seq) for n, m in s.cells.delivered] == [(session_cell_name("a"), stored[1].seq),
                                                              (session_cell_name("b"), stored[1].seq + 1)]
        s.on_StoreInbound(StoreInbound(rows), "the adapter")
        assert sent[-1] == ("the adapter", InboundStored((11, 12, 13), "shard:w1/0")), "answered again"
        assert len(s.db(s.store.inbox.rows_in_state("a"))) == 2 and len(s.cells.delivered) == 2, \
            "a second forward is deduplicated: no second row, no second doorbell"
    finally:
        s.close_store()
