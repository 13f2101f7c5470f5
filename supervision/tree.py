"""Pure functions over a described actor tree (``TreeNode``): walking, counting, rendering."""
from __future__ import annotations

import time
from typing import Iterator, Optional

from supervision.messages import TreeNode

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
        **({"facts": dict(node.facts)} if node.facts else {}),
        "children": [to_json(c) for c in node.children],
    }


CELLS_SHOWN = 20   # per host, without --all: the busiest cells; the rest are counted on one line


MIDDLE, LAST = "├─ ", "└─ "
WHEN_FACTS = ("since",)   # facts that are a wall-clock time: shown as how long ago


def render(node: TreeNode, now: float | None = None, every_cell: bool = False) -> str:
    """The tree, one line per actor. A host of thousands of cells (a session shard) shows its busiest CELLS_SHOWN
    (pending work, then restarts, then the longest-lived) and counts the rest, unless ``every_cell``."""
    now = now or time.time()
    lines: list[str] = []
    _render(node, "", "", now, every_cell, lines)
    return "\n".join(lines)


def _render(n: TreeNode, glyph: str, indent: str, now: float, every_cell: bool, lines: list) -> None:
    """``n``'s line after ``indent`` and its own ``glyph`` (├─ for a child with a sibling below it, └─ for the
    last one), then its children under the guides that continue past it (│ where a sibling of ``n`` follows)."""
    f = fields(n, now)
    lines.append(f"{indent}{glyph}{f['label']}  [{f['state']}]  pid={f['pid']}  "
                 f"up {f['uptime']}  {f['address']}" + (f"  {' '.join(f['extra'])}" if f["extra"] else ""))
    below = indent + ("" if not glyph else "│  " if glyph == MIDDLE else "   ")
    children, hidden = shown_children(n, every_cell)
    for i, child in enumerate(children):
        last = i == len(children) - 1 and not hidden
        _render(child, LAST if last else MIDDLE, below, now, every_cell, lines)
    if hidden:
        lines.append(f"{below}{LAST}{hidden_text(hidden)}")


def fields(n: TreeNode, now: float) -> dict:
    """What one line of the tree says about ``n`` (``render`` here, and the admin CLI's drawing on a terminal)."""
    uptime = duration(now - n.started_at) if n.started_at and n.state in ("running", "busy") else "-"
    extra = [f"{k}={duration(now - v)} ago" if k in WHEN_FACTS and isinstance(v, (int, float)) and v > 0
             else f"{k}={v}" for k, v in n.facts]
    if n.restarts:
        extra.append(f"restarts={n.restarts}")
    if n.pending:
        extra.append(f"pending={n.pending}")
    if n.last_exit:
        extra.append(f"last exit: {n.last_exit}")
    return {"label": n.kind if n.name == n.kind else f"{n.kind} {n.name}", "state": n.state,
            "pid": n.pid or "-", "uptime": uptime, "address": n.address, "extra": extra}


def shown_children(n: TreeNode, every_cell: bool) -> tuple[list[TreeNode], list[TreeNode]]:
    """The children drawn under ``n``, and the cells counted on one line instead: all but the busiest
    CELLS_SHOWN of a host of more (none with ``every_cell``)."""
    children = list(n.children)
    cells = [c for c in children if c.ref is None and not c.children]
    if every_cell or len(cells) <= CELLS_SHOWN:
        return children, []
    shown = set(id(c) for c in sorted(cells, key=lambda c: (-c.pending, -c.restarts, c.started_at))[:CELLS_SHOWN])
    hidden = [c for c in cells if id(c) not in shown]
    hidden_ids = {id(h) for h in hidden}
    return [c for c in children if id(c) not in hidden_ids], hidden


def hidden_text(hidden: list[TreeNode]) -> str:
    kinds: dict[str, int] = {}
    for c in hidden:
        kinds[c.kind] = kinds.get(c.kind, 0) + 1
    counted = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
    return f"… {len(hidden)} more cells ({counted}; `tree --all` lists every one)"


def duration(seconds: float) -> str:
    """An age as people read it: 42s, 3m05s, 2h07m."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"

