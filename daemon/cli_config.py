"""``run_gateway.py config init|show``: a configuration to start from, and the one in effect.

``config init [FILE]`` writes a sample made from the schema (``common/config.py``, the one place a default is
written): every key, commented out, at its default, so the sample as written changes nothing and uncommenting a
line is the way to change one setting. It refuses to replace a file without ``--force``; without FILE it prints
the sample. ``config show`` prints the configuration the file gives now: its values over the
defaults, the state directory resolved, every secret replaced by ``[redacted]``; its first lines say so, and whether
the gateway running on this state dir uses this very reading of the file (the sha256 ``status`` shows).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from common import config as config_mod
from common.privacy import write_private
from common.runfiles import RunFiles
from common.redact import REDACTED, SECRET_WORDS, redact_urls
from daemon.cli_output import EX_USAGE, fail, out
from daemon.cli_parsing import add_json, command
from actors.adapters import registry

SECTION_NOTES = {
    "gateway": "where the gateway listens and keeps its state",
    "supervision": "restart intensity: more than max_restarts within period_s and a supervisor gives up",
    "watchdog": "health rounds, and the bounds of a drain and of a shutdown",
    "storage": "the SQLite state",
    "delivery": "the sweeper that finishes replies a crash left behind",
    "sessions": "conversations: what a message does while a turn runs, resumes, passivation",
    "agent": "the model; without kind, the offline agent (no key needed)",
    "logging": "the log: text for people, json for machines",
    "debug": "fault drills (`fault`) and test hooks; off in production",
    "metrics": "Prometheus /metrics, /healthz and /readyz on a loopback port",
    "cluster": "worker hosts joining this gateway's Thespian convention (docs/distribution.md)",
    "agent_watches": "what the agent watches (create_watch): pages, files, MCP resources (docs/background.md)",
}
DEPRECATED = {("gateway", "log_level")}   # [logging] level says it; the old key still works, with a warning
KEY_NOTES = {
    ("gateway", "state_dir"): "\"\": $GATEWAY_STATE_DIR, else ~/.local/state/agent-gateway",
    ("gateway", "bind_host"): "every actor socket and the admin port listen here only",
    ("gateway", "admin_port"): "0: any free port in 10000-19999",
    ("gateway", "log_file"): "\"\": <state_dir>/gateway.log",
    ("sessions", "shards"): "0: one per core",
    ("cluster", "host_name"): "\"\": the machine's host name",
    ("cluster", "shared"): "true: hosts share [storage]'s PostgreSQL as equals, by lease",
    ("cluster", "lease_s"): "a lost host's leases go to another host after this",
    ("cluster", "partitions"): "the sessions' partitions leased to hosts (the same on every host)",
    ("cluster", "network_is_private"): "true: accept a bind_host and peers outside the private ranges (a VPN)",
    ("cluster", "member_check_s"): "workers check in this often; workers must use the leader's value",
    ("cluster", "member_misses"): "a host silent this many check-ins is lost: (misses + 1) x check_s at most",
    ("agent", "kind"): "\"openai\": any OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp)",
    ("agent", "api_key_env"): "the environment variable holding the key (better than api_key in this file)",
    ("agent", "timeout_s"): "the model may stay silent this long once its answer flows",
    ("agent", "first_token_timeout_s"): "no first chunk of an answer by then: the model is taken for hung (0: off)",
    ("metrics", "port"): "0: the OS picks one (`status` shows it)",
    ("logging", "level"): "debug | info | warning | error; \"\": info",
}
ADAPTER_SAMPLE = """\
# One table per platform connection, [adapters.NAME] (NAME is yours: two Telegram bots are two tables). With none,
# the web chat on http://127.0.0.1:8765/ runs alone. One table per platform below, with the keys it cannot do
# without; every key of each: `run_gateway.py platforms TYPE`; setting one up: its README in actors/adapters/TYPE/.
# access: who may talk to the bot: "open", "pairing" (strangers get a code for `pair approve CODE`), "allowlist".
"""
# Platforms not offered in the sample: the terminal chat is always there; the fake speaks to the test suite's fake.
NOT_IN_SAMPLE = ("cli", "fake")


def adapter_samples() -> list[str]:
    """A commented table for every platform the registry has: its type, its required keys (a placeholder and what
    each is), its access default: made from the registry, so a new platform folder appears here by itself."""
    blocks = []
    for kind, entry in sorted(registry.REGISTRY.items()):
        if kind in NOT_IN_SAMPLE:
            continue
        lines = [f"# [adapters.{kind}]   # {entry.summary}", f'# type = "{kind}"']
        for key, option in entry.options.items():
            if option.default is registry.REQUIRED:
                placeholder = {str: '"..."', int: "0", float: "0.0", bool: "false", list: "[]"}.get(option.kind, '""')
                lines.append(f"# {key} = {placeholder}" + (f"   # {option.doc}" if option.doc else ""))
        lines.append(f'# access = "{entry.access}"')
        blocks.append("\n".join(lines) + "\n")
    return blocks


PROFILES_SAMPLE = """\
# Personas with their own agent ([profiles.NAME]), and the routes that pick one per chat, thread or user
# ([[routes]], most specific wins; `routes explain SOURCE` says why): docs/profiles.md, e.g.
# [profiles.support]
# system_prompt = "You are the support desk. Be brief."
# agent = { model = "small-model", tools = ["clock"] }   # over [agent], key by key
# [[routes]]
# adapter = "support"
# chat = "-1001234567890"
# profile = "support"
# respond = "all"              # in groups: answer every message, not only those addressed to the bot
# A profile's memory: memory = "user" (or "chat", "profile"; default "off") and tools naming "remember", "forget".
# One person on two platforms, their direct chats one conversation ([[identities]]; default: each user their own):
# [[identities]]
# name = "ada"
# members = ["telegram:123456", "discord:812345678901234567"]
"""

CRON_SAMPLE = """\
# Scheduled jobs ([cron.NAME]; docs/cron.md): the prompt runs in the chat's conversation, the answer goes there.
# [cron.morning]
# schedule = "0 9 * * 1-5"     # cron: minute hour day month weekday (a 6th field first: seconds); UTC unless timezone
# prompt = "What is on my calendar today?"
# adapter = "support"          # a configured [adapters.NAME]
# chat = "123456789"
# catch_up = "latest"          # after downtime: "latest" runs the most recent missed time once; "skip" none
"""

MCP_SAMPLE = """\
# MCP servers whose tools the agent offers ([mcp.NAME]; docs/mcp.md): a program over stdio, or a streamable HTTP
# endpoint. env and headers name environment variables holding the values: never a secret in this file.
# [mcp.files]
# command = "npx"
# args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/shared"]
# env = { API_TOKEN = "FILES_API_TOKEN" }
# timeout_s = 30               # one call's bound; past it the call is stopped and the model told
# max_result_chars = 20000     # the longest result text the model reads
# [mcp.search]
# url = "https://mcp.example.com/mcp"
# headers = { Authorization = "SEARCH_MCP_AUTH" }
"""

PLUGINS_SAMPLE = """\
# Plugins (docs/plugins.md): installed ones (entry point group agent_gateway.plugins) run without a table here.
# [plugins.keyword_filter]
# enabled = true               # false: an installed plugin switched off
# module = ""                  # "package.module:object": a plugin not installed as a package
# see_secrets = false          # true: its hooks see configured secrets in the text
# blocked = ["spam"]           # any other key is the plugin's own option
"""


def add_parsers(sub) -> None:
    config = command(sub, "config", "the configuration: init writes a sample, show prints the effective one",
                     "Write a commented sample configuration, or show the one in effect.", "config show")
    csub = config.add_subparsers(dest="action", metavar="ACTION")
    init = command(csub, "init", "write a commented sample configuration (to stdout without FILE)",
                   "Write a sample configuration: every key of every section, commented out at its default, with\n"
                   "notes. Uncomment what you change. Refuses to replace an existing file unless --force.",
                   "config init ~/.config/agent-gateway/gateway.toml\nconfig init > gateway.toml")
    init.add_argument("path", nargs="?", metavar="FILE", help="where to write it (default: print it)")
    init.add_argument("--force", action="store_true", help="replace FILE if it exists")
    show = command(csub, "show", "the configuration in effect, defaults filled in, secrets redacted",
                   "The configuration file as it reads now: its values over the defaults, the state dir resolved,\n"
                   "every secret shown as [redacted]. The first lines say whether the gateway running on this state\n"
                   "dir uses this very reading (or an earlier one: `reload`). TOML, or JSON with --json.",
                   "config show\n--config ./gateway.toml config show --json")
    add_json(config, init, show)


def cmd_config(config: dict | None, args) -> int:
    if getattr(args, "action", None) == "init":
        return _init(args)
    return _show(config, args)


# ------------------------------------------------------------------------------------------------------ init

def sample() -> str:
    lines = ["# agent-gateway configuration (`run_gateway.py config init`). Every key is shown at its default,",
             "# commented out: uncomment and edit what you change. `run_gateway.py config show` prints the result.",
             "# Types and defaults: common/config.py. Found as: --config FILE, else $GATEWAY_CONFIG, else",
             "# ~/.config/agent-gateway/gateway.toml.", ""]
    for section, keys in config_mod.SCHEMA.items():
        if section in config_mod.OPEN_SECTIONS:
            if section == "adapters":
                lines += [ADAPTER_SAMPLE, *adapter_samples()]
            elif section == "profiles":
                lines += [PROFILES_SAMPLE]
            elif section == "cron":
                lines += [CRON_SAMPLE]
            elif section == "mcp":
                lines += [MCP_SAMPLE]
            elif section == "plugins":
                lines += [PLUGINS_SAMPLE]
            continue
        lines.append(f"[{section}]" + (f"   # {SECTION_NOTES[section]}" if section in SECTION_NOTES else ""))
        for key, (_kind, default, allowed) in keys.items():
            if (section, key) in DEPRECATED:
                continue   # honoured, with a warning at start; not offered to a new configuration
            note = KEY_NOTES.get((section, key))
            if note is None and isinstance(allowed, tuple):
                note = " | ".join(toml_value(a) for a in allowed)
            lines.append(f"# {key} = {toml_value(default)}" + (f"   # {note}" if note else ""))
        lines.append("")
    return "\n".join(lines)


def _init(args) -> int:
    text = sample()
    if not args.path:
        print(text, end="")
        return 0
    path = Path(os.path.expanduser(args.path))
    if path.exists() and not args.force:
        return fail(args, f"{path} exists; not replaced (add --force to replace it)", 1, path=str(path))
    if path.is_dir():
        return fail(args, f"{path} is a directory; name the file to write", EX_USAGE, path=str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_private(path, text.encode("utf-8"))
    except OSError as exc:
        return fail(args, f"cannot write {path}: {exc.strerror or exc}", 1, path=str(path))
    return out(args, {"ok": True, "path": str(path.absolute())}, 0,
               f"wrote a sample configuration to {path.absolute()}\n" + next_step(path.absolute()))


def next_step(path: Path) -> str:
    """What to do with a new configuration file: start a gateway on it, or, when one runs already on the state
    directory this file would use, restart that one (a second start would be refused)."""
    option = "" if path == config_mod.default_config_path().expanduser().absolute() else f" --config {path}"
    state_dir = config_mod.resolve_state_dir(config_mod.defaults())
    files = RunFiles(state_dir)
    pid = files.running_pid()
    if not pid:
        return f"edit it, then: run_gateway.py{option} start"
    runs_on = (files.read_runtime() or {}).get("config") or "the embedded defaults"
    return (f"a gateway already runs on {state_dir} (pid {pid}, on {runs_on}): edit the file, then restart it on "
            f"this one: run_gateway.py stop && run_gateway.py{option} start")


# ------------------------------------------------------------------------------------------------------ show

def effective(config: dict) -> dict:
    """What the gateway runs with: ``config`` as loaded (the file over the schema's defaults) with every adapter
    the gateway starts (the implicit terminal one, the default web chat when no [adapters] table is given) filled
    in by the adapter registry, and no secret: the agent's key, every adapter option the registry marks secret and
    every adapter key whose name says token, secret, key or password. ``api_key_env`` names a variable: kept.
    Every URL is shown as its scheme and host (``common.redact.url_origin``)."""
    # An empty [[routes]] has no TOML form (an array of tables is written only by its entries): left out.
    shown = json.loads(json.dumps({k: v for k, v in config.items() if not k.startswith("_")
                                   and not (k in config_mod.LIST_SECTIONS and not v)}))
    shown["adapters"] = json.loads(json.dumps(registry.validate_all(config)))
    if shown["agent"].get("api_key"):
        shown["agent"]["api_key"] = REDACTED
    for profile in shown.get("profiles", {}).values():
        if isinstance(profile.get("agent"), dict) and profile["agent"].get("api_key"):
            profile["agent"]["api_key"] = REDACTED
    for table in shown.get("plugins", {}).values():   # a plugin's own options: the same rule by name
        for name, value in table.items():
            if value and any(word in name for word in SECRET_WORDS):
                table[name] = REDACTED
    for table in shown["adapters"].values():
        options = registry.entry_of(table).options
        for name, value in table.items():
            secret = getattr(options.get(name), "secret", False) or any(word in name for word in SECRET_WORDS)
            if value and secret:
                table[name] = REDACTED
    # A URL option (callback_url, base_url, transcription_url, any other) shows its scheme and host only: its path
    # or query is often a credential (a webhook's secret path, ?key=), and no word in its name says so.
    return redact_urls(shown)


def _show(config: dict, args) -> int:
    shown = effective(config)
    running = _running_reading(config)
    header = show_header(config, running)
    return out(args, {"source": config.get("_source") or None, "config": shown, "running": running,
                      "note": " ".join(line.lstrip("# ") for line in header)}, 0,
               "\n".join(header) + "\n" + toml_text(shown))


def _running_reading(config: dict) -> dict | None:
    """Which reading of which file the gateway running on this state dir uses (``status`` shows the same), or
    None when none runs (or it does not answer)."""
    from daemon.admin import AdminClient, AdminError, NoGateway   # only `config show` attaches
    try:
        client = AdminClient(config)
        facts = client.status(timeout=5.0).detail.get("config") or {}
    except (NoGateway, AdminError):
        return None
    return {"pid": client.runtime["launcher_pid"], **facts}


def show_header(config: dict, running: dict | None) -> list[str]:
    """What ``config show`` shows, said plainly: the file as it reads now, and whether the running gateway runs
    this very reading. Pure."""
    source = config.get("_source") or ""
    lines = [f"# {source} as it reads now, over the defaults; secrets redacted." if source else
             "# The embedded defaults (no configuration file); secrets redacted."]
    if running is None:
        return lines + ["# No gateway runs on this state dir: this is what a start would use."]
    pid, file = running["pid"], running.get("file") or ""
    if file != source:
        return lines + [f"# The running gateway (pid {pid}) uses another file: {file or 'the embedded defaults'} "
                        "(`status` shows which reading)."]
    if running.get("sha256", "") != config.get("_sha256", ""):
        return lines + [f"# The running gateway (pid {pid}) uses an earlier reading of it (sha256 "
                        f"{running.get('sha256', '')[:12]}, this one {config.get('_sha256', '')[:12]}): `reload` "
                        "applies the file, a restart what a reload cannot change."]
    note = f"# The running gateway (pid {pid}) uses this reading (sha256 {config.get('_sha256', '')[:12]})"
    if running.get("generation", 1) > 1:
        note += "; what its last reload listed as needing a restart still runs with the earlier value"
    return lines + [note + "."]


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)   # a JSON string is a TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        pairs = [f"{_key(k)} = {toml_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(pairs) + " }" if pairs else "{}"
    raise TypeError(f"no TOML form for {value!r}")


def _key(name: str) -> str:
    return name if name.replace("_", "").replace("-", "").isalnum() and name.isascii() else json.dumps(name)


def _assignments(table: dict) -> list[str]:
    """``key = value`` lines; TOML has no null, so a key without a value is a comment saying so."""
    return [f"# {_key(k)}: not set" if v is None else f"{_key(k)} = {toml_value(v)}" for k, v in table.items()]


def toml_text(config: dict) -> str:
    """``config`` (sections of keys; open sections of named tables) as TOML that ``tomllib`` reads back equal
    (but for unset keys)."""
    lines = []
    for section, table in config.items():
        if section in config_mod.LIST_SECTIONS:
            for entry in table:
                lines += [f"[[{section}]]", *_assignments(entry), ""]
            continue
        if section in config_mod.OPEN_SECTIONS:
            for name, sub in table.items():
                lines += [f"[{section}.{_key(name)}]", *_assignments(sub), ""]
            if not table:
                lines += [f"[{section}]", ""]
            continue
        lines += [f"[{section}]", *_assignments(table), ""]
    return "\n".join(lines)
