"""``run_gateway.py reload``: the running gateway reads its configuration file again (as on SIGHUP).

The gateway checks the file whole, as a start does; a file that does not check changes nothing: this command prints
why (the file, the key) and exits 78, as a start would, and the gateway's log says the same. What changed applies to
new turns; what only a restart changes keeps its running value and is listed (actors/config_reload.py).

Exit codes: 0 the new configuration runs; 78 the file was refused (the old configuration keeps running); 1 the
reload was refused for another reason (a drain runs, another file was named) or not answered; 3 no gateway.
"""
from __future__ import annotations

import os
import time
import tomllib
from pathlib import Path

from actors.messages import ReloadReport, ReloadRequest
from common.config import EX_CONFIG, ConfigError, default_config_path, resolve_state_dir
from daemon.cli_output import fail, out
from daemon.cli_parsing import add_json, command
from daemon.admin import AdminClient, NoGateway
from daemon.asking import ask_for

EX_NOT_RUNNING = 3
ANSWER_TIMEOUT_S = 30.0


def add_parsers(sub) -> None:
    reload = command(sub, "reload", "read the configuration file again (routes, profiles, cron jobs: for new turns)",
                     "The running gateway reads its configuration file again and checks it whole, as a start does.\n"
                     "Routes, profiles, [agent], the profile defaults of [sessions] and the cron jobs change for new\n"
                     "turns; a turn in flight finishes on what it started with. What only a restart changes (adapters,\n"
                     "their tokens, addresses, the state dir, the shard count...) keeps its running value and is\n"
                     "listed. A file that does not check changes nothing: exit 78 with the file and the key.\n"
                     "SIGHUP to the gateway's process does the same (docs/operations.md).",
                     "reload\nreload --json")
    reload.epilog += ("\n\nexit codes: 0 the new configuration runs; 78 the file was refused (the old one keeps "
                      "running);\n1 refused for another reason (a drain runs) or not answered; 3 no gateway")
    add_json(reload)


def cmd_reload(config: dict, args) -> int:
    return _ask(args, config["gateway"]["state_dir"], config.get("_source", ""))


def reload_despite(args, error: ConfigError) -> int:
    """The file this command was given does not check. A gateway running on it hears of the reload anyway (it
    finds the same fault, logs it and keeps running); this command says why and exits 78 either way."""
    reason = f"config error: {error.file}: {error.key}: {error.reason}"
    state_dir = _state_dir_of_unloadable(args.config)
    try:
        client = AdminClient({"gateway": {"state_dir": str(state_dir)}})
    except NoGateway:
        return fail(args, reason + " (no gateway runs on it; nothing was reloaded)", EX_CONFIG, file=error.file,
                    key=error.key, reason=error.reason)
    _report(client, error.file)
    return fail(args, reason + "; the gateway keeps its running configuration", EX_CONFIG, file=error.file,
                key=error.key, reason=error.reason)


def _ask(args, state_dir: str, path: str) -> int:
    try:
        client = AdminClient({"gateway": {"state_dir": state_dir}})
    except NoGateway as exc:
        return out(args, {"running": False, "error": str(exc)}, EX_NOT_RUNNING)
    report = _report(client, path)
    if report is None:
        return fail(args, f"the gateway did not answer the reload within {ANSWER_TIMEOUT_S:g}s")
    data = {"ok": report.ok, "generation": report.generation, "sha256": report.sha256,
            "loaded_at": report.loaded_at, "changed": list(report.changed),
            "needs_restart": list(report.needs_restart), **({"error": report.error} if report.error else {}),
            **({"file": report.file, "key": report.key} if report.config_error else {})}
    if report.ok:
        return out(args, data, 0, _lines(report))
    code = EX_CONFIG if report.config_error else 1
    text = (f"config error: {report.error}; the gateway keeps its running configuration" if report.config_error
            else f"reload refused: {report.error}")
    return out(args, data, code, text)


def _report(client, path: str):
    return ask_for(client.asys, client.root, ReloadRequest(via="reload", path=path), ReloadReport, ANSWER_TIMEOUT_S)


def _lines(report: ReloadReport) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(report.loaded_at))
    lines = [f"reloaded: configuration generation {report.generation}, sha256 {report.sha256[:12]}, read {when} UTC",
             f"  changed for new turns: {', '.join(report.changed) or 'nothing'}"]
    if report.needs_restart:
        lines.append(f"  needs a restart (the running values are kept): {', '.join(report.needs_restart)}")
    return "\n".join(lines)


def _state_dir_of_unloadable(path: str | None) -> Path:
    """Where the gateway of a file that does not load keeps its state: $GATEWAY_STATE_DIR, else the file's
    ``[gateway] state_dir`` if the file parses that far, else the default."""
    state_dir = ""
    if not os.environ.get("GATEWAY_STATE_DIR"):
        try:
            raw = tomllib.loads(Path(path or default_config_path()).expanduser().read_text(encoding="utf-8"))
            state_dir = str((raw.get("gateway") or {}).get("state_dir") or "")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
            state_dir = ""
    return resolve_state_dir({"gateway": {"state_dir": state_dir}})
