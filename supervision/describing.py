"""How a supervisor answers DescribeTree: it asks every child to describe itself and answers with the whole subtree
once all have answered or the time is up. Part of the supervisor behaviour (supervisor.py), kept apart for length.

Rules that keep the admin views and the drain honest:
* a child that has not answered the previous question is not asked again until SILENT_AFTER_S have passed
  (messages to a hung actor pile up in the transport, and past Thespian's pending-transmit limit they would
  throttle the supervisor too); then it is, because a question or an answer can be lost on the way, and a child
  never asked again would stay "unresponsive" for as long as it lives;
* a child not asked now because an overlapping walk still waits for it is shown with its subtree as it last
  answered (without addresses: those nodes may be gone), not as a stub without children;
* a live child that has not answered this walk counts as holding work: silence is never taken for idleness;
* a child is shown as unresponsive only after SILENT_AFTER_S without an answer: a late answer is not a hang.
"""
from __future__ import annotations

import time
from dataclasses import replace

from supervision.messages import DescribeTree, TreeNode, TreeReply
from supervision.spec import ChildStatus

DESCRIBE_TIMEOUT_S = 2.0
# A child that has not answered for this long is shown as unresponsive; before that it is only slow, and shown as it
# last answered. A supervisor of hundreds of sessions on a saturated machine answers a walk seconds late, and
# "unresponsive" counts as failed (readiness, the chaos suite's G8 check); whether an actor is hung is the
# watchdog's ping to judge, not the tree walk.
SILENT_AFTER_S = 10.0


class DescribesSubtree:
    """Mixin for Supervisor: needs ``children`` (name -> ChildState), ``order``, ``child_by_address``, ``after``,
    ``send`` and ``describe``."""

    def on_DescribeTree(self, message: DescribeTree, sender) -> None:
        self.describe_subtree(lambda node: self.send(sender, TreeReply(message.token, node)), message.within_s)

    def describe_subtree(self, then, within_s: float = DESCRIBE_TIMEOUT_S) -> None:
        """Ask every child to describe itself, then call ``then(node)`` with this whole subtree."""
        children_within = within_s * 0.6
        token, now = next(self._tokens), time.time()
        alive = [c for c in self.children.values() if c.address is not None]
        # A child that has not answered the previous question is asked again only once it is overdue: messages to a
        # hung actor pile up in our transport, and past Thespian's pending-transmit limit they would throttle this
        # supervisor too; but a lost question (or answer) must not silence a live child for good.
        waiting = {c.spec.name for c in alive if not c.asked_at or now - c.last_asked >= SILENT_AFTER_S}
        self._describe[token] = {"then": then, "waiting": waiting, "nodes": {}, "within": children_within}
        for name in waiting:
            child = self.children[name]
            child.asked_at, child.last_asked = child.asked_at or now, now
            self.send(child.address, DescribeTree(token, children_within))
        if waiting:
            self.after(children_within, "describe", token)
        else:
            self._answer_describe(token)

    def on_TreeReply(self, message: TreeReply, sender) -> None:
        pending = self._describe.get(message.token)
        child = self.child_by_address(sender)
        if child is not None:
            child.asked_at, child.last_node = 0.0, message.node
        if pending is None or child is None:
            return
        pending["nodes"][child.spec.name] = message.node
        child.last_pending = sum(n.pending for n in _walk(message.node))
        pending["waiting"].discard(child.spec.name)
        if not pending["waiting"]:
            self._answer_describe(message.token)

    def on_timer_describe(self, token: int) -> None:
        if token in self._describe:
            self._answer_describe(token)

    def _answer_describe(self, token: int) -> None:
        pending = self._describe.pop(token)
        nodes = []
        for name in self.order:
            child = self.children[name]
            node = pending["nodes"].get(name)
            if node is None:
                silent = child.address is not None and child.asked_at and \
                    time.time() - child.asked_at >= max(pending["within"], SILENT_AFTER_S)
                ref = child.seen_as if child.seen_as is not None else child.address
                node = TreeNode(kind=child.spec.kind_name, name=name, pid=child.pid,
                                address=str(ref) if ref is not None else "",
                                state="unresponsive" if silent else child.status.value,
                                started_at=child.started_at, ref=ref, pending=child.last_pending)
                # Slow to answer, or not asked now because an overlapping walk still waits for it: its subtree as
                # it last answered is truer than a stub without children (sessions would seem to vanish).
                if not silent and child.last_node is not None and child.last_node.pid == child.pid:
                    node = _replace(child.last_node, state=node.state if child.status is not ChildStatus.RUNNING else
                                    child.last_node.state, children=_without_refs(child.last_node.children))
                if ref is not None:
                    # A live child that has not answered this walk is counted as holding work until it says
                    # otherwise: a drain must never take silence (or an old answer) for idleness.
                    node = _replace(node, pending=max(node.pending, 1))
            elif child.status is not ChildStatus.RUNNING:
                node = _replace(node, state=child.status.value)   # a plain str on the wire, as before
            nodes.append(_replace(node, restarts=child.restarts, last_exit=child.last_exit,
                                  started_at=child.started_at or node.started_at))
        pending["then"](_replace(self.describe(), children=tuple(nodes)))


def _walk(node: TreeNode):
    yield node
    for child in node.children:
        yield from _walk(child)


def _without_refs(nodes: tuple) -> tuple:
    """Nodes of an earlier answer: shown and counted, but never pinged, stopped or flushed (they may be gone)."""
    return tuple(_replace(n, ref=None, children=_without_refs(n.children)) for n in nodes)


def _replace(node: TreeNode, **changes) -> TreeNode:
    return replace(node, **changes)
