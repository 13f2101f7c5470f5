"""What `start` says once every actor is up: whether everything the configuration asks for works, at once.

Every actor up is not every part working: the web chat may find its port taken, the metrics server too, a Telegram
adapter may not reach its API. Each of these keeps retrying (the gateway never dies of it) and `status` shows it,
but a `start` that just said "gateway started" left the operator to find out later. So `start` waits, for at most
``SETTLE_S``, until each adapter has made its first attempt (its row left "connecting") and the metrics actor
listens or has failed to, then reports:

    gateway started (pid 4242) in 1.20s, degraded: web cannot listen on 127.0.0.1:8765 (in use by pid 77, nginx)

and exits ``EX_STARTED_DEGRADED`` (4): the gateway runs (stop it, or fix the cause and it recovers by itself), but
not as configured. An adapter still connecting at the bound is named, and not counted as a failure yet.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field

from actors.adapters import registry
from actors.adapters.connection import is_down
from daemon.admin import AdminClient, AdminError, NoGateway
from daemon.doctor import planned_ports
from daemon.port_holder import port_holder

SETTLE_S = 15.0            # a first attempt that takes longer (a platform's request timeout) is left to `status`
POLL_S = 0.2
EX_STARTED_DEGRADED = 4
CONSOLE_FILE = "console.json"   # written by the console once it listens (actors/console/actor.py)
IN_USE = ("address already in use", "errno 98")
FAILED_TAIL = 20           # lines of this start's log shown when it logged no error to name as the cause
TEXT_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (?P<level>[A-Z]+) \S+?: (?P<msg>.*)$")


@dataclass
class Settled:
    problems: list = field(default_factory=list)      # one line each: "web cannot listen on ... (in use by ...)"
    connecting: list = field(default_factory=list)    # parts still on their first attempt at the bound
    web_urls: list = field(default_factory=list)      # where the web chat serves, once it does
    console_url: str | None = None                    # where the operator's console serves, once it does


def settle(config: dict, files, deadline: float) -> Settled:
    """Ask the running gateway until its adapters and metrics server have had their first attempt, or ``deadline``
    (monotonic) passes; what then works and what does not."""
    try:
        client = AdminClient(config)
    except NoGateway as exc:
        return Settled(problems=[str(exc)])
    metrics_wanted = bool(config["metrics"]["enabled"])
    console_wanted = bool((config.get("console") or {}).get("enabled"))
    while True:
        try:
            rows = client.status(timeout=max(1.0, min(5.0, deadline - time.monotonic()))).detail.get("adapters") or []
        except AdminError as exc:
            return Settled(problems=[str(exc)])
        listener = (files.read_runtime() or {}).get("metrics")
        first_try, _down = adapters_settled(rows, config, files.state_dir)
        if metrics_wanted and listener is None:
            first_try.append("metrics")
        console_url = console_serving(files) if console_wanted else None
        if console_wanted and console_url is None:
            first_try.append("console")
        if not first_try or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    problems = adapters_settled(rows, config, files.state_dir)[1]
    if metrics_wanted and listener and listener.get("error") and not listener.get("url"):
        problems.append(_cannot_listen("metrics", listener["host"], listener["port"], listener["error"],
                                       files.state_dir))
    return Settled(problems=problems, connecting=first_try, web_urls=web_chat_urls(rows), console_url=console_url)


def console_serving(files) -> str | None:
    """Where the console of this start serves: ``start`` removes the file an earlier life may have left, so one
    that is there was written by this gateway's console once it listened (actors/console/actor.py)."""
    try:
        return json.loads((files.run_dir / CONSOLE_FILE).read_text()).get("url")
    except (OSError, ValueError, AttributeError):
        return None


def adapters_settled(rows: list, config: dict, state_dir) -> tuple[list, list]:
    """From the status's adapter rows: the names still on their first attempt, and one line for each adapter that is
    down and why (a port in use names who holds it). What `start` and a foreground `run` both say."""
    connecting = [r["name"] for r in rows if r["state"] == "connecting" and not is_down(r)]
    return connecting, [_adapter_problem(row, config, state_dir) for row in rows if is_down(row)]


def web_chat_urls(rows: list) -> list:
    return [r["url"] for r in rows if r.get("url") and r["state"] == "connected" and r["kind"] == "WebChatAdapter"]


def serving_line(rows: list, problems: list, connecting: list) -> str:
    """The foreground run's one line once its adapters have had their first attempt (or SETTLE_S passed)."""
    line = "serving" + "".join(f", web chat {url}" for url in web_chat_urls(rows))
    if problems:
        line += "; degraded: " + "; ".join(problems)
    if connecting:
        line += f"; still on a first attempt after {SETTLE_S:g}s: {', '.join(connecting)} (see `status`)"
    return line


def _adapter_problem(row: dict, config: dict, state_dir) -> str:
    error = row.get("error") or ""
    if any(sign in error.lower() for sign in IN_USE):
        port = _listening_port(config, row["name"])
        if port is not None:
            return _cannot_listen(row["name"], *port, error, state_dir)
    return f"{row['name']} {row['state']}" + (f": {error}" if error else "")


def _listening_port(config: dict, adapter: str):
    adapters = {name: args for name, args in registry.validate_all(config).items() if args["type"] != "cli"}
    return next(((host, port) for label, host, port in planned_ports(config, adapters)
                 if label.split(" ")[0] == adapter and port), None)


def _cannot_listen(name: str, host: str, port: int, error: str, state_dir) -> str:
    if not any(sign in error.lower() for sign in IN_USE):
        return f"{name} cannot listen on {host}:{port}: {error}"
    return f"{name} cannot listen on {host}:{port} ({port_holder(port, state_dir)})"


def started_line(pid: int, ready_after_s: float, settled: Settled) -> str:
    line = f"gateway started (pid {pid}) in {ready_after_s:.2f}s"
    if settled.problems:
        line += ", degraded: " + "; ".join(settled.problems)
    if settled.connecting:
        line += f"; still on a first attempt after {SETTLE_S:g}s: {', '.join(settled.connecting)} (see `status`)"
    line += "".join(f"\n  web chat {url}" for url in settled.web_urls)
    return line + (f"\n  console {settled.console_url}" if settled.console_url else "")


# ------------------------------------------------------------------------------------ a start that failed

def log_since(path, offset: int) -> list[str]:
    """The lines the log got from ``offset`` on (what this start wrote: a log file holds every earlier run too)."""
    try:
        with open(path, "rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace").splitlines()
    except OSError:
        return []


def failure_cause(lines: list[str]) -> str | None:
    """The last ERROR (or CRITICAL) message among ``lines``, text or JSON log format, without its time and level:
    the launcher logs why it gives up last."""
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("level") in ("ERROR", "CRITICAL"):
                return str(record.get("msg", ""))
            continue
        found = TEXT_RECORD.match(line)
        if found and found.group("level") in ("ERROR", "CRITICAL"):
            return found.group("msg")
    return None


def failed_line(code: int, lines: list[str], log_path) -> str:
    cause = failure_cause(lines)
    said = f"the gateway failed to start (exit {code})" + (f": {cause}" if cause else "")
    if cause:
        return f"{said}\n  log: {log_path}"
    tail = "\n".join(lines[-FAILED_TAIL:])
    return f"{said}; what it logged ({log_path}):\n{tail}" if tail else f"{said}; nothing in {log_path}"
