"""``run_gateway.py doctor``: check a configuration before (or while) the gateway runs, one line per check.

It starts nothing. The configuration is loaded and validated first, by the loader the gateway itself uses: every
error of the file is one failed ``config`` line naming the file, key and reason (an unknown key with the likeliest
one meant), and the other checks still run on what of it checks (exit 78). Beside a running gateway, the agent's key
is looked up in that gateway's environment, not this shell's. Then:

    config          which file, which adapters
    runtime         this Python and Thespian have every internal the gateway relies on (runtime/selftest.py: the
                    start-up self-test; a failed one refuses to start, exit 69)
    agent           the kind; an OpenAI-compatible agent needs base_url and model
    agent key       the key variable is set (or a key is inline) when the agent needs one
    model endpoint  GET {base_url}/models answers (unreachable, or its HTTP status)
    adapter NAME    the platform's credentials, where one cheap call tells (Telegram: getMe; Discord: users/@me and
                    the granted intents); others "not checked"
    port LABEL      each port the gateway will listen on is free, or held by this gateway when it runs
    disk            free space where the state lives
    state dir       private to this user (0700, owned by them, no file open to others)
    plugin NAME     each plugin the gateway would run loads, and which hooks it has (docs/plugins.md)
    dependencies    with --audit: no installed Python package has a known advisory (pip-audit; needs network)

Every line is ok, warn, fail or skip, with why.

exit codes: 0 no check failed (warnings allowed), 1 a check failed, 78 the configuration is invalid
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Mapping

from actors.adapters import registry
from actors.agents.base import DEFAULT_API_KEY_ENV, agent_kind, missing_api_key, resolve_api_key
from common import config as config_mod
from common.config import EX_CONFIG, ConfigError
from common import processes
from common.runfiles import RunFiles
from common.state_access import unusable_state_dir
from daemon.doctor_probes import Check, port_check, probe_discord, probe_model, probe_slack, probe_telegram
from daemon.doctor_probes import probe_wecom
from daemon.doctor_probes import probe_whatsapp
from daemon.doctor_probes import probe_matrix
from daemon.doctor_probes import probe_signal
from daemon.doctor_probes import probe_irc
from daemon.doctor_probes import probe_mattermost
from daemon.doctor_probes import probe_line
from daemon.doctor_probes import probe_googlechat
from daemon.doctor_probes import probe_feishu
from daemon.doctor_probes import probe_onebot
from daemon.doctor_probes import probe_dingtalk
from daemon.doctor_probes import probe_teams
from daemon.doctor_probes import probe_qq
from daemon.doctor_probes import probe_email
from daemon.doctor_probes import probe_xmpp
from daemon.dependency_audit import audit_check
from daemon.doctor_mcp import mcp_probes
from actors.hooks.plugins import load_plugins
from runtime import selftest, versions

EX_OK, EX_FAILED = 0, 1
DISK_FAIL_BYTES = 100 * 2**20      # below this the next writes may fail: SQLite, the log
DISK_WARN_BYTES = 1 * 2**30
CREDENTIAL_PROBES = {"telegram": probe_telegram, "slack": probe_slack, "discord": probe_discord}
CREDENTIAL_PROBES["wecom"] = probe_wecom
CREDENTIAL_PROBES["whatsapp"] = probe_whatsapp
CREDENTIAL_PROBES["matrix"] = probe_matrix
CREDENTIAL_PROBES["signal"] = probe_signal
CREDENTIAL_PROBES["irc"] = probe_irc
CREDENTIAL_PROBES["mattermost"] = probe_mattermost
CREDENTIAL_PROBES["line"] = probe_line
CREDENTIAL_PROBES["googlechat"] = probe_googlechat
CREDENTIAL_PROBES["feishu"] = probe_feishu
CREDENTIAL_PROBES["xmpp"] = probe_xmpp
CREDENTIAL_PROBES["onebot"] = probe_onebot
CREDENTIAL_PROBES["dingtalk"] = probe_dingtalk
CREDENTIAL_PROBES["teams"] = probe_teams
CREDENTIAL_PROBES["qq"] = probe_qq
CREDENTIAL_PROBES["email"] = probe_email
NO_CREDENTIALS = ("webchat", "cli")   # nothing of theirs to check: they serve, they log in to nothing


def cmd_doctor(config: dict, args) -> int:
    return _report(args, run_checks(config))


def cmd_doctor_invalid(args, error: ConfigError) -> int:
    """``doctor`` on a configuration that does not check: every error as a failed ``config`` line, then every other
    check on what of the file does check (the defaults for the rest); exit 78. One typo must not hide a dead model
    endpoint or a taken port."""
    config = config_mod.load(args.config, lenient=True)
    code = _report(args, run_checks(config, config_errors=error.every()))
    return EX_CONFIG if code == EX_FAILED else code


def _report(args, checks: list[Check]) -> int:
    if getattr(args, "audit", False):
        checks.append(audit_check())
    failed = any(c.status == "fail" for c in checks)
    if args.json:
        print(json.dumps({"ok": not failed, "checks": [vars(c) for c in checks]}, indent=2))
    else:
        print(render(checks))
    return EX_FAILED if failed else EX_OK


def render(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    lines = [f"{c.status:<5} {c.name:<{width}}  {c.detail}" for c in checks]
    counts = {s: sum(c.status == s for c in checks) for s in ("fail", "warn", "ok", "skip")}
    lines.append("doctor: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    return "\n".join(lines)


def run_checks(config: dict, env: Mapping[str, str] = os.environ, config_errors=()) -> list[Check]:
    """Every check. ``config_errors``: what is wrong with the file (``config`` then holds what of it checks);
    each is a failed ``config`` line and the checks that need the broken part are skipped, saying so."""
    try:
        adapters = {name: args for name, args in registry.validate_all(config).items() if args["type"] != "cli"}
    except ConfigError:
        adapters = None
    if config_errors:
        checks = [Check("fail", "config", f"{e.file}: {e.key}: {e.reason}") for e in config_errors]
    else:
        checks = [config_check(config, adapters or {})]
    runtime = runtime_check()
    checks.append(runtime)
    state_dir = Path(config["gateway"]["state_dir"])
    pids = gateway_pids(state_dir)
    env, whose, of_daemon = daemon_environment(state_dir, env)
    checks += agent_checks(config.get("agent") or {}, env, whose, of_daemon)
    if runtime.status == "fail":   # the probes run on asyncio, which may be what this runtime lacks
        checks.append(Check("skip", "network", "the model endpoint and credentials: not checked on this runtime"))
    else:
        checks += asyncio.run(_network_checks(config, adapters or {}, env, checks))
    if adapters is None:
        checks.append(Check("skip", "adapters", "their tables do not check (above): credentials and ports not "
                                                "checked"))
    checks += [port_check(label, host, port, pids) for label, host, port in planned_ports(config, adapters or {})]
    checks += [disk_check(state_dir), state_dir_check(state_dir)]
    try:
        checks += plugin_checks(config)
    except ConfigError as exc:
        checks.append(Check("skip", "plugins", f"not loaded: {exc.key}: {exc.reason}"))
    return checks


def daemon_environment(state_dir: Path, env: Mapping[str, str]) -> tuple[Mapping[str, str], str, bool]:
    """The environment the agent's key is looked up in, whose it is ("" for this command's, nothing to say), and
    whether it is the running gateway's: beside a running gateway, its launcher's ``/proc/PID/environ`` (readable by
    its own user and root), else this command's. A key exported in this shell proves nothing about a daemon started
    elsewhere (a service unit, another terminal)."""
    pid = RunFiles(state_dir).running_pid()
    if not pid:
        return env, "", False
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return env, f"this shell's environment: the running gateway's (pid {pid}) is not readable by you", False
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return ({k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs},
            f"the running gateway's environment (pid {pid})", True)


def plugin_checks(config: dict) -> list[Check]:
    """Each plugin the gateway would run (docs/plugins.md): loaded, with its hooks, or why it cannot be."""
    loaded = load_plugins(config, make_dirs=False)
    checks = [Check("ok", f"plugin {p.name}", f"{p.origin}: {', '.join(sorted(p.hooks))}"
                    + (" (sees secrets)" if p.see_secrets else "")) for p in loaded.plugins]
    return checks + [Check("fail", f"plugin {e.plugin}", e.reason) for e in loaded.errors]


async def _network_checks(config: dict, adapters: dict, env: Mapping[str, str], so_far: list[Check]) -> list:
    probes = []
    agent = config.get("agent") or {}
    if agent_kind(agent) == "openai" and not any(c.name == "agent" and c.status == "fail" for c in so_far):
        probes.append(probe_model(agent["base_url"], agent["model"], resolve_api_key(agent, env)))
    for name, args in adapters.items():
        probe = CREDENTIAL_PROBES.get(args["type"])
        if probe is not None:
            probes.append(probe(name, args))
    probes += mcp_probes(config, env)
    found = await asyncio.gather(*probes)
    skipped = [Check("skip", f"adapter {name}", f"{args['type']}: credentials not checked")
               for name, args in adapters.items()
               if args["type"] not in CREDENTIAL_PROBES and args["type"] not in NO_CREDENTIALS]
    return [*found, *skipped]


# ------------------------------------------------------------------------------------ checks of the configuration

def config_check(config: dict, adapters: dict) -> Check:
    where = config.get("_source") or "(no file: the embedded defaults)"
    listed = ", ".join(f"{name} ({args['type']})" for name, args in adapters.items()) or "none but the terminal"
    return Check("ok", "config", f"{where}: valid; adapters: {listed}")


def runtime_check() -> Check:
    """The start-up self-test, as a start would run it."""
    found = selftest.problems()
    if found:
        return Check("fail", "runtime", selftest.verdict(found))
    unchecked = selftest.unchecked_python()
    if unchecked:
        return Check("warn", "runtime", f"{versions.this_runtime()}: every internal the gateway relies on is "
                                        f"there, but {unchecked}")
    return Check("ok", "runtime", f"{versions.this_runtime()}: every internal the gateway relies on is there")


def agent_checks(agent: dict, env: Mapping[str, str], whose: str = "", of_daemon: bool = False) -> list[Check]:
    kind = agent_kind(agent)
    if kind != "openai":
        return [Check("ok", "agent", "the offline agent: no model service, no key needed")]
    if not agent.get("base_url") or not agent.get("model"):
        return [Check("fail", "agent", 'kind = "openai" needs [agent] base_url and model: every turn would fail')]
    checks = [Check("ok", "agent", f"OpenAI-compatible: model {agent['model']!r} at {agent['base_url']}")]
    variable = missing_api_key(agent, env)
    where = f" in {whose}" if whose else ""
    if variable and of_daemon:
        checks.append(Check("fail", "agent key", f"${variable} is not set{where} (and [agent] api_key is empty): "
                                                 "every turn is refused (HTTP 401); set it where the gateway starts "
                                                 "(its service's EnvironmentFile, or the shell that ran `start`) "
                                                 "and restart it"))
    elif variable:
        checks.append(Check("fail", "agent key", f"${variable} is not set{where} (and [agent] api_key is empty): a "
                                                 "service that needs a key refuses every turn (HTTP 401); export "
                                                 "it, or name the variable that holds it in [agent] api_key_env"))
    elif agent.get("api_key"):
        checks.append(Check("ok", "agent key", "inline in [agent] api_key (an environment variable keeps it out "
                                               "of the file)"))
    else:
        checks.append(Check("ok", "agent key", f"${agent.get('api_key_env') or DEFAULT_API_KEY_ENV} is set{where}"))
    return checks


def planned_ports(config: dict, adapters: dict) -> list[tuple[str, str, int]]:
    """(label, host, port) of every port the gateway listens on with this configuration."""
    gateway = config["gateway"]
    ports = [("admin", gateway["bind_host"], gateway["admin_port"])]
    metrics = config.get("metrics") or {}
    if metrics.get("enabled"):
        ports.append(("metrics", (metrics.get("host") or gateway["bind_host"]).strip(), metrics["port"]))
    console = config.get("console") or {}
    if console.get("enabled"):
        ports.append(("console", console["host"].strip(), console["port"]))
    for name, args in adapters.items():
        if args["type"] in ("webchat", "http"):
            ports.append((name, (args.get("host") or "127.0.0.1").strip(), args["port"]))
        elif args["type"] == "telegram" and args["mode"] == "webhook":
            ports.append((f"{name} webhook", args["webhook_host"], args["webhook_port"]))
        elif args["type"] == "slack" and args["inbound"] == "events_api":
            ports.append((f"{name} events", args["events_host"], args["events_port"]))
        elif args["type"] == "wecom":
            ports.append((f"{name} callbacks", args["callback_host"], args["callback_port"]))
        elif args["type"] == "whatsapp":
            ports.append((f"{name} webhooks", args["webhook_host"], args["webhook_port"]))
        elif args["type"] == "line":
            ports.append((f"{name} webhook", args["webhook_host"], args["webhook_port"]))
        elif args["type"] == "googlechat":
            ports.append((f"{name} events", args["webhook_host"], args["webhook_port"]))
        elif args["type"] == "teams":
            ports.append((f"{name} activities", args["webhook_host"], args["webhook_port"]))
        elif args["type"] == "feishu" and args["inbound"] == "callback":
            ports.append((f"{name} callbacks", args["callback_host"], args["callback_port"]))
        elif args["type"] == "dingtalk" and args["inbound"] == "http":
            ports.append((f"{name} callbacks", args["callback_host"], args["callback_port"]))
        elif args["type"] == "onebot" and args["mode"] in ("reverse", "http"):
            served = "reverse WebSocket" if args["mode"] == "reverse" else "event POSTs"
            ports.append((f"{name} {served}", args["listen_host"], args["listen_port"]))
    return ports


def gateway_pids(state_dir: Path) -> set[int]:
    """The processes of the gateway running on this state dir (none: empty), to tell its ports from others'."""
    pid = RunFiles(state_dir).running_pid()
    return {pid, *processes.descendants(pid)} if pid else set()


