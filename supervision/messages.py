"""The supervision protocol: what every actor and cell understands, whatever its kind.

Lifecycle between a parent and its child (Started, ChildReady, CrashReport, ChildStopping, RestartChild,
SupervisorGaveUp), health and inspection (Ping, Pong, DescribeTree, TreeNode, TreeReply), the directory of
well-known addresses the root hands down, and the drain steps every actor takes (StopIntake, Flush). The gateway's
own messages (turns, platform operations, drain reports) are in ``actors/messages/``; the rules for both are
the same: small frozen dataclasses of plain values, addresses only in fields that say so.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Optional

from common.host_map import place_named, place_of


# ------------------------------------------------------------------------------------- supervision: parent <-> child

@dataclass(frozen=True)
class Started:
    """Parent -> new child, first message: its name in the tree, its arguments and the gateway configuration.
    ``after_outside_cause``: the previous incarnation stopped on a cause outside the gateway (storage unavailable).
    The configuration holds the operator's secrets (tokens, webhook secrets), so it is left out of the message's
    repr: whatever logs a message (Thespian, on a message it could not deliver) never writes them."""
    name: str
    kind: str
    args: Any = None
    config: Any = field(default=None, repr=False)
    after_outside_cause: bool = False


@dataclass(frozen=True)
class ConfigChanged:
    """Parent -> child, down the whole tree: the configuration a reload landed (actors/config_reload.py). Each actor
    takes it when its ``_generation`` is newer than the one it holds (Thespian may deliver two reloads out of
    order), keeps it for what it reads from now on, and passes it to its children; a supervisor starts every later
    child on it. It holds the operator's secrets: left out of the repr, as in Started."""
    config: Any = field(default=None, repr=False)


@dataclass(frozen=True)
class ChildReady:
    """Child -> parent once it has taken its Started: the admin views show its pid from here on."""
    name: str
    pid: int


@dataclass(frozen=True)
class CrashReport:
    """Child -> parent just before a child exits because a handler raised (let it crash). ``outside_cause``: the
    handler failed on something outside the gateway that a later restart will get past (storage unavailable)."""
    name: str
    reason: str
    outside_cause: bool = False


@dataclass(frozen=True)
class ChildStopping:
    """Child -> parent: it is stopping on its own and cleanly (a transient child is then not restarted)."""
    name: str


@dataclass(frozen=True)
class RestartChild:
    """Anyone (the watchdog, an operator) -> supervisor: kill this child and let the restart policy act. With a
    pid, only that incarnation: a newer one (the child was restarted meanwhile) is left alone."""
    name: str
    reason: str
    pid: int = 0


@dataclass(frozen=True)
class SupervisorGaveUp:
    """A supervisor exceeded its restart intensity and is stopping; its parent decides (escalation). From the root,
    this reaches the launcher, which exits non-zero."""
    name: str
    reason: str


# ------------------------------------------------------------------------------------- health and inspection

@dataclass(frozen=True)
class Ping:
    nonce: int


@dataclass(frozen=True)
class Pong:
    nonce: int
    name: str
    pid: int


@dataclass(frozen=True)
class DescribeTree:
    """Ask an actor to describe itself and, for supervisors, its whole subtree, within ``within_s`` seconds (a
    supervisor gives its own children less, so that its answer always beats its parent's deadline)."""
    token: int
    within_s: float = 2.0


@dataclass(frozen=True)
class TreeNode:
    kind: str
    name: str
    pid: int
    address: str
    state: str                     # running | starting | restarting | unresponsive | stopped | failed
    started_at: float
    restarts: int = 0
    last_exit: Optional[str] = None
    pending: int = 0
    children: tuple = ()
    ref: Any = None                # the actor's address, so the watchdog can ping it and a supervisor restart it
    facts: tuple = ()              # ((name, value), ...) what this kind of actor adds (a shard: cells, loop lag)


@dataclass(frozen=True)
class TreeReply:
    token: int
    node: TreeNode


