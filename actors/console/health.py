"""The one judgement of the gateway's health, from a ``GatewayStatus`` (the root's answer to a status walk). Pure.

`run_gateway.py status` and `health` (daemon/status_view.py), the service manager's STATUS= line and the console's
overview (actors/console/views.py) all read it here, so none can call healthy what another calls degraded. It lives
with the console because that is the lowest place both may import (the folder order: daemon/ over actors/, and in
actors/ the console over the sessions' model health and the adapters' connection states it reads).

Healthy: no actor restarting or failed, no configured adapter down (actors/adapters/connection.py for the adapter
states; one still connecting after a start is not down yet), no model service failing (its last turn failed because
of it: actors/sessions/model_health.py), no host lost, and no component reporting problems of its own (a status
detail part holding a ``problems`` list).
"""
from __future__ import annotations

from actors.adapters.connection import adapter_problems
from actors.sessions.model_health import model_problems

PROBLEM_CHARS = 300   # a component's own problem line, cut: a status detail may carry any text


def health_of(status) -> tuple[str, list[str]]:
    """("healthy" | "degraded" | "draining", the problems behind it, one short line each)."""
    problems = []
    if status.actors_failed:
        problems.append(f"{status.actors_failed} actor(s) failed")
    if status.actors_restarting:
        problems.append(f"{status.actors_restarting} actor(s) restarting")
    problems += adapter_problems(status.detail.get("adapters") or [])
    problems += model_problems(status.detail.get("models") or [])
    problems += [f"host {h['name']} lost: what it runs is unavailable" for h in status.detail.get("hosts") or []
                 if h.get("state") == "lost"]
    for name, part in status.detail.items():   # a component that reports its own problems
        if isinstance(part, dict) and isinstance(part.get("problems"), (list, tuple)):
            problems += [f"{name}: {str(p)[:PROBLEM_CHARS]}" for p in part["problems"]]
    if status.draining:
        return "draining", problems
    return ("degraded" if problems else "healthy"), problems
