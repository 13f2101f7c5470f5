"""``run_gateway.py service install [--user] [--dry-run] [--force]``: a systemd unit for this installation.

The unit runs this very program (the interpreter and ``run_gateway.py`` this command ran with) on the configuration
it loaded, with the settings of ``deploy/agent-gateway.service`` that make the gateway a good service (docs/
operations.md says why each): ``Type=notify`` readiness, stop = drain, ``KillMode=mixed``, bounded start and stop,
no restart on a bad configuration (exit 78).

* system (the default): ``/etc/systemd/system/agent-gateway.service``, as the ``--run-as`` user, its state in
  ``/var/lib/agent-gateway`` (``StateDirectory=``), with the deploy unit's hardening;
* ``--user``: ``$XDG_CONFIG_HOME/systemd/user/agent-gateway.service`` (``~/.config/...``), for the systemd user
  manager: the state directory the admin commands use now, so ``status`` and ``sessions`` work as before.

It writes the file and says what to run next (it never runs systemctl itself); ``--dry-run`` prints the unit and
where it would go, and writes nothing. An existing unit is replaced only with ``--force``.
"""
from __future__ import annotations

import grp
import os
import pwd
from pathlib import Path

from common.privacy import write_private
from daemon.cli_output import fail, out
from daemon.cli_parsing import add_json, command

UNIT_NAME = "agent-gateway.service"
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")
SYSTEM_STATE_DIR = "/var/lib/agent-gateway"
DRAIN_TIMEOUT_S = 30
# The deploy unit's hardening (a system service only: a user manager cannot set up most of these namespaces).
HARDENING = """\
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome={protect_home}
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
RestrictNamespaces=yes
LockPersonality=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
"""


def add_parsers(sub) -> None:
    service = command(sub, "service", "run the gateway as a systemd service: install writes its unit",
                      "Run the gateway under systemd.", "service install --user --dry-run")
    ssub = service.add_subparsers(dest="action", metavar="ACTION")
    install = command(ssub, "install", "write a systemd unit that runs this gateway (it prints what to run next)",
                      "Write a systemd unit that runs this program on this configuration: Type=notify, stop =\n"
                      "drain, restart on failure but not on a bad configuration. System-wide (root; as --run-as)\n"
                      "by default, or for your user's systemd with --user. Nothing is started: the command prints\n"
                      "the systemctl lines to run.",
                      "service install --user\nservice install --user --dry-run\n"
                      "--config /etc/agent-gateway/gateway.toml service install --run-as agent-gateway")
    install.add_argument("--user", action="store_true",
                         help="a unit of your user's systemd (~/.config/systemd/user/), default: a system unit "
                              f"({SYSTEM_UNIT_DIR})")
    install.add_argument("--run-as", default="agent-gateway", metavar="USER",
                         help="system unit only: the user the gateway runs as (default: %(default)s)")
    install.add_argument("--dry-run", action="store_true", help="print the unit and where it would go; write nothing")
    install.add_argument("--force", action="store_true", help="replace a unit file that exists")
    add_json(service, install)


def unit_path(user: bool) -> Path:
    if not user:
        return SYSTEM_UNIT_DIR / UNIT_NAME
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "systemd" / "user" / UNIT_NAME


def _word(text: str) -> str:
    """One word of a systemd command line (quoted when it holds a space, a quote or a backslash)."""
    if text and not any(c in text for c in " \t\"'\\;$%"):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$") + '"'


def _under_home(*paths: str) -> bool:
    return any(Path(p).resolve().is_relative_to(root) for p in paths for root in ("/home", "/root", "/run/user"))


def unit_text(config: dict, program: list[str], user: bool, run_as: str = "agent-gateway") -> str:
    """The unit for ``program`` (argv of this CLI) on ``config``'s file and state directory."""
    source = config.get("_source") or ""
    base = " ".join(_word(p) for p in program) + (f" --config {_word(source)}" if source else "")
    state_dir = config["gateway"]["state_dir"] if user else SYSTEM_STATE_DIR
    stop_s = DRAIN_TIMEOUT_S + config["watchdog"]["shutdown_timeout_s"] + 15 + 20
    start_s = config["gateway"]["ready_timeout_s"] + 30
    lines = [
        "# agent-gateway, written by `run_gateway.py service install" + (" --user" if user else "") + "`.",
        "# What each setting is for: docs/operations.md (the reference unit: deploy/agent-gateway.service).",
        "[Unit]",
        "Description=agent-gateway: an LLM agent on chat platforms",
        "After=network-online.target",
        "Wants=network-online.target",
        "StartLimitIntervalSec=300",
        "StartLimitBurst=5",
        "",
        "[Service]",
        "Type=notify",
        *([] if user else [f"User={run_as}", f"Group={run_as}"]),
        f"ExecStart={base} run",
        f"ExecStop=-{base} drain --timeout {DRAIN_TIMEOUT_S}",
        f"ExecReload={base} reload",
        "KillMode=mixed",
        "KillSignal=SIGTERM",
        f"TimeoutStopSec={stop_s:g}",
        f"TimeoutStartSec={start_s:g}",
        "Restart=on-failure",
        "RestartSec=2",
        "RestartPreventExitStatus=78 69",   # bad configuration; a runtime refused (69)
        f"Environment={_word('GATEWAY_STATE_DIR=' + state_dir)}",
        "Environment=PYTHONUNBUFFERED=1",
        "UMask=0027",
    ]
    if not user:
        # The program, its interpreter or its configuration in a home directory stay readable, never writable.
        protect_home = "read-only" if _under_home(*program, source or "/") else "yes"
        lines += ["StateDirectory=agent-gateway", "StateDirectoryMode=0750",
                  HARDENING.format(protect_home=protect_home).rstrip("\n")]
    lines += ["", "[Install]", f"WantedBy={'default.target' if user else 'multi-user.target'}", ""]
    return "\n".join(lines)


