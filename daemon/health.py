"""``run_gateway.py health [--ready]``: a probe for scripts and service managers, one short line (or --json).

Two questions, because they call for different actions:

* liveness (plain ``health``): the daemon runs, answers its admin port, its actor tree answers a status walk and
  no actor has failed for good. Not live means restart it. An adapter whose platform is unreachable does not make
  the gateway dead: restarting it would not bring Telegram back.
* readiness (``health --ready``): live, and every actor up (none restarting), every configured adapter connected
  (not connecting, retrying, restarting or failed), no model service failing (the last turn that asked it failed
  because of it: actors/sessions/model_health.py) and no drain under way. A failing model does not make the gateway
  dead: a restart would not bring the model service back. Not ready means do not send it work (yet), or look at
  ``status``.

The judgement (``verdict``) is a pure function of the status answer; ``cmd_health`` attaches and prints.
"""
from __future__ import annotations

import json
import sys
from actors.sessions.model_health import model_problems
from daemon.admin import AdminClient, AdminError, NoGateway

EX_OK, EX_NOT_OK, EX_NOT_RUNNING = 0, 1, 3
EXIT_CODES = """exit codes:
  0  live (with --ready: ready)
  1  not live (an actor failed for good, or the gateway did not answer in time); with --ready also: an actor
     restarting, an adapter not connected, a model service failing, or a drain under way
  3  no gateway running
"""
CONNECTED_STATES = ("connected", "up")
LINE_PROBLEM_CHARS = 100   # per problem on the one line; --json (and status) carry them whole
DESCRIPTION = """A probe for scripts and service managers.
  health          live: the daemon answers and no actor failed for good (not live: restart it)
  health --ready  ready: live, every actor up, every adapter connected, no model service failing, no drain
                  (not ready: send no work yet)"""


def verdict(status, ready: bool) -> list[str]:
    """What stands between this status and a healthy probe; empty: live (or ready)."""
    problems = [f"{status.actors_failed} actor(s) failed"] if status.actors_failed else []
    if not ready:
        return problems
    if status.actors_restarting:
        problems.append(f"{status.actors_restarting} actor(s) restarting")
    problems += [f"adapter {row['name']} {row['state']}" + (f": {row['error']}" if row.get("error") else "")
                 for row in status.detail.get("adapters") or [] if row["state"] not in CONNECTED_STATES]
    problems += model_problems(status.detail.get("models") or [])   # every turn would fail: no work for it now
    if status.draining:
        problems.append("draining")
    return problems


def summary(status, pid: int, ready: bool) -> tuple[dict, str, int]:
    """(the --json document, the one line, the exit code) of one status answer."""
    problems = verdict(status, ready)
    check = "ready" if ready else "live"
    rows = status.detail.get("adapters") or []
    connected = sum(row["state"] in CONNECTED_STATES for row in rows)
    data = {"ok": not problems, "check": check, "pid": pid, "problems": problems, "actors_up": status.actors_up,
            "adapters_connected": connected, "adapters": len(rows)}
    if problems:
        return data, f"not {check}: " + "; ".join(_short(p) for p in problems), EX_NOT_OK
    return data, (f"{check}: pid {pid}, {status.actors_up} actors up, {connected} of {len(rows)} adapters "
                  "connected"), EX_OK


def _short(problem: str, limit: int = LINE_PROBLEM_CHARS) -> str:
    return problem if len(problem) <= limit else problem[:limit - 1].rstrip() + "…"


def cmd_health(config: dict, args) -> int:
    check = "ready" if args.ready else "live"
    try:
        client = AdminClient(config)
        data, line, code = summary(client.status(timeout=args.timeout), client.runtime["launcher_pid"], args.ready)
    except NoGateway as exc:
        data, line, code = {"ok": False, "check": check, "running": False, "problems": [str(exc)]}, \
            f"not {check}: {exc}", EX_NOT_RUNNING
    except AdminError as exc:
        data, line, code = {"ok": False, "check": check, "problems": [str(exc)]}, f"not {check}: {exc}", EX_NOT_OK
    print(json.dumps(data) if args.json else line, file=sys.stdout if code == EX_OK or args.json else sys.stderr)
    return code