# ------------------------------------------------------------------------------------------- the state dir

def disk_check(state_dir: Path) -> Check:
    where = next((p for p in (state_dir, *state_dir.parents) if p.exists()), Path("/"))
    free = shutil.disk_usage(where).free
    text = f"{free / 2**30:.1f} GiB free under {where}"
    if free < DISK_FAIL_BYTES:
        return Check("fail", "disk", f"{text}: the database and the log need room to write")
    if free < DISK_WARN_BYTES:
        return Check("warn", "disk", f"{text}: little room for transcripts and the log")
    return Check("ok", "disk", text)


def state_dir_check(state_dir: Path) -> Check:
    name = "state dir"
    unusable = unusable_state_dir(state_dir, create=False)
    if unusable:
        return Check("fail", name, unusable)
    if not state_dir.exists():
        return Check("ok", name, f"{state_dir} does not exist yet: the first start creates it, private (0700)")
    info = state_dir.stat()
    if info.st_uid != os.geteuid():
        return Check("fail", name, f"{state_dir} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()})")
    if info.st_mode & 0o077:
        return Check("fail", name, f"{state_dir} is open to others (mode {info.st_mode & 0o777:04o}): "
                                   f"chmod 700 {state_dir}")
    loose = sorted(p.name for p in state_dir.iterdir() if not p.is_symlink() and p.stat().st_mode & 0o077)
    if loose:
        return Check("fail", name, f"{len(loose)} entr(ies) in {state_dir} open to others ({', '.join(loose[:5])}): "
                                   f"chmod -R go-rwx {state_dir}")
    return Check("ok", name, f"{state_dir}: private to you (0700)")
