"""The hosts of the convention, as the leader sees them: which members joined, which were lost.

Runs on the leader only, when ``[cluster] enabled`` (docs/distribution.md). Thespian's admin tells an actor that
asked (``notifyOnSystemRegistrationChanges``) of every member that registers and of every one that leaves or is
declared dead (after ``[cluster] member_misses`` check-ins missed, ``member_check_s`` apart); this actor keeps that
list and shows it in ``tree`` and ``status`` (each host one node: its name, role, admin address, since when).

State: the members by admin address (name, role, capabilities, joined or lost and when). A member's state
(``HostState``): RUNNING -> LOST when it leaves or stops checking in; a lost member stays listed (what was placed
there is unavailable until the host returns) until it registers again, as a new RUNNING member.
Messages it takes: ActorSystemConventionUpdate (from the admin), DescribeTree. Messages it sends: none of its own.
What survives kill -9: nothing, and nothing needs to: on its restart the admin sends it one update per member that
is registered at that moment, so the list is whole again at once (a member lost meanwhile is not shown as lost).
"""
from __future__ import annotations

import dataclasses
import enum
import os
import time
from dataclasses import dataclass

from common.cluster import HOST_CAPABILITY, ROLE_CAPABILITY, SHARDS_CAPABILITY, host_name
from supervision.actor import GatewayActor
from supervision.messages import TreeNode

MAX_MEMBERS = 1024   # a bound on what a registering system can make this actor keep


class HostState(enum.StrEnum):   # str-valued: the value is the host node's state in `tree` and `status`, unchanged
    RUNNING = "running"
    LOST = "lost"


@dataclass
class Member:
    name: str
    role: str
    address: str
    shards: bool
    since: float
    state: HostState = HostState.RUNNING


class ConventionHosts(GatewayActor):
    def __init__(self):
        super().__init__()
        self.members: dict[str, Member] = {}

    def on_start(self, args) -> None:
        gateway = self.config.get("gateway", {})
        # The convention's address (what workers join), in the form Thespian prints the workers' admin addresses.
        address = f"ActorAddr-(T|{gateway.get('bind_host')}:{gateway.get('admin_port')})"
        self.leader = Member(host_name(self.config), "leader", address, True, time.time())
        self.notifyOnSystemRegistrationChanges(True)

    def on_ActorSystemConventionUpdate(self, message, sender) -> None:
        address = str(message.remoteAdminAddress)
        caps = message.remoteCapabilities or {}
        known = self.members.get(address)
        if message.remoteAdded:
            if known is None and len(self.members) >= MAX_MEMBERS:
                self._forget_one_lost()
            self.members[address] = Member(str(caps.get(HOST_CAPABILITY, address))[:64],
                                           str(caps.get(ROLE_CAPABILITY, "member"))[:16], address,
                                           bool(caps.get(SHARDS_CAPABILITY)), time.time())
            name = self.members[address].name
            self.log.info("host %s joined the convention (%s)", name, address)
            for other in [a for a, m in self.members.items()
                          if m.name == name and a != address and m.state is HostState.LOST]:
                del self.members[other]   # the same host back at another address: no longer lost
            if any(m.name == name and a != address and m.state is HostState.RUNNING for a, m in self.members.items()) \
                    or name == self.leader.name:
                # Placement goes by name: two hosts of one name would share what is placed there.
                self.log.error("two hosts of the convention are named %s (%s and another): give each its own "
                               "--name", name, address)
        elif known is not None and known.state is not HostState.LOST:
            known.state, known.since = HostState.LOST, time.time()
            self.log.warning("host %s left the convention or stopped checking in (%s)", known.name, address)

    def _forget_one_lost(self) -> None:
        lost = [a for a, m in self.members.items() if m.state is HostState.LOST]
        if lost:
            del self.members[min(lost, key=lambda a: self.members[a].since)]

    def describe(self):
        node = super().describe()
        hosts = tuple(_host_node(m) for m in [self.leader, *sorted(self.members.values(), key=lambda m: m.name)])
        lost = sum(1 for m in self.members.values() if m.state is HostState.LOST)
        return dataclasses.replace(node, children=hosts,
                                   facts=(("hosts", len(hosts)), ("lost", lost)))


def _host_node(member: Member) -> TreeNode:
    # A host is not an actor of this tree: pid 0, no ref; the watchdog pings only nodes with a ref.
    return TreeNode(kind="Host", name=member.name, pid=os.getpid() if member.role == "leader" else 0,
                    address=member.address, state=member.state.value, started_at=member.since,
                    facts=(("role", member.role), ("shards", "yes" if member.shards else "no")))
