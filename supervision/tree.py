"""Pure functions over a described actor tree (``TreeNode``): walking, counting, rendering."""
from __future__ import annotations

import time
from typing import Iterator, Optional

from actors.messages import TreeNode

UP_STATES = ("running", "busy", "draining", "drained")
RESTARTING_STATES = ("starting", "restarting")
FAILED_STATES = ("failed", "unresponsive")


def walk(node: TreeNode, parent: Optional[TreeNode] = None, depth: int = 0) -> Iterator[tuple]:
    """(node, its parent, depth) for every node, parents before children."""
    yield node, parent, depth
    for child in node.children:
        yield from walk(child, node, depth + 1)


def counts(root: TreeNode, without_children_of: tuple = ()) -> dict:
    """Actors by state. ``without_children_of``: kinds whose children are left out (the readiness of the gateway
    is that of its fixed tree; sessions and replies come and go, and restart, as part of normal work)."""
    nodes = list(_pruned(root, without_children_of))
    return {
        "actors": len(nodes),
        "up": sum(n.state in UP_STATES for n in nodes),
        "restarting": sum(n.state in RESTARTING_STATES for n in nodes),
        "failed": sum(n.state in FAILED_STATES for n in nodes),
        "pending": sum(n.pending for n in nodes),
    }


def _pruned(node: TreeNode, prune_below: tuple) -> Iterator[TreeNode]:
    yield node
    if node.kind not in prune_below:
        for child in node.children:
            yield from _pruned(child, prune_below)


def find_kind(root: TreeNode, kind: str) -> list[TreeNode]:
    return [n for n, _, _ in walk(root) if n.kind == kind]


def to_json(node: TreeNode) -> dict:
    return {
        "kind": node.kind, "name": node.name, "pid": node.pid, "address": node.address, "state": node.state,
        "started_at": node.started_at, "uptime_s": round(time.time() - node.started_at, 3) if node.started_at else 0,
        "restarts": node.restarts, "last_exit": node.last_exit, "pending": node.pending,
        "children": [to_json(c) for c in node.children],
    }


def render(node: TreeNode, now: float | None = None) -> str:
    now = now or time.time()
    lines = []
    for n, _parent, depth in walk(node):
        uptime = _duration(now - n.started_at) if n.started_at and n.state == "running" else "-"
        extra = []
        if n.restarts:
            extra.append(f"restarts={n.restarts}")
        if n.pending:
            extra.append(f"pending={n.pending}")
        if n.last_exit:
            extra.append(f"last exit: {n.last_exit}")
        label = n.kind if n.name == n.kind else f"{n.kind} {n.name}"
        lines.append(f"{'  ' * depth}{'└─ ' if depth else ''}{label}  [{n.state}]  pid={n.pid or '-'}  "
                     f"up {uptime}  {n.address}" + (f"  {' '.join(extra)}" if extra else ""))
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"