def _may(path: Path, account: pwd.struct_passwd, groups: set, bit: int) -> bool:
    """``account`` has permission ``bit`` (4 read, 1 search/execute) on ``path`` by its mode bits (root: always)."""
    info = path.stat()
    if account.pw_uid == 0:
        return True
    if info.st_uid == account.pw_uid:
        return bool(info.st_mode & (bit << 6))
    if info.st_gid in groups:
        return bool(info.st_mode & (bit << 3))
    return bool(info.st_mode & bit)


def out_of_reach(paths: list[str], run_as: str) -> list[str]:
    """Which of ``paths`` (files to read or run) the system unit's user cannot reach: a directory on the way it may
    not enter, or the file itself it may not read. Nothing to say of a user that does not exist yet."""
    try:
        account = pwd.getpwnam(run_as)
    except KeyError:
        return []
    groups = {account.pw_gid} | {g.gr_gid for g in grp.getgrall() if run_as in g.gr_mem}
    found = []
    for name in paths:
        path = Path(name).resolve()
        if not all(_may(d, account, groups, 1) for d in reversed(path.parents)) or not _may(path, account, groups, 4):
            found.append(str(path))
    return found


def next_steps(user: bool, run_as: str) -> list[str]:
    if user:
        return ["systemctl --user daemon-reload",
                "systemctl --user enable --now agent-gateway",
                f"loginctl enable-linger {pwd.getpwuid(os.geteuid()).pw_name}   # keep it running after you log out",
                "journalctl --user -u agent-gateway -f"]
    steps = []
    try:
        pwd.getpwnam(run_as)
    except KeyError:
        steps.append(f"useradd --system --home-dir {SYSTEM_STATE_DIR} --shell /usr/sbin/nologin {run_as}")
    return steps + ["systemctl daemon-reload", "systemctl enable --now agent-gateway", "journalctl -u agent-gateway -f",
                    f"GATEWAY_STATE_DIR={SYSTEM_STATE_DIR} run_gateway.py status   # as {run_as} (or root)"]


def cmd_service(config: dict, args, program: list[str]) -> int:
    if getattr(args, "action", None) != "install":
        return fail(args, "say what to do: service install [--user] [--dry-run] (see service install --help)", 2)
    path = unit_path(args.user)
    text = unit_text(config, program, args.user, args.run_as)
    steps = next_steps(args.user, args.run_as)
    warnings = [] if args.user else _warnings(config, program, args.run_as)
    data = {"ok": True, "path": str(path), "written": False, "unit": text, "next": steps, "warnings": warnings}
    if args.dry_run:
        return out(args, data, 0, f"# would be written to {path} (--dry-run: nothing written)\n{text}"
                   + "".join(f"# warning: {w}\n" for w in warnings))
    if path.exists() and not args.force:
        return fail(args, f"{path} exists; not replaced (add --force to replace it)", 1, path=str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_private(path, text.encode("utf-8"))
        path.chmod(0o644)   # systemd reads units as any user; the unit holds no secret (secrets stay in the config)
    except OSError as exc:
        hint = "" if args.user else " (a system unit needs root: sudo, or --user for your own systemd)"
        return fail(args, f"cannot write {path}: {exc.strerror or exc}{hint}", 1, path=str(path))
    data["written"] = True
    return out(args, data, 0, f"wrote {path}\n" + "".join(f"warning: {w}\n" for w in warnings)
               + "next:\n" + "\n".join(f"  {step}" for step in steps))


def _warnings(config: dict, program: list[str], run_as: str) -> list[str]:
    """What would keep the system unit from running: files its user cannot reach, a configuration in /tmp (the
    service has a private one)."""
    source = config.get("_source") or ""
    found = [f"{run_as} cannot read {path}: the service would fail to start (install the gateway where that user "
             f"can read it, e.g. a venv under /opt, or --run-as another user)"
             for path in out_of_reach(program + ([source] if source else []), run_as)]
    if source and Path(source).resolve().is_relative_to("/tmp"):
        found.append(f"the configuration {source} is under /tmp, which the service does not see (PrivateTmp=yes)")
    return found
