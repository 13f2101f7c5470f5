"""The metrics actor's view of adapter connections: of one reporter's reports the newest counts, whatever order
Thespian delivers them in; a new incarnation of the adapter starts its count afresh."""
from __future__ import annotations

from actors.messages import AdapterConnection, TurnFinished
from actors.metrics import Metrics


def test_a_report_overtaken_by_a_newer_one_of_the_same_adapter_is_ignored():
    metrics = Metrics()
    metrics.on_AdapterConnection(AdapterConnection("fake", True, seq=3), "adapter@1")
    metrics.on_AdapterConnection(AdapterConnection("fake", False, seq=2), "adapter@1")   # sent earlier, came later
    assert metrics.connections["fake"][:2] == (True, "adapter@1")


def test_a_restarted_adapter_counts_afresh():
    metrics = Metrics()
    metrics.on_AdapterConnection(AdapterConnection("fake", True, seq=9), "adapter@1")
    metrics.on_AdapterConnection(AdapterConnection("fake", False, seq=1), "adapter@2")
    assert metrics.connections["fake"][:2] == (False, "adapter@2")


def test_a_turn_for_a_scheduled_run_is_counted_apart_from_user_turns(tmp_path):
    """Internal events (a scheduled run's prompt) are not user traffic: neither the turns counter nor the latency
    histogram of users' messages sees them."""
    metrics = Metrics()
    metrics.on_TurnFinished(TurnFinished("default", "fake", "done", 1.5), None)
    metrics.on_TurnFinished(TurnFinished("default", "fake", "done", 9.0, internal=True), None)
    assert metrics.turns[("default", "fake", "done")] == 1
    assert metrics.turn_seconds[("default", "fake")].count == 1
    assert metrics.internal_turns[("default", "fake", "done")] == 1
    metrics.state_dir, metrics.heartbeat_max_age = tmp_path, 10.0   # what on_start sets: /healthz's inputs
    text = metrics.exposition()
    assert 'gateway_internal_turns_total{outcome="done",platform="fake",profile="default"} 1.0' in text
    assert 'gateway_turns_total{outcome="done",platform="fake",profile="default"} 1.0' in text
