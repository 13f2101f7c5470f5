"""The metrics actor's view of adapter connections: of one reporter's reports the newest counts, whatever order
Thespian delivers them in; a new incarnation of the adapter starts its count afresh."""
from __future__ import annotations

from actors.messages import AdapterConnection
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
