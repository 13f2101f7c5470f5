"""What the console's pages are sent: the root's answers (a TreeNode, a GatewayStatus) as JSON-able dicts. Pure.

A session shard may host thousands of cells: the tree shows its busiest ``CELLS_SHOWN`` and counts the rest, as
`tree` does (supervision/tree.py), so a page never receives the whole population of a busy gateway. Facts are
shown as the actors state them (their names are the actors' own), so a new kind of fact needs no change here.
"""
from __future__ import annotations

from actors.console.health import health_of
from supervision import tree

FACT_CHARS = 300


def _plain(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value[:FACT_CHARS] if isinstance(value, str) else value
    return str(value)[:FACT_CHARS]


def node_view(n, now: float) -> dict:
    children, hidden = tree.shown_children(n, every_cell=False)
    return {
        "kind": n.kind, "name": n.name, "pid": n.pid, "state": n.state, "started_at": n.started_at,
        "uptime_s": round(now - n.started_at, 1) if n.started_at and n.state in tree.UP_STATES else None,
        "restarts": n.restarts, "last_exit": _plain(n.last_exit), "pending": n.pending,
        "facts": {str(k): _plain(v) for k, v in n.facts},
        "children": [node_view(c, now) for c in children],
        **({"hidden": tree.hidden_text(hidden).replace("`tree --all`", "`tree --all` in the CLI")} if hidden else {}),
    }


def tree_view(root, now: float) -> dict:
    counts = tree.counts(root)
    return {"at": now, "root": node_view(root, now),
            "counts": {k: counts[k] for k in ("up", "restarting", "failed", "actors") if k in counts}}


def status_view(status, now: float) -> dict:
    state, reasons = health_of(status)
    return {"at": now, "health": state, "reasons": reasons, "started_at": status.started_at,
            "uptime_s": round(now - status.started_at, 1) if status.started_at else None,
            "actors_up": status.actors_up, "actors_restarting": status.actors_restarting,
            "actors_failed": status.actors_failed, "sessions_live": status.sessions_live,
            "obligations_pending": status.obligations_pending, "draining": status.draining,
            "detail": status.detail}
