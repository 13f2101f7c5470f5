#!/usr/bin/env python3
"""agent-gateway: connect an LLM agent to chat platforms, crash-safe.

    python run_gateway.py                 run in the foreground until Ctrl-C / SIGTERM (logs on stderr)
    python run_gateway.py start           run as a daemon (log file, pid file); refuses to start twice
    python run_gateway.py stop            graceful stop (flush), then forced after a bound
    python run_gateway.py drain           stop intake, finish turns in flight, flush, exit (rolling restarts)
    python run_gateway.py reload          read the configuration file again: routes, profiles, cron (also SIGHUP)
    python run_gateway.py status          health on one screen: actors, adapters (and their URLs), sessions
    python run_gateway.py health          liveness probe, one line (--ready: readiness); exit 0 when fine
    python run_gateway.py doctor          check the config, model endpoint, credentials, ports, disk; starts nothing
    python run_gateway.py tree            the live actor tree
    python run_gateway.py chat            talk to the agent from this terminal (--as USER, --message TEXT)
    python run_gateway.py sessions ...    stored conversations: list, show, search, export, import
    python run_gateway.py deliveries ...  the delivery ledger: pending, failed, abandoned; retry one
    python run_gateway.py pair ...        who may talk to the agent: pairing codes (list, approve, deny), grants
    python run_gateway.py cron ...        scheduled jobs: list, run NAME now, pause NAME, resume NAME
    python run_gateway.py tasks ...       background tasks chats started with /bg: list, show N (results kept too)
    python run_gateway.py adapters ...    pause, resume or reconnect a running adapter's intake
    python run_gateway.py fault NAME      fault drills: crash, hang or exit one actor or cell ([debug] fault_injection)
    python run_gateway.py config ...      init: write a commented sample configuration; show: the effective one
    python run_gateway.py routes ...      which profile each chat gets: list, explain SOURCE (docs/profiles.md)
    python run_gateway.py logs [-f]       the daemon's log (--since 10m; -f follows it until Ctrl-C)
    python run_gateway.py report          one archive for a bug report (--session ID, -o FILE, --include-text)
    python run_gateway.py service install a systemd unit for this gateway (--user: your own systemd; --dry-run)
    python run_gateway.py completion bash shell completion: Tab completes commands and options (also zsh, fish)

`COMMAND --help` says what each does, its defaults and an example. Every admin command takes --json (errors
then come as JSON on stdout too). Configuration: --config FILE, else $GATEWAY_CONFIG, else
~/.config/agent-gateway/gateway.toml (embedded defaults when absent). State: $GATEWAY_STATE_DIR, else
[gateway] state_dir, else ~/.local/state/agent-gateway.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from common import config as config_mod
from common.config import EX_CONFIG, ConfigError
from common.privacy import EX_NOPERM, PRIVATE_UMASK, foreign_owner, root_refusal
from common.state_access import EX_CANTCREAT, unusable_state_dir
from common.version import VERSION
from common import processes
from common.redact import RedactingStream, configured_secrets
from common.runfiles import RunFiles
from daemon.cli_output import config_failure, fail, out as _out, run_guarded
from daemon.cli_parsing import GatewayParser, accept_everywhere, add_json, command

# Each command loads its own modules, in its function below, and the parser of its own command alone (build_parser):
# with every module loaded up front, `tree` or `health` cost 0.65 s of CPU, most of it importing what other commands
# need (the doctor's HTTP client, the adapters' registry, the cron parser) — felt by an operator at every command,
# and by a script or a probe that asks every second.

EX_NOT_RUNNING = 3


def main(argv: list[str] | None = None) -> int:
    return run_guarded(_main, argv)


def _main(argv: list[str] | None) -> int:
    os.umask(PRIVATE_UMASK)   # before anything is written: state, logs, exports are the gateway user's alone
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(command_in(argv))
    args = parser.parse_args(argv)
    if args.config:   # `start` runs the daemon from /: a path relative to here must not change meaning there
        args.config = os.path.abspath(os.path.expanduser(args.config))
    if args.command == "config" and getattr(args, "action", None) == "init":
        # Writes a sample: needs no configuration, and may be run before one exists.
        from daemon import cli_config
        return cli_config.cmd_config(None, args)
    if args.command == "platforms":
        # this command's own modules, loaded when it runs (see the note at the top)
        from daemon import cli_platforms
        return cli_platforms.cmd_platforms(None, args)   # the registry's own facts: no configuration needed
    if args.command == "completion":
        # this command's own modules, loaded when it runs (see the note at the top)
        from daemon import cli_completion
        return cli_completion.cmd_completion(parser, args)   # the parser's own options: no configuration either
    try:
        config = config_mod.load(args.config)
        if args.command not in ON_THE_RUNNING_GATEWAY:
            # Adapter tables, profiles, routes and cron jobs too: a bad one stops the start here, not in a crash loop.
            # A reload checks a file with this same function (actors/config_reload.py).
            from actors.config_reload import check_whole
            check_whole(config, time.time())
    except ConfigError as exc:
        if args.command == "reload":   # the running gateway hears of it too, and logs why it keeps running as it is
            # this command's own modules, loaded when it runs (see the note at the top)
            from daemon import cli_reload
            return cli_reload.reload_despite(args, exc)
        if args.command == "doctor":   # the other checks still run: a config error is one finding of several
            # this command's own modules, loaded when it runs (see the note at the top)
            from daemon import doctor as doctor_mod
            return doctor_mod.cmd_doctor_invalid(args, exc)
        return config_failure(args, exc, EX_CONFIG)
    if args.command not in (None, "run", "start", "join"):   # the daemon's own output is its log, redacted there
        secrets = configured_secrets(config)
        sys.stdout, sys.stderr = RedactingStream(sys.stdout, secrets), RedactingStream(sys.stderr, secrets)
    refusal = foreign_owner(config["gateway"]["state_dir"])
    if not refusal and args.command not in ROOT_ON_ANY_STATE:
        refusal = root_refusal(config["gateway"]["state_dir"])
    if refusal:
        return fail(args, f"refused: {refusal}", EX_NOPERM)
    if (args.command or "run") in WRITES_STATE:
        unusable = unusable_state_dir(config["gateway"]["state_dir"])
        if unusable:
            return fail(args, unusable, EX_CANTCREAT)
    from daemon.admin import AdminError   # here, not at the top: loaded already by every command that attaches
    try:
        return COMMANDS[args.command or "run"](config, args)
    except AdminError as exc:   # the gateway runs but did not answer in time: said, not a traceback
        return fail(args, str(exc))


# The commands whose parsers a module of daemon/ adds (its add_parsers); the others are built in build_parser.
PARSER_MODULES = {"sessions": "cli_storage", "deliveries": "cli_storage", "pair": "cli_access", "cron": "cli_cron",
                  "adapters": "cli_adapters", "config": "cli_config", "routes": "cli_routes", "memory": "cli_memory",
                  "approvals": "cli_approvals", "tasks": "cli_tasks", "watches": "cli_watches",
                  "storage": "cli_migrate",
                  "reload": "cli_reload", "logs": "cli_logs", "service": "cli_service", "completion": "cli_completion",
                  "report": "cli_report", "join": "cli_join", "platforms": "cli_platforms"}
BUILT_HERE = ("run", "start", "stop", "drain", "status", "tree", "chat", "fault", "health", "doctor")


def command_in(argv: list[str]) -> str | None:
    """The command ``argv`` names (its first word that is no option nor --config's value), if this program has it;
    None for none, an unknown one, a help asked before the command, or `completion` (which completes every command):
    the whole parser is built then."""
    words = iter(argv)
    for word in words:
        if word in ("-h", "--help", "--version"):
            return None
        if word == "--config":
            next(words, None)
        elif not word.startswith("-"):
            return word if (word in PARSER_MODULES or word in BUILT_HERE) and word != "completion" else None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The program's parser: every command's, or (``only``) the top level and that one command's alone."""
    def wanted(name: str) -> bool:
        return only is None or only == name

    parser = GatewayParser(prog="run_gateway.py", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", metavar="FILE", help="TOML configuration file (also after the command)")
    parser.add_argument("--version", action="version", version=f"agent-gateway {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    command(sub, "run", "run in the foreground (the default)",
            "Run the gateway in this terminal until Ctrl-C or SIGTERM; the log goes to stderr. What a service\n"
            "manager runs (deploy/agent-gateway.service).", "run\n--config ./gateway.toml run")
    start = command(sub, "start", "run as a daemon",
                    "Start the gateway in the background (its log in the state dir, a pid lock in <state>/run/) and\n"
                    "wait until every actor is up, then for each adapter's first connection attempt (up to 15 s).\n"
                    "Refuses to start a second gateway on the same state dir. Exit 0 started; 4 started, degraded\n"
                    "(an adapter or the metrics server could not connect or listen: the line says which and why);\n"
                    "1 did not start; 73 the state dir cannot be written; 78 invalid configuration.",
                    "start\nstart --config ~/gw/gateway.toml --wait 120")
    start.add_argument("--wait", type=float, default=None, metavar="S",
                       help="seconds to wait for readiness (default: [gateway] ready_timeout_s + 5)")
    stop = command(sub, "stop", "graceful stop, forced after --timeout",
                   "Stop the running gateway: intake stops, replies in flight are flushed, then it exits. A gateway\n"
                   "still running after the timeout is killed, with every process of its tree.", "stop --timeout 30")
    stop.add_argument("--timeout", type=float, default=None, metavar="S",
                      help="seconds before the stop is forced (default: [watchdog] shutdown_timeout_s + 15)")
    drain = command(sub, "drain", "stop intake, let turns finish, flush, exit 0",
                    "Stop taking messages, let the turns in flight finish (up to the timeout), flush, and exit 0.\n"
                    "What is left stays durable for the next instance: the first half of a rolling restart.",
                    "drain --timeout 60")
    drain.add_argument("--timeout", type=float, default=None, metavar="S",
                       help="how long turns may take (default: [watchdog] drain_timeout_s)")
    status = command(sub, "status", "health on one screen",
                     "The running gateway's health: actors up, restarting and failed; sessions per shard; pending\n"
                     "deliveries; recovery counts; the admin and metrics addresses. Exit 3 if none runs.",
                     "status\nstatus --json")
    tree = command(sub, "tree", "the live actor tree",
                   "The live supervision tree: each actor's kind, name, pid, state, uptime and restarts (each\n"
                   "shard's busiest cells; --all lists every one).", "tree --all")
    tree.add_argument("--all", action="store_true", help="every cell, not the busiest per shard")
    chat = command(sub, "chat", "chat with the agent in this terminal, through the running gateway",
                   "Talk to the agent through the running gateway's terminal adapter. Ctrl-C stops an answer,\n"
                   "Ctrl-D leaves; --message sends one message, prints the answer and exits.",
                   "chat\nchat --as ada --message 'hello'")
    chat.add_argument("--as", dest="user", default=os.environ.get("USER", "operator"), metavar="USER",
                      help="who is speaking (each user is their own conversation; default: %(default)s)")
    chat.add_argument("--message", metavar="TEXT", help="send one message, print the answer, exit")
    chat.add_argument("--timeout", type=float, default=600.0, metavar="S",
                      help="how long to wait for an answer (default: %(default)ss)")
    fault = command(sub, "fault", "fault drill: crash, hang or exit one actor or cell",
                    "Fault drill: make one actor or cell crash, hang or exit, and watch it come back (`tree`).\n"
                    "loop_exit stops an actor's asyncio loop, loop_hang blocks it (--seconds): the actor is restarted.\n"
                    "Needs [debug] fault_injection = true in the configuration the gateway runs with.",
                    "fault sweeper\nfault ticker --action hang --seconds 20")
    fault.add_argument("name", help="the actor's or cell's name, as `tree --all` shows it (sweeper, session:<key>)")
    fault.add_argument("--action", choices=("crash", "hang", "exit", "loop_exit", "loop_hang"), default="crash",
                       help="what it does (default: %(default)s)")
    fault.add_argument("--seconds", type=float, default=30.0, metavar="S",
                       help="how long a hang (or loop_hang) lasts (default: %(default)ss)")
    for module in dict.fromkeys(m for name, m in PARSER_MODULES.items() if wanted(name)):
        importlib.import_module(f"daemon.{module}").add_parsers(sub)
    # The texts of --help below live in the modules that do the work: read only when that help may be asked for.
    health_mod = importlib.import_module("daemon.health") if wanted("health") else None
    health = command(sub, "health", "liveness probe (--ready: readiness); one line, exit 0 when fine",
                     health_mod.DESCRIPTION if health_mod else "", "health\nhealth --ready --json")
    if health_mod:
        health.epilog = health.epilog + "\n\n" + health_mod.EXIT_CODES
    health.add_argument("--ready", action="store_true",
                        help="also require every actor up, every adapter connected and no drain")
    health.add_argument("--timeout", type=float, default=10.0, metavar="S",
                        help="how long the gateway may take to answer (default: %(default)ss)")
    doctor_mod = importlib.import_module("daemon.doctor") if wanted("doctor") else None
    doctor = command(sub, "doctor", "check the configuration, the model endpoint, credentials, ports, disk and state "
                     "dir, one line each; exit 1 on any failure",
                     doctor_mod.__doc__.split("\n\n", 1)[1] if doctor_mod else "",
                     "doctor\ndoctor --config ./gateway.toml --json\ndoctor --audit")
    doctor.add_argument("--audit", action="store_true",
                        help="also audit the installed Python packages for known advisories (pip-audit, the audit "
                             "extra; needs network access to pypi.org)")
    if wanted("status"):
        status.epilog = status.epilog + "\n\n" + importlib.import_module("daemon.status_view").EXIT_CODES
    add_json(stop, drain, status, tree, start, fault, health, doctor)
    accept_everywhere(parser, "--config", metavar="FILE", help="TOML configuration file")
    return parser


# ------------------------------------------------------------------------------------------------------ commands

def cmd_run(config: dict, args) -> int:
    from daemon.launcher import Launcher   # the daemon's own modules load only for `run`
    from common.logging_setup import configure_launcher_logging
    configure_launcher_logging(config)
    return Launcher(config).run()


def cmd_start(config: dict, args) -> int:
    # this command's own modules, loaded when it runs (see the note at the top)
    from daemon import cli_rich, start_report
    from daemon.startup_checks import startup_warnings
    from runtime import selftest
    files = RunFiles(config["gateway"]["state_dir"])
    files.run_dir.mkdir(parents=True, exist_ok=True)
    log_path = files.log_path(config)
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        open(log_path, "ab").close()
    except OSError as exc:   # [gateway] log_file may be outside the state dir, checked above
        return fail(args, f"cannot write the log file {log_path}: {exc.strerror or exc}", EX_CANTCREAT)
    if _running(config):
        return _out(args, {"ok": False, "error": f"already running (pid {files.read_pid()})"}, 1)
    refusal = selftest.refusal()   # said here, on the operator's terminal, before any daemon exists
    if refusal:
        return fail(args, refusal, selftest.EX_INCOMPATIBLE)
    for warning in startup_warnings(config):
        print(f"warning: {warning}", file=sys.stderr)
    before = files.read_runtime()
    # An earlier life's console address (a kill -9 leaves it): gone, so the one `start` reports is this life's.
    (files.run_dir / start_report.CONSOLE_FILE).unlink(missing_ok=True)
    log_offset = log_path.stat().st_size   # the log holds earlier runs too: a failure is told from this start's lines
    # The configuration the checks above loaded, by its absolute path: the daemon runs from /.
    source = config.get("_source")
    command = [sys.executable, os.path.abspath(__file__)] + (["--config", source] if source else []) + ["run"]
    env = dict(os.environ, GATEWAY_STATE_DIR=str(files.state_dir))
    with open(log_path, "ab") as log, open(os.devnull, "rb") as devnull:
        proc = subprocess.Popen(command, stdin=devnull, stdout=log, stderr=log, start_new_session=True,
                                env=env, cwd="/")
    wait = args.wait or config["gateway"]["ready_timeout_s"] + 5
    with cli_rich.waiting(args, f"starting the gateway (pid {proc.pid}): waiting until every actor is up"):
        runtime = _started(files, proc, before, time.monotonic() + wait)
    if runtime:
        with cli_rich.waiting(args, "started: waiting for the adapters' first connection attempt"):
            settled = start_report.settle(config, files, time.monotonic() + start_report.SETTLE_S)
        code = start_report.EX_STARTED_DEGRADED if settled.problems else 0
        return _out(args, {"ok": True, "pid": proc.pid, "admin_port": runtime["admin_port"],
                           "ready_after_s": runtime["ready_after_s"], "log": str(log_path),
                           "degraded": bool(settled.problems), "problems": settled.problems,
                           "connecting": settled.connecting, "web_chat": settled.web_urls,
                           "console": settled.console_url}, code,
                    start_report.started_line(proc.pid, runtime["ready_after_s"], settled)
                    + f"\n  admin {runtime['bind_host']}:{runtime['admin_port']}; log {log_path}")
    if proc.poll() is not None:
        logged = start_report.log_since(log_path, log_offset)
        return _out(args, {"ok": False, "error": f"the gateway exited with {proc.returncode}",
                           "cause": start_report.failure_cause(logged), "log_tail": "\n".join(logged[-20:]),
                           "log": str(log_path)}, 1,
                    start_report.failed_line(proc.returncode, logged, log_path))
    return _out(args, {"ok": False, "error": f"not ready after {wait:g}s", "log": str(log_path)}, 1)


def cmd_stop(config: dict, args) -> int:
    # this command's own modules, loaded when it runs (see the note at the top)
    from daemon import cli_rich
    files = RunFiles(config["gateway"]["state_dir"])
    pid = files.read_pid() if _running(config) else None
    if not pid:
        return _out(args, {"ok": False, "error": "no gateway running"}, EX_NOT_RUNNING)
    # Signalled only if it is the process that holds the pid lock (the file's content alone proves nothing), through
    # a pidfd opened before the check, so a pid reused meanwhile is never the one signalled.
    try:
        launcher = os.pidfd_open(pid)
    except ProcessLookupError:
        return _out(args, {"ok": False, "error": "no gateway running"}, EX_NOT_RUNNING)
    try:
        holder = files.lock_holder()
        if holder != pid:
            return _out(args, {"ok": False, "error": f"{files.pid_path} names pid {pid}, but the pid lock is held by "
                               + (f"pid {holder}" if holder else "no live process") + ": nothing was signalled"}, 1)
        timeout = args.timeout or config["watchdog"]["shutdown_timeout_s"] + 15
        tree = [pid] + processes.descendants(pid)
        started = time.monotonic()
        signal.pidfd_send_signal(launcher, signal.SIGTERM)
    finally:
        os.close(launcher)
    with cli_rich.waiting(args, f"stopping the gateway (pid {pid}): replies in flight are flushed"):
        left = processes.wait_gone([pid], timeout)
        forced = bool(left)
        if forced:
            processes.kill_all(tree)
        processes.wait_gone(tree, 5)
    took = time.monotonic() - started
    return _out(args, {"ok": True, "pid": pid, "forced": forced, "seconds": round(took, 3)}, 0,
                f"gateway (pid {pid}) stopped {'by force after' if forced else 'gracefully in'} {took:.2f}s")


def cmd_drain(config: dict, args) -> int:
    # this command's own modules, loaded when it runs (see the note at the top)
    from daemon import cli_rich
    client = _attach(config, args)
    if isinstance(client, int):
        return client
    timeout = args.timeout if args.timeout is not None else config["watchdog"]["drain_timeout_s"]
    with cli_rich.waiting(args, f"draining: turns in flight have up to {timeout:g}s to finish"):
        report = client.drain(timeout)
        exited = client.wait_launcher_exit(30)
    data = {"ok": report.ok, "waited_s": report.waited_s, "in_flight_left": report.in_flight_left,
            "detail": report.detail, "exited": exited}
    text = f"{report}; gateway {'exited' if exited else 'STILL RUNNING'}"
    return _out(args, data, 0 if exited else 1, text)


def cmd_status(config: dict, args) -> int:
    # this command's own modules, loaded when it runs (see the note at the top)
    from daemon import cli_leases, cli_storage, status_view
    from storage import MediaCache
    client = _attach(config, args)
    if isinstance(client, int):
        return client
    media = MediaCache(Path(config["gateway"]["state_dir"]) / "media").stats()
    status = client.status()
    now = cli_storage.ledger_now(config)
    if now is not None:   # the ledger as it is now, not as of the sweeper's last sweep
        status = dataclasses.replace(status, obligations_pending=now["pending"], detail={
            **status.detail, "recovery": {**(status.detail.get("recovery") or {}), **now["recovery"]}})
    data, text, code = status_view.report(status, client.runtime, f"{client.host}:{client.port}", config,
                                          media=media)
    shared, shared_lines = cli_leases.shared_view(config)   # hosts sharing the database: every host, every lease
    if shared is not None:
        data["shared"], text = shared, "\n".join([text, *shared_lines])
    if args.json:
        return _out(args, data, code)
    print(text)    # on stdout whatever the health: the screen is the answer asked for, not an error message
    return code


def cmd_tree(config: dict, args) -> int:
    # this command's own modules, loaded when it runs (see the note at the top)
    from daemon import cli_leases, cli_rich
    from supervision import tree as tree_mod
    client = _attach(config, args)
    if isinstance(client, int):
        return client
    root = client.tree()
    shared, shared_lines = cli_leases.shared_view(config)   # hosts sharing the database: every host, every lease
    data, text = tree_mod.to_json(root), tree_mod.render(root, every_cell=args.all)
    if shared is not None:
        data, text = {**data, "shared": shared}, "\n".join([text, *shared_lines])
    return _out(args, data, 0, text, drawn=None if shared is not None else
                lambda: cli_rich.actor_tree(root, every_cell=args.all))


def cmd_fault(config: dict, args) -> int:
    if not config["debug"]["fault_injection"]:
        return _out(args, {"ok": False, "error": "fault drills need [debug] fault_injection = true in the "
                                                 "configuration the gateway runs with"}, 1)
    client = _attach(config, args)
    if isinstance(client, int):
        return client
    # this command's own modules, loaded when it runs (see the note at the top)
    from daemon.admin import AdminError
    try:
        node = client.inject_fault(args.name, args.action, args.seconds)
    except AdminError as exc:
        return _out(args, {"ok": False, "error": str(exc)}, 1)
    return _out(args, {"ok": True, "name": node.name, "kind": node.kind, "pid": node.pid, "action": args.action},
                0, f"{args.action} sent to {node.kind} {node.name} (pid {node.pid})")


def cmd_chat(config: dict, args) -> int:
    # this command's own modules, loaded when it runs (see the note at the top)
    from daemon.cli_terminal import Terminal, interactive, one_message
    from daemon.admin import AdminClient
    client = _attach(config, args)
    if isinstance(client, int):
        return client
    try:
        terminal = Terminal(client, args.user, attach=lambda: AdminClient(config))   # again, after a restart
        if args.message is None:
            return interactive(terminal)
        return one_message(terminal, args.message, args.timeout)
    except RuntimeError as exc:
        print(str(exc), file=sys.stderr)
        return 1


def cmd_service(config: dict, args) -> int:
    from daemon import cli_service   # loaded for this command only (see the note at the top)
    # The unit runs this program.
    return cli_service.cmd_service(config, args, program=[sys.executable, os.path.abspath(__file__)])


def delegated(module: str, function: str):
    """The command ``function`` of daemon/``module``.py, which is loaded when that command runs."""
    def run(config: dict, args) -> int:
        return getattr(importlib.import_module(f"daemon.{module}"), function)(config, args)
    return run


# Commands that act on the gateway that runs, or read its store or log: its configuration was checked whole when it
# started; a file edited since (which `reload` and `doctor` check whole) does not stop an operator from looking at
# it, talking to it or stopping it. These load and check the file's own schema alone (common/config.py).
ON_THE_RUNNING_GATEWAY = {"stop", "drain", "status", "health", "tree", "fault", "chat", "logs", "adapters",
                          "sessions", "deliveries", "pair", "approvals", "tasks"}
# Commands that read nothing of the state directory: root may run them whoever owns it (`service install` as root is
# how a service user's unit is written).
ROOT_ON_ANY_STATE = {"service", "config"}
# Commands that create files in the state directory first thing: one that cannot be written is said before they
# start, in one line (common/state_access.py), not as the traceback of their first mkdir.
WRITES_STATE = {"run", "start", "join"}

COMMANDS = {"run": cmd_run, "start": cmd_start, "stop": cmd_stop, "drain": cmd_drain, "status": cmd_status,
            "tree": cmd_tree, "fault": cmd_fault, "chat": cmd_chat, "service": cmd_service,
            "sessions": delegated("cli_storage", "cmd_sessions"),
            "deliveries": delegated("cli_storage", "cmd_deliveries"),
            "pair": delegated("cli_access", "cmd_pair"), "cron": delegated("cli_cron", "cmd_cron"),
            "adapters": delegated("cli_adapters", "cmd_adapters"), "config": delegated("cli_config", "cmd_config"),
            "routes": delegated("cli_routes", "cmd_routes"), "memory": delegated("cli_memory", "cmd_memory"),
            "approvals": delegated("cli_approvals", "cmd_approvals"), "tasks": delegated("cli_tasks", "cmd_tasks"),
            "watches": delegated("cli_watches", "cmd_watches"),
            "storage": delegated("cli_migrate", "cmd_storage"),
            "reload": delegated("cli_reload", "cmd_reload"), "logs": delegated("cli_logs", "cmd_logs"),
            "report": delegated("cli_report", "cmd_report"), "platforms": delegated("cli_platforms", "cmd_platforms"),
            "health": delegated("health", "cmd_health"), "doctor": delegated("doctor", "cmd_doctor"),
            "join": delegated("cli_join", "cmd_join")}


# ------------------------------------------------------------------------------------------------------ helpers

def _attach(config: dict, args):
    # this command's own modules, loaded when it runs (see the note at the top)
    from daemon.admin import AdminClient, NoGateway
    try:
        return AdminClient(config)
    except NoGateway as exc:
        return _out(args, {"running": False, "error": str(exc)}, EX_NOT_RUNNING)


def _started(files, proc, before, deadline: float) -> dict | None:
    """The runtime record the new launcher writes once every actor is up; None if it exits or the deadline passes."""
    while time.monotonic() < deadline:
        runtime = files.read_runtime()
        if runtime and runtime.get("launcher_pid") == proc.pid and runtime != before:
            return runtime
        if proc.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def _running(config: dict) -> bool:
    return RunFiles(config["gateway"]["state_dir"]).running()


if __name__ == "__main__":
    sys.exit(main())
