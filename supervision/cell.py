"""The cell: a lightweight actor hosted by a process actor (a session shard) instead of owning an OS process.

A cell is written exactly like a process actor (``on_<Message>`` handlers, ``send``, ``after``, ``stop_self``,
``on_start``/``on_stop``, ``describe``: supervision/behaviour.py); what differs is only where it runs
(docs/design.md §1.1).
Its host (``supervision/cell_host.py``) gives it its own mailbox and runs its handlers one message at a time, on the
host actor's own thread, interleaved with the other cells' messages; so a cell's handlers are serial without locks,
and a cell must never block (long work goes to the shared loop through ``self.bridge``).

A cell's address is its host plus its name and incarnation (``CellAddress``): a message sent to an earlier
incarnation is dropped, as Thespian drops mail to a dead actor. Messages to a cell of the same host never leave the
process; everything else goes out through the host actor.

Cells of one host share one loop, so they share no ambient state: no module-level or ContextVar identity (a task
created by one cell would inherit it); everything a cell's async work needs is passed to it explicitly, and what it
posts comes back to that cell alone (``CellBridge``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from supervision.messages import TreeNode
from supervision.behaviour import Behaviour


@dataclass(frozen=True)
class CellAddress:
    host: str         # the host's name (a cell reaches only cells of its own host, in its own process)
    name: str         # "" is the host itself, in its role of the cells' supervisor
    epoch: int = 0    # the cell's incarnation

    def __str__(self) -> str:
        return f"{self.host}/{self.name}#{self.epoch}"


@dataclass(frozen=True)
class BridgeItem:
    """An item a cell's async work posted, on its way back to that cell."""
    name: str
    epoch: int
    item: Any


class CellBridge:
    """The host's async bridge as one cell sees it: the same ``loop``, ``submit`` and ``call``; what the cell posts
    is tagged with its address, so the host hands it back to this cell and to no other (nor to a later
    incarnation)."""

    def __init__(self, bridge, address: CellAddress):
        self._bridge, self._address = bridge, address
        self.loop = bridge.loop

    def submit(self, coro, tag: Any = None):
        return self._bridge.submit(coro, None if tag is None else BridgeItem(self._address.name,
                                                                             self._address.epoch, tag))

    def call(self, fn, *args) -> None:
        self._bridge.call(fn, *args)

    def post(self, item: Any) -> None:
        self._bridge.post(BridgeItem(self._address.name, self._address.epoch, item))


class Cell(Behaviour):
    """Set by the host before Started: ``host``, ``myAddress`` and ``bridge`` (when the host has one)."""

    def __init__(self):
        super().__init__()
        self.host = None
        self.myAddress: CellAddress | None = None

    def send(self, address, message) -> None:
        self.host.send(self, address, message)

    def after(self, seconds: float, tag: str, data=None) -> None:
        self.host.after(self, seconds, tag, data)

    def stop_self(self, clean: bool = True) -> None:
        """Stop once the running handler returns. A clean stop is not restarted (transient cells)."""
        if self._exiting:
            return
        self._exiting = True
        self.host.stopping(self, clean)

    def describe(self) -> TreeNode:
        node = super().describe()
        # A cell is pinged, stopped and flushed through its host, never on its own: it has no Thespian address.
        return TreeNode(kind=node.kind, name=node.name, pid=node.pid, address=str(self.myAddress),
                        state=node.state, started_at=node.started_at, pending=node.pending, ref=None)
