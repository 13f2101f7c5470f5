"""Forgetting the address of a child that is gone, which Thespian never does.

Thespian 4.0.1's ``ActorAddressManager`` keeps, for every ``createActor`` an actor ever made, the child's real
address in a list that only grows (``_managed``: the index is the local address's instance number, so entries are
never removed). That is about 600 bytes per child started. A SessionSupervisor starts a Session per chat that comes
back after passivation and a StreamConsumer per reply: thousands a day. Worse, every one of them is forked from it,
so each new session process starts with the whole list in its copy of the heap.

When a child is gone (its exit notice handled, or its process found dead), its slot is set to None: the list keeps
its length, so every other local address still finds its own slot, and the freed address object (a reference
cycle through its bound comparison methods) goes at the next garbage collection.

Safe because the supervisor no longer holds or hands out that child's address (``ChildState.address`` is cleared at
the same moment), Thespian has already handled the exit notice when the actor sees it, and a late, synthesised
notice for the same child only compares unequal to everything (``compareAddressEq`` treats an empty slot as "not
this address"). If Thespian's internals change shape, this does nothing (and the start-up self-test says so).

Thespian internals relied on (checked against Thespian 4.0.1: runtime/versions.py): an actor's ``_myRef`` (its
``ActorManager``, which sets it in ``_createInstance``) and that one's ``_addrManager`` (set in
``systemCommonBase.__init__``: a ``thespian.system.addressManager.ActorAddressManager``) with its list
``_managed`` and its ``_thisActorAddr``; ``ActorLocalAddress`` (its ``generatingActor`` and
``addressInstanceNum``), the ``addressDetails`` of a local address createActor returns.
"""
from __future__ import annotations

from typing import Any

from runtime.shapes import module, need

try:
    from thespian.system.addressManager import ActorLocalAddress
except ImportError:  # pragma: no cover - a Thespian without this class has no such list either
    ActorLocalAddress = None


def forget_child_address(actor: Any, address: Any) -> bool:
    """Empty the address manager's slot for ``address`` (a local address ``actor`` got from createActor). True if a
    slot was emptied."""
    details = getattr(address, "addressDetails", None)
    manager = getattr(getattr(actor, "_myRef", None), "_addrManager", None)
    managed = getattr(manager, "_managed", None)
    if ActorLocalAddress is None or not isinstance(details, ActorLocalAddress) or not isinstance(managed, list):
        return False
    index = details.addressInstanceNum
    if details.generatingActor != getattr(manager, "_thisActorAddr", None) or not 0 <= index < len(managed):
        return False
    managed[index] = None
    return True


def addresses_held(actor: Any) -> int:
    """How many child addresses the address manager still holds (for tests and the soak)."""
    managed = getattr(getattr(getattr(actor, "_myRef", None), "_addrManager", None), "_managed", None)
    return sum(1 for entry in managed if entry is not None) if isinstance(managed, list) else 0


def missing() -> list[str]:
    problems: list[str] = []
    addresses = module("thespian.system.addressManager", problems)
    local = need(addresses, "thespian.system.addressManager", "ActorLocalAddress", problems, kind=type)
    need(local, "ActorLocalAddress", "__init__", problems, uses=("generatingActor", "addressInstanceNum"))
    manager = need(addresses, "thespian.system.addressManager", "ActorAddressManager", problems, kind=type)
    need(manager, "ActorAddressManager", "__init__", problems, uses=("_managed", "_thisActorAddr"))
    common = module("thespian.system.systemCommon", problems)
    system = need(common, "thespian.system.systemCommon", "systemCommonBase", problems, kind=type)
    need(system, "systemCommonBase", "__init__", problems, uses=("_addrManager",))
    actors = module("thespian.system.actorManager", problems)
    actor_manager = need(actors, "thespian.system.actorManager", "ActorManager", problems, kind=type)
    need(actor_manager, "ActorManager", "_createInstance", problems, uses=("_myRef",))
    return problems
