"""The root's directory follows the newest announcement of each group (adapters, session shards), whatever order
Thespian delivers them in.

Two AddressesChanged from one supervisor can cross on their way to the root (a second connection overtakes the
first). Taking the last one to arrive published a directory without the adapters that came up in between, and
every reply to them waited for an address that never came: the fuzz daemon's "stops answering" in the full suite.
"""
from __future__ import annotations

from actors.root import Root
from supervision.messages import AddressesChanged, ChildReady
from supervision.spec import ChildSpec, ChildStatus
from supervision.supervisor import ChildState


def announcements():
    first = AddressesChanged("adapters", (("cli", "a1"), ("fake", "a2")), incarnation=100.0, seq=2)
    last = AddressesChanged("adapters", (("cli", "a1"), ("fake", "a2"), ("web", "a3")), incarnation=100.0, seq=3)
    return first, last


def test_an_announcement_overtaken_by_a_newer_one_is_ignored():
    first, last = announcements()
    root = Root()
    root.on_AddressesChanged(last, None)
    root.on_AddressesChanged(first, None)          # arrives late
    assert root.directory.adapter("web") == "a3" and root.directory.adapters == last.addresses


def test_in_order_announcements_are_all_taken():
    first, last = announcements()
    root = Root()
    root.on_AddressesChanged(first, None)
    assert root.directory.adapter("web") is None
    root.on_AddressesChanged(last, None)
    assert root.directory.adapter("web") == "a3"


def test_a_restarted_supervisor_counts_afresh():
    _, last = announcements()
    restarted = AddressesChanged("adapters", (("cli", "b1"),), incarnation=200.0, seq=1)
    assert restarted.is_newer_than(last) and not last.is_newer_than(restarted)
    root = Root()
    root.on_AddressesChanged(last, None)
    root.on_AddressesChanged(restarted, None)
    assert root.directory.adapters == (("cli", "b1"),)


def test_groups_are_kept_apart_and_a_shard_not_running_is_a_gap_in_the_directory():
    root = Root()
    root.on_AddressesChanged(AddressesChanged("shards", (("shard:0", "s0"), ("shard:1", None)), 100.0, 5), None)
    root.on_AddressesChanged(AddressesChanged("adapters", (("fake", "a1"), ("web", None)), 50.0, 1), None)
    assert root.directory.shards == (("shard:0", "s0"), ("shard:1", None))
    assert root.directory.adapters == (("fake", "a1"),), "an adapter not running is left out"
    name, address = root.directory.shard_for("any key")
    assert address == {"shard:0": "s0", "shard:1": None}[name]


def test_the_supervisor_announces_the_address_a_child_spoke_from_not_createactors_stand_in():
    from actors.adapters.supervisor import AdapterSupervisor

    supervisor, sent = AdapterSupervisor(), []
    supervisor.send = lambda to, message: sent.append(message)
    supervisor.parent = "the root"
    supervisor.children = {"web": ChildState(ChildSpec("web", "actors.adapters.webchat.adapter.WebChatAdapter"),
                                             address="local stand-in", status=ChildStatus.STARTING)}
    # The child's first message arrives before Thespian has tied the stand-in to the child's real address.
    supervisor.on_ChildReady(ChildReady("web", 4242), "the child's real address")
    [announced] = [m for m in sent if isinstance(m, AddressesChanged)]
    assert announced.group == "adapters" and announced.addresses == (("web", "the child's real address"),)
