"""``run_gateway.py service install [--user] [--dry-run] [--force]``: a systemd unit for this installation.

The unit runs this very program (the interpreter and ``run_gateway.py`` this command ran with) on the configuration
it loaded, with the settings of ``deploy/agent-gateway.service`` that make the gateway a good service (docs/
operations.md says why each): ``Type=notify`` readiness, stop = drain, ``KillMode=mixed``, bounded start and stop,
no restart on a bad configuration (exit 78).

* system (the default): ``/etc/systemd/system/agent-gateway.service``, as the ``--run-as`` user, its state in
  ``/var/lib/agent-gateway`` (``StateDirectory=``), with the deploy unit's hardening;
* ``--user``: ``$XDG_CONFIG_HOME/systemd/user/agent-gateway.service`` (``~/.config/...``), for the systemd user
  manager: the state directory the admin commands use now, so ``status`` and ``sessions`` work as before.

The service does not see the environment of the shell that installed it, so the model's API key has a place of
its own: ``EnvironmentFile=`` names ``gateway.env`` (``/etc/agent-gateway/`` for a system unit, beside the user's
configuration for ``--user``), created 0600 with a comment saying what goes there, and never replaced (it holds
secrets). When the agent reads its key from a variable (``[agent] api_key_env``) the file does not set, the command
warns and says the line to add.

It writes the files and says what to run next (it never runs systemctl itself); ``--dry-run`` prints the unit and
where it would go, and writes nothing. An existing unit is replaced only with ``--force``. The same warnings for
both kinds of unit: the key, a program or configuration under /tmp (a system service has a private /tmp; every
/tmp is emptied at boot), and, for a system unit, files its user cannot read.
"""
from __future__ import annotations

import grp
import os
import pwd
from pathlib import Path

from actors.agents.base import DEFAULT_API_KEY_ENV, agent_kind
from common.privacy import write_private
from daemon.cli_output import fail, out
from daemon.cli_parsing import add_json, command

UNIT_NAME = "agent-gateway.service"
ENV_FILE_NAME = "gateway.env"
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")
SYSTEM_ENV_DIR = Path("/etc/agent-gateway")
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


def env_file_path(user: bool) -> Path:
    """Where the service's environment (the model's key) lives: read by systemd as the unit starts."""
    if not user:
        return SYSTEM_ENV_DIR / ENV_FILE_NAME
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "agent-gateway" / ENV_FILE_NAME


def env_file_text(key_variable: str | None, user: bool = False) -> str:
    """The new environment file: comments only, saying what goes there (and the restart of the unit's kind)."""
    example = key_variable or DEFAULT_API_KEY_ENV
    restart = "systemctl --user restart agent-gateway" if user else "systemctl restart agent-gateway"
    return ("# The agent-gateway service's environment (systemd EnvironmentFile=), read as the service starts.\n"
            "# The service does not see your shell's variables: the model's API key goes here, one NAME=value a\n"
            f"# line, no quotes, no `export`. Keep this file 0600; `{restart}` after a change.\n"
            f"# {example}=\n")


def env_file_sets(path: Path, variable: str) -> bool:
    """Whether the environment file assigns ``variable`` a non-empty value (it may not exist, or be unreadable)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return False
    for line in lines:
        name, _, value = line.strip().partition("=")
        if name.strip() == variable and value.strip():
            return True
    return False


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
        f"EnvironmentFile={_word(str(env_file_path(user)))}",
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
    path, env_path = unit_path(args.user), env_file_path(args.user)
    text = unit_text(config, program, args.user, args.run_as)
    steps = next_steps(args.user, args.run_as)
    warnings = _warnings(config, program, args.user, args.run_as, env_path)
    data = {"ok": True, "path": str(path), "written": False, "unit": text, "next": steps, "warnings": warnings,
            "environment_file": str(env_path), "environment_file_created": False}
    if args.dry_run:
        creates = "" if env_path.exists() else f"# and {env_path} would be created (0600, comments only)\n"
        return out(args, data, 0, f"# would be written to {path} (--dry-run: nothing written)\n{creates}{text}"
                   + "".join(f"# warning: {w}\n" for w in warnings))
    if path.exists() and not args.force:
        return fail(args, f"{path} exists; not replaced (add --force to replace it)", 1, path=str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_private(path, text.encode("utf-8"))
        path.chmod(0o644)   # systemd reads units as any user; the unit holds no secret (they are in gateway.env)
        data["environment_file_created"] = _create_env_file(env_path, _key_variable(config), args.user)
    except OSError as exc:
        hint = "" if args.user else " (a system unit needs root: sudo, or --user for your own systemd)"
        return fail(args, f"cannot write {exc.filename or path}: {exc.strerror or exc}{hint}", 1, path=str(path))
    data["written"] = True
    created = f"created {env_path} (0600): the service's environment, e.g. the model's API key\n" \
        if data["environment_file_created"] else ""
    return out(args, data, 0, f"wrote {path}\n{created}" + "".join(f"warning: {w}\n" for w in warnings)
               + "next:\n" + "\n".join(f"  {step}" for step in steps))


def _create_env_file(path: Path, key_variable: str | None, user: bool) -> bool:
    """Create the environment file (0600, comments only) if it does not exist; never replace one: it holds the
    operator's secrets. A kill -9 leaves it whole or absent (write_private renames a finished file)."""
    if path.exists():
        return False
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_private(path, env_file_text(key_variable, user).encode("utf-8"))
    return True


def _key_variable(config: dict) -> str | None:
    """The variable the agent reads its API key from, when it reads one from the environment."""
    agent = config.get("agent") or {}
    if agent_kind(agent) != "openai" or agent.get("api_key"):
        return None
    return agent.get("api_key_env") or DEFAULT_API_KEY_ENV


def _warnings(config: dict, program: list[str], user: bool, run_as: str, env_path: Path) -> list[str]:
    """What would keep the unit from running, or every turn from succeeding: the model's key in no place the
    service reads, files under /tmp, and (system unit) files its user cannot reach."""
    source = config.get("_source") or ""
    found = [] if user else [
        f"{run_as} cannot read {path}: the service would fail to start (install the gateway where that user can "
        f"read it, e.g. a venv under /opt, or --run-as another user)"
        for path in out_of_reach(program + ([source] if source else []), run_as)]
    variable = _key_variable(config)
    if variable and not env_file_sets(env_path, variable):
        found.append(f"the agent reads its API key from ${variable}, which the service does not get from your "
                     f"shell: add the line {variable}=<your key> to {env_path}, else every turn fails (HTTP 401)")
    why = ("which the service does not see (PrivateTmp=yes)" if not user else
           "which is emptied at boot: the service would not start after a reboot")
    in_tmp = [path for path in program if _under_tmp(path)]
    if in_tmp:
        found.append(f"ExecStart runs {' and '.join(in_tmp)}, under /tmp, {why}; install the gateway elsewhere "
                     "(a venv under /opt, or in your home for --user)")
    if source and _under_tmp(source):
        found.append(f"the configuration {source} is under /tmp, {why}; keep it in /etc/agent-gateway or "
                     "~/.config/agent-gateway")
    return found


def _under_tmp(path: str) -> bool:
    """Under /tmp or /var/tmp, as written (a venv's python links out of it, but its packages stay there) or once
    its links are followed."""
    return any(p.is_relative_to(tmp) for p in (Path(path).absolute(), Path(path).resolve())
               for tmp in ("/tmp", "/var/tmp"))