@dataclass(frozen=True)
class Fault:
    """Fault injection for chaos tests, honoured only when the config enables [debug] fault_injection."""
    action: str                    # crash | hang | exit | loop_exit | loop_hang
    seconds: float = 0.0
    target: str = ""               # a cell of the shard it is sent to (e.g. "session:<key>"): that cell, not the shard


# ------------------------------------------------------------------------ directory, drain steps, restart facts

@dataclass(frozen=True)
class DirectoryWanted:
    """Any actor or cell -> its parent, on up to the root: the directory held here lacks an address it has waited for
    too long (a Directory lost on its way down, or the actor named is still not running). The root answers with its
    directory, which each supervisor on the way forwards to its children again."""
    why: str = ""


@dataclass(frozen=True)
class Directory:
    """Root -> every actor (each supervisor forwards it to its children): where the well-known actors are now.
    Sent again whenever one of them is restarted, so nobody keeps a dead address for long."""
    version: int
    sessions: Any = None
    sweeper: Any = None
    adapters: tuple = ()           # ((name, address), ...)
    metrics: Any = None            # the metrics actor (None when [metrics] enabled = false)
    shards: tuple = ()             # ((child name, address or None while not running), ...): every shard of every host
    sweepers: tuple = ()           # ((child name, address or None), ...): the delivery sweeper of each worker host

    def adapter(self, name: str):
        return dict(self.adapters).get(name)

    def shard_for(self, session_key: str) -> tuple[str, Any]:
        """The child name of the shard that hosts ``session_key`` (common/host_map.py: ``shard:<i>`` on the leader,
        ``shard:<host>/<i>`` on a worker) and its address (None: not known now; ``("", None)``: no shards announced
        yet)."""
        place, address = self.place_for(session_key)
        return (place.child_name if place is not None else ""), address

    def place_for(self, session_key: str) -> tuple[Any, Any]:
        """The ShardPlace of the key's shard and its address; (None, None) while no shards are announced."""
        if not self.shards:
            return None, None
        places, addresses = self._routes
        place = place_of(session_key, places)
        return place, addresses[place.child_name]

    @functools.cached_property
    def _routes(self) -> tuple[list, dict]:
        # Read once per Directory (it is immutable); cached_property writes the instance dict, frozen or not.
        return [place_named(name) for name, _address in self.shards], dict(self.shards)


@dataclass(frozen=True)
class AddressesChanged:
    """Supervisor -> its parent: where its children are now that other processes address directly (a group of the
    Directory: "adapters", "shards"), each as ``(name, address)`` with None while it is not running. The address is
    the one the child's own ChildReady came from (``seen_as``), never the one createActor returned: that is a
    stand-in only the supervisor can use until Thespian learns the real address, and handed to other processes it
    reaches nobody. Thespian may deliver two of these out of order (a second connection overtakes the first), so
    each carries its sender's incarnation (its start time) and a count: the parent keeps only the newest."""
    group: str
    addresses: tuple
    incarnation: float = 0.0
    seq: int = 0

    def is_newer_than(self, held: Optional["AddressesChanged"]) -> bool:
        return held is None or (self.incarnation, self.seq) > (held.incarnation, held.seq)


@dataclass(frozen=True)
class Batch:
    """Several messages for one actor as one Thespian message (supervision/batching.py), in the order they were
    sent; the receiver handles each as if it had come alone (Behaviour.handle)."""
    items: tuple


@dataclass(frozen=True)
class StopIntake:
    """Drain, first step: stop taking new platform input."""


@dataclass(frozen=True)
class Flush:
    """Persist what is buffered (stream consumers, ledger) and answer Flushed."""
    token: int


@dataclass(frozen=True)
class Flushed:
    token: int
    count: int = 0


@dataclass(frozen=True)
class ActorRestarted:
    """Supervisor -> metrics: it restarted a child (counted once per restart, by the supervisor that decided it)."""
    kind: str
    reason: str = ""
