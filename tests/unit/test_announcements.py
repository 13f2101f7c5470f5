"""The root's directory follows the newest adapter announcement, whatever order Thespian delivers them in.

Two AdaptersChanged from the adapter supervisor can cross on their way to the root (a second connection overtakes
the first). Taking the last one to arrive published a directory without the adapters that came up in between, and
every reply to them waited for an address that never came: the fuzz daemon's "stops answering" in the full suite.
"""
from __future__ import annotations

from actors.messages import AdaptersChanged
from actors.root import Root


def announcements():
    first = AdaptersChanged((("cli", "a1"), ("fake", "a2")), incarnation=100.0, seq=2)
    last = AdaptersChanged((("cli", "a1"), ("fake", "a2"), ("web", "a3")), incarnation=100.0, seq=3)
    return first, last


def test_an_announcement_overtaken_by_a_newer_one_is_ignored():
    first, last = announcements()
    root = Root()
    root.on_AdaptersChanged(last, None)
    root.on_AdaptersChanged(first, None)          # arrives late
    assert root.directory.adapter("web") == "a3" and root.adapters == last.adapters


def test_in_order_announcements_are_all_taken():
    first, last = announcements()
    root = Root()
    root.on_AdaptersChanged(first, None)
    assert root.directory.adapter("web") is None
    root.on_AdaptersChanged(last, None)
    assert root.directory.adapter("web") == "a3"


def test_a_restarted_adapter_supervisor_counts_afresh():
    _, last = announcements()
    restarted = AdaptersChanged((("cli", "b1"),), incarnation=200.0, seq=1)
    assert restarted.is_newer_than(last) and not last.is_newer_than(restarted)
    root = Root()
    root.on_AdaptersChanged(last, None)
    root.on_AdaptersChanged(restarted, None)
    assert root.adapters == (("cli", "b1"),)


def test_the_supervisor_announces_the_address_a_child_spoke_from_not_createactors_stand_in():
    from actors.adapters.supervisor import AdapterSupervisor
    from supervision.messages import ChildReady
    from supervision.spec import ChildSpec
    from supervision.supervisor import ChildState

    supervisor, sent = AdapterSupervisor(), []
    supervisor.send = lambda to, message: sent.append(message)
    supervisor.parent = "the root"
    supervisor.children = {"web": ChildState(ChildSpec("web", "actors.adapters.webchat.adapter.WebChatAdapter"),
                                             address="local stand-in", status="starting")}
    # The child's first message arrives before Thespian has tied the stand-in to the child's real address.
    supervisor.on_ChildReady(ChildReady("web", 4242), "the child's real address")
    [announced] = [m for m in sent if isinstance(m, AdaptersChanged)]
    assert announced.adapters == (("web", "the child's real address"),)
