"""The gateway configuration: one TOML file, validated against a schema kept as data.

Where things are found:
  config file   --config PATH, else $GATEWAY_CONFIG, else $XDG_CONFIG_HOME/agent-gateway/gateway.toml
                (~/.config/agent-gateway/gateway.toml). A missing *default* file means "embedded defaults"; a file
                named explicitly must exist.
  state dir     $GATEWAY_STATE_DIR, else [gateway] state_dir, else $XDG_STATE_HOME/agent-gateway
                (~/.local/state/agent-gateway). Holds the database, the pid and runtime files, the daemon log.

Every error names the file, the key and the reason; the launcher exits with 78 (EX_CONFIG) and starts nothing.
"""
from __future__ import annotations

import contextlib
import copy
import difflib
import hashlib
import ipaddress
import os
import time
import tomllib
import urllib.parse
from pathlib import Path
from typing import Any

from common.cluster import join_refusal

EX_CONFIG = 78
ANY_TABLE = "table"  # a table whose keys are not fixed here (an adapter's settings are checked by that adapter)

# section -> key -> (type, default, allowed values or None)
SCHEMA: dict[str, dict[str, tuple]] = {
    "gateway": {
        "state_dir": (str, "", None),
        "bind_host": (str, "127.0.0.1", None),
        # A bind_host off loopback exposes the actor ports (pickles: code execution) to that network. Only for a
        # private network of the gateway's own hosts (docs/security.md); refused (exit 78) unless this is true.
        "allow_non_loopback": (bool, False, None),
        "admin_port": (int, 17811, None),   # 0: any free one, 10000-19999 (recorded in <state>/run/runtime.json)
        "log_level": (str, "", ("", "debug", "info", "warning", "error")),   # deprecated: [logging] level
        "log_file": (str, "", None),
        "ready_timeout_s": (float, 60.0, None),
        # An HTTP connection (web chat, HTTP API, webhooks, metrics) that has not sent a whole request within this
        # long of opening or of its last answer is closed; a request body must arrive within it too.
        "http_request_timeout_s": (float, 10.0, None),
        # The open HTTP connections (and web chat websockets) one client address may hold on each of the
        # gateway's servers; one more is reset as it is accepted. 0: no cap (behind a reverse proxy, where every
        # client has the proxy's address).
        "http_connections_per_client": (int, 64, range(0, 100_001)),
        # The longest message the gateway takes from a chat, on every platform adapter: longer ones get a reply
        # saying so (an HTTP sender a 413) and never become a turn. Bounds what one message costs agent and store.
        "max_text_chars": (int, 16_000, range(1, 100_001)),
        # Stop cleanly (exit 0) after this many seconds without platform traffic and with no work in flight, for a
        # gateway its service manager starts on demand (docs/background.md, "Scale to zero"). 0: never. Only
        # platforms that call a server of ours may be configured with it (actors/adapters/on_demand.py).
        "idle_exit_s": (float, 0.0, None),
    },
    "supervision": {
        "max_restarts": (int, 5, None),
        "period_s": (float, 30.0, None),
        "backoff_base_s": (float, 0.02, None),
        "backoff_max_s": (float, 5.0, None),
        "liveness_check_s": (float, 2.0, None),   # supervisors look for children whose exit notice was lost
    },
    "watchdog": {
        "interval_s": (float, 5.0, None),
        "ping_deadline_s": (float, 10.0, None),
        "drain_timeout_s": (float, 30.0, None),
        "shutdown_timeout_s": (float, 10.0, None),
    },
    "storage": {
        "durability": (str, "normal", ("normal", "full")),
        "max_import_bytes": (int, 64 * 1024 * 1024, None),   # `sessions import` refuses larger files
        # Answered inbox rows are kept this long: the dedup that tells a platform's re-delivery from a new message
        # (Telegram keeps undelivered updates 24 h; webhook senders retry for hours at most). Then pruned.
        "inbox_retention_days": (float, 7.0, None),
        # Where the state lives (storage/location.py): "sqlite", the file gateway.db in the state dir, or
        # "postgresql", the database of ``dsn`` (a libpq URL without its password), the password read from
        # password_file (readable by this user only), else from the environment variable named by password_env.
        "backend": (str, "sqlite", ("sqlite", "postgresql")),
        "dsn": (str, "", None),
        "password_env": (str, "GATEWAY_DB_PASSWORD", None),
        "password_file": (str, "", None),
    },
    "delivery": {
        "sweep_interval_s": (float, 30.0, None),   # how often the sweeper looks for replies whose owner died
        # how often it applies retention (old obligations, answered inbox rows, unreferenced media files)
        "housekeeping_interval_s": (float, 3600.0, None),
    },
    "sessions": {
        "idle_s": (float, 600.0, None),
        "shards": (int, 0, None),        # session shard processes; 0: one per core
        "max_live": (int, 10_000, None),  # live session cells per shard; past it new chats wait for a slot
        "busy_mode": (str, "queue", ("queue", "interrupt", "steer", "collect")),
        "collect_window_s": (float, 2.0, None),
        "resume_window_s": (float, 3600.0, None),
        "max_resumes": (int, 3, None),   # resumes of a turn cut by restarts before the chat is told to send it again
        # The liveness bound: a stored message that no turn has taken this long after it arrived (and whose session
        # runs no turn) is late: logged, counted (gateway_inbox_late) and its session rung again by the sweeper.
        "answer_bound_s": (float, 60.0, None),
        "per_user_in_groups": (bool, False, None),
        # the first line of a reply sent again after a restart left an unfinished copy the gateway cannot edit
        "resent_marker": (str, "↻ re-sent after a restart; an unfinished copy may appear above", None),
        # Reactions on the user's message where the platform has them: "WORKING ANSWERED", e.g. "👀 👍" (Telegram
        # takes only its own list of emoji); "": none (actors/sessions/reply_status.py).
        "status_reactions": (str, "", None),
    },
    "agent": {
        "kind": (str, "", ("", "offline", "openai")),
        "base_url": (str, "", None),
        "model": (str, "", None),
        "api_key_env": (str, "OPENAI_API_KEY", None),
        "api_key": (str, "", None),
        "timeout_s": (float, 120.0, None),
        # From a request to the first chunk of its answer (actors/agents/openai_compat.py); 0: timeout_s only.
        "first_token_timeout_s": (float, 30.0, None),
        "system_prompt": (str, "You are a helpful assistant.", None),
        "chunk_delay_s": (float, 0.03, None),
    },
    "media": {            # docs/media.md
        # An OpenAI-compatible server's base URL (…/v1) whose /audio/transcriptions turns voice notes and audio
        # into text for the model; "": none (the model is told a voice note came, and its length).
        "transcription_url": (str, "", None),
        "transcription_model": (str, "whisper-1", None),
        "transcription_api_key_env": (str, "OPENAI_API_KEY", None),
        "transcription_timeout_s": (float, 60.0, None),
        # An OpenAI-compatible server's base URL (…/v1) whose /audio/speech reads answers aloud, for the profiles
        # with voice_replies = true, in answer to a voice note (actors/media/speech.py); "": none.
        "speech_url": (str, "", None),
        "speech_model": (str, "tts-1", None),
        "speech_voice": (str, "alloy", None),
        "speech_format": (str, "opus", ("opus", "mp3", "aac")),   # opus: OGG Opus, what Telegram shows as a voice note
        "speech_api_key_env": (str, "OPENAI_API_KEY", None),
        "speech_timeout_s": (float, 30.0, None),
        "speech_max_chars": (int, 4096, range(1, 4097)),
        # The media cache's byte quota (photos, documents, uploads; storage/media.py): past it the oldest files
        # are evicted. 0: no quota (then only the retention sweep frees space).
        "cache_max_bytes": (int, 1024 ** 3, range(0, 2 ** 62)),
    },
    "logging": {          # common/logging_setup.py; docs/operations.md
        "format": (str, "text", ("text", "json")),
        "level": (str, "", ("", "debug", "info", "warning", "error")),  # "": info (or the old [gateway] log_level)
    },
    "adapters": {},       # [adapters.NAME] tables, each with type = "..."; checked by the adapter registry
    "profiles": {},       # [profiles.NAME] tables; checked by actors/profiles/profiles.py
    "mcp": {},            # [mcp.NAME] tables: MCP servers for the agent; checked by common/mcp_config.py (check_whole)
    "cron": {},           # [cron.NAME] tables: scheduled jobs, checked by actors/scheduling/jobs.py (docs/cron.md)
    "watch": {},          # [watch.NAME] tables: URLs and files watched, actors/scheduling/watches.py (docs/background.md)
    "debug": {
        "fault_injection": (bool, False, None),
        "crash_on_start": (str, "", None),
    },
    "hooks": {            # plugins' hooks: actors/hooks/; docs/plugins.md
        "entry_points": (bool, True, None),   # run the plugins installed in the agent_gateway.plugins group
        "timeout_s": (float, 2.0, None),      # a hook's time bound; past it the message goes on without it
        "threads": (int, 2, range(1, 33)),    # worker threads per plugin (per process)
    },
    "plugins": {},        # [plugins.NAME] tables: enabled, module, see_secrets, timeout_s, the plugin's options
    "cluster": {          # other hosts in this gateway's Thespian convention; docs/distribution.md
        # This daemon leads a convention: workers join it at [gateway] bind_host:admin_port (a private address).
        "enabled": (bool, False, None),
        "host_name": (str, "", None),   # "": the machine's host name; shown in `tree` and `status`
        # Convention traffic is pickles, signed but not encrypted: bind_host must be a private address, and remote
        # peers are taken from private addresses only, unless this says the network is private already (a VPN on
        # public addresses): the leader's side of `join --network-is-private`.
        "network_is_private": (bool, False, None),
        # The secret every host of the convention shares (the same on the leader and each worker): every actor
        # frame between them carries an HMAC under a key derived from it (docs/security.md). Read from the
        # environment variable named here, or from secret_file (which must be readable by this user only).
        "secret_env": (str, "GATEWAY_CLUSTER_SECRET", None),
        "secret_file": (str, "", None),
        # Failure detection: members re-register every member_check_s seconds (up to two periods apart); one
        # silent for member_misses periods is declared gone: within (misses + 1) x check, 20 s by default
        # (Thespian's own defaults make ~22 minutes). Workers must use the leader's values.
        "member_check_s": (int, 5, range(1, 3600)),
        "member_misses": (int, 3, range(2, 100)),
        # Session shards the leader runs on each worker that offers them (0: none; every session stays on the
        # leader). Not complete yet (docs/distribution.md): a worker's shards take new chats' messages and answer
        # them, but keys that move when a worker joins do not take their transcripts along.
        "shards_per_worker": (int, 0, range(0, 257)),
        # Hosts that share one PostgreSQL ([storage] backend = "postgresql") as equals, without a convention: each
        # runs the whole tree, one host at a time holds each polled platform connection and each partition of the
        # sessions, by lease (docs/distribution.md). A lost host's leases expire after lease_s; another host takes
        # them. Every host must use the same lease_s and partitions.
        "shared": (bool, False, None),
        "lease_s": (float, 10.0, None),
        "partitions": (int, 32, range(1, 4097)),
    },
    "metrics": {          # actors/metrics.py; docs/metrics.md
        "enabled": (bool, True, None),
        "host": (str, "", None),        # "": [gateway] bind_host
        "port": (int, 9464, None),      # 0: the OS picks one (runtime.json and `status` show it)
    },
    "agent_watches": {    # the watches the agent creates with its create_watch tool (docs/background.md)
        "max_per_chat": (int, 5, range(1, 101)),
        "min_interval_s": (float, 300.0, None),   # 1 to 604800: the shortest interval the agent may ask for
        # A URL whose host is (or resolves to) a loopback, private, link-local or reserved address is refused:
        # a chat must not make the gateway read its own network. True only where that network is the chat's own.
        "allow_private_hosts": (bool, False, None),
        # Directories whose files the agent may watch (absolute paths); none by default: a chat must not read the
        # gateway's own files. A file is taken only when its real path (links resolved) lies under one of them.
        "file_roots": (list, [], None),
    },
    "console": {          # actors/console/; docs/console.md
        "enabled": (bool, True, None),
        "host": (str, "127.0.0.1", None),   # off loopback only with a login_token (checked below)
        "port": (int, 8770, None),          # 0: the OS picks one (the log and <state>/run/console.json say which)
        "login_token": (str, "", None),     # the link /?token=... logs a browser in; required off loopback
        "allow_actions": (bool, False, None),   # false: read-only (every action answered 403)
    },
}
OPEN_SECTIONS = {"adapters", "profiles", "cron", "watch", "plugins", "mcp"}
# [[routes]]: an array of tables, kept as written here and checked by actors/profiles/routes.py (docs/profiles.md).
LIST_SECTIONS = {"routes"}
# [[identities]]: user ids linked across platforms, checked by actors/profiles/identities.py (docs/profiles.md).
LIST_SECTIONS |= {"identities"}
TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


class ConfigError(Exception):
    """What is wrong with a configuration: the file, the key and the reason of the first error, and in ``more`` the
    further errors the same reading found (the schema check reports every one, not only the first)."""

    def __init__(self, file: str, key: str, reason: str, more: tuple = ()):
        self.file, self.key, self.reason, self.more = file, key, reason, tuple(more)
        super().__init__(f"{file}: {key}: {reason}")

    def every(self) -> list["ConfigError"]:
        return [self, *self.more]


def did_you_mean(name: Any, known) -> str:
    """``, did you mean 'admin_port'?`` naming the likeliest intended of ``known``; "" when none is close."""
    close = difflib.get_close_matches(str(name), sorted(str(k) for k in known), n=1, cutoff=0.6)
    return f", did you mean {close[0]!r}?" if close else ""


def unknown_name(kind: str, name: str, known) -> str:
    """The reason for an unknown key or section, with the likeliest intended one: ``unknown key, did you mean
    'admin_port'? (known keys: ...)``."""
    known = sorted(str(k) for k in known)
    return f"unknown {kind}{did_you_mean(name, known)} (known{' keys' if kind.startswith('key') else ''}: " \
           f"{', '.join(known)})"


@contextlib.contextmanager
def gathering(errors: list):
    """Inside, a ConfigError (with its ``more``) is added to ``errors`` instead of raised: a check goes on past its
    first error, so that one reading reports every one (``raise_gathered`` at the end)."""
    try:
        yield
    except ConfigError as exc:
        errors.extend(exc.every())


def raise_gathered(errors: list) -> None:
    """One ConfigError naming each of ``errors`` once, in order (its ``more``); nothing when there is none."""
    unique = list({(e.file, e.key, e.reason): e for e in errors}.values())
    if unique:
        raise ConfigError(unique[0].file, unique[0].key, unique[0].reason, unique[1:])


def setting(config: dict, section: str, key: str) -> Any:
    """``config[section][key]``, or the schema's default when the (partial) config lacks it: the schema is the one
    place a default is written, so readers never restate one."""
    table = config.get(section)
    if isinstance(table, dict) and key in table:
        return table[key]
    return SCHEMA[section][key][1]


def default_config_path() -> Path:
    if os.environ.get("GATEWAY_CONFIG"):
        return Path(os.environ["GATEWAY_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "agent-gateway" / "gateway.toml"


def defaults() -> dict:
    return {**{section: {key: spec[1] for key, spec in keys.items()} for section, keys in SCHEMA.items()},
            **{section: [] for section in LIST_SECTIONS}}


def load(path: str | None = None, lenient: bool = False) -> dict:
    """The configuration in effect, or ConfigError. ``lenient`` (``doctor``, which has reported the errors): never
    raise for the file's content; what of it checks is kept, the rest is the defaults."""
    explicit = path is not None or bool(os.environ.get("GATEWAY_CONFIG"))
    file = Path(path).expanduser() if path else default_config_path()
    raw: dict = {}
    digest = ""
    errors: list[ConfigError] = []
    try:
        if file.exists():
            try:
                data = file.read_bytes()
                digest = hashlib.sha256(data).hexdigest()
                raw = tomllib.loads(data.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise ConfigError(str(file), "(syntax)", f"not UTF-8 text: {exc}") from None
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(str(file), "(syntax)", str(exc)) from None
            except OSError as exc:
                raise ConfigError(str(file), "(file)", f"cannot read: {exc.strerror}") from None
        elif explicit:
            raise ConfigError(str(file), "(file)", "no such file")
    except ConfigError as exc:
        if not lenient:
            raise
        errors.append(exc)
    config, found = _validated(raw, str(file) if file.exists() else "(defaults)")
    errors += found
    if errors and not lenient:
        raise ConfigError(errors[0].file, errors[0].key, errors[0].reason, errors[1:])
    config["gateway"]["state_dir"] = str(resolve_state_dir(config))
    config["_source"] = str(file.expanduser().absolute()) if file.exists() else ""
    # Which reading of the file this is, for `status` and `reload` (actors/config_reload.py): the file's sha256,
    # when it was read, and the generation (1 at start; each reload that lands adds one).
    config["_sha256"], config["_loaded_at"], config["_generation"] = digest, time.time(), 1
    return config


def validate(raw: dict, file: str) -> dict:
    """The configuration ``raw`` describes, defaults filled in; ConfigError naming every error (``more``)."""
    config, errors = _validated(raw, file)
    if errors:
        raise ConfigError(errors[0].file, errors[0].key, errors[0].reason, errors[1:])
    return config


def _validated(raw: dict, file: str) -> tuple[dict, list[ConfigError]]:
    """(the configuration with every value that checks, defaults for the rest; every error found). A typo is
    rarely alone: each bad key or section is reported, not only the first."""
    config, errors = defaults(), []
    for section, table in raw.items():
        try:
            _take_section(config, section, table, file, errors)
        except ConfigError as exc:
            errors.append(exc)
    if not errors:   # these read values the schema has checked
        checks = (lambda: _check_bind_host(file, config["gateway"]), lambda: _check_console(file, config["console"]),
                  lambda: _check_cluster(file, config), lambda: _check_storage(file, config["storage"]),
                  lambda: _check_file_roots(file, config["agent_watches"]["file_roots"]))
        for check in checks:
            try:
                check()
            except ConfigError as exc:
                errors.append(exc)
    return config, errors


def _take_section(config: dict, section: str, table: Any, file: str, errors: list) -> None:
    if section in LIST_SECTIONS:
        if not isinstance(table, list) or not all(isinstance(entry, dict) for entry in table):
            raise ConfigError(file, section, f"must be an array of tables, e.g. [[{section}]]")
        config[section] = copy.deepcopy(table)
        return
    if section not in SCHEMA:
        raise ConfigError(file, section, unknown_name("section", section, SCHEMA))
    if not isinstance(table, dict):
        raise ConfigError(file, section, "must be a table, e.g. [%s]" % section)
    if section in OPEN_SECTIONS:
        for name, sub in table.items():
            if not isinstance(sub, dict):
                raise ConfigError(file, f"{section}.{name}", f"must be a table, e.g. [{section}.{name}]")
        config[section] = copy.deepcopy(table)
        return
    for key, value in table.items():
        where = f"[{section}] {key}"
        try:
            if key not in SCHEMA[section]:
                raise ConfigError(file, where, unknown_name("key", key, SCHEMA[section]))
            config[section][key] = _check(file, where, value, SCHEMA[section][key])
        except ConfigError as exc:
            errors.append(exc)


def _check_file_roots(file: str, roots: list) -> None:
    """The directories whose files the agent may watch: absolute paths, none the whole file system."""
    for root in roots:
        if not isinstance(root, str) or not os.path.isabs(root) or os.path.realpath(root) == "/":
            raise ConfigError(file, "[agent_watches] file_roots", f"takes absolute directories other than /, got "
                                                                  f"{root!r}")


def _check_storage(file: str, storage: dict) -> None:
    """A PostgreSQL backend names its database by a URL, and its password never sits in this file."""
    if storage["backend"] != "postgresql":
        return
    dsn = storage["dsn"]
    if not dsn.startswith(("postgresql://", "postgres://")):
        raise ConfigError(file, "[storage] dsn", "backend \"postgresql\" needs the database's URL, e.g. "
                                                 "postgresql://gateway@db.internal:5432/gateway")
    parts = urllib.parse.urlsplit(dsn)
    if parts.password is not None or "password" in urllib.parse.parse_qs(parts.query):
        raise ConfigError(file, "[storage] dsn", "must not hold the password: put it in [storage] password_file "
                                                 "or the environment variable named by [storage] password_env")


def _check_cluster(file: str, config: dict) -> None:
    cluster = config["cluster"]
    if cluster["shared"] and config["storage"]["backend"] != "postgresql":
        raise ConfigError(file, "[cluster] shared", "hosts share state through PostgreSQL: set [storage] backend = "
                                                    "\"postgresql\" and its dsn (docs/distribution.md)")
    if cluster["shared"] and cluster["enabled"]:
        raise ConfigError(file, "[cluster] shared", "a host sharing the database is not a convention's leader: set "
                                                    "[cluster] enabled = false (docs/distribution.md)")
    if not 2.0 <= cluster["lease_s"] <= 300.0:
        raise ConfigError(file, "[cluster] lease_s", "must be between 2 and 300 seconds (default 10): how long a "
                                                     "lost host keeps what it held")
    host = config["gateway"]["bind_host"]
    if config["cluster"]["enabled"] and (host == "localhost" or ipaddress.ip_address(host).is_loopback):
        raise ConfigError(file, "[cluster] enabled",
                          f"workers cannot reach a leader on {host}: set [gateway] bind_host to this host's address "
                          "on the private network (and allow_non_loopback = true; docs/distribution.md)")
    if config["cluster"]["enabled"] and not config["cluster"]["network_is_private"]:
        refusal = join_refusal(host, network_is_private=False)
        if refusal:
            raise ConfigError(file, "[gateway] bind_host", refusal.replace("pass --network-is-private",
                                                                          "set [cluster] network_is_private = true")
                              .replace("(--bind)", "([gateway] bind_host)"))
    if config["cluster"]["enabled"] and config["gateway"]["admin_port"] == 0:
        raise ConfigError(file, "[gateway] admin_port", "workers join the leader at its admin port: with [cluster] "
                          "enabled it must be a fixed port, not 0")


def _is_loopback(file: str, where: str, host: str) -> bool:
    """Whether ``host`` (an IP address, or localhost) is a loopback address; anything else is a ConfigError."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise ConfigError(file, where, f"must be an IP address (e.g. 127.0.0.1), got {host!r}") from None


def _check_console(file: str, console: dict) -> None:
    """The console shows every chat and may act on the gateway: off loopback it needs its login."""
    host = console["host"]
    if not _is_loopback(file, "[console] host", host) and console["enabled"] and not console["login_token"]:
        raise ConfigError(file, "[console] login_token",
                          f"the console on {host} (off loopback) needs a login_token: anyone on that network could "
                          "read every chat otherwise (docs/console.md)")


def _check_bind_host(file: str, gateway: dict) -> None:
    host = gateway["bind_host"]
    if not _is_loopback(file, "[gateway] bind_host", host) and not gateway["allow_non_loopback"]:
        raise ConfigError(file, "[gateway] bind_host",
                          f"{host} is not a loopback address: the actor ports would accept code from that network. "
                          "Set [gateway] allow_non_loopback = true only on a private network of the gateway's own "
                          "hosts (docs/security.md)")


def _check(file: str, where: str, value: Any, spec: tuple) -> Any:
    kind, _default, allowed = spec
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if not ok:
        raise ConfigError(file, where, f"expected {TYPE_NAMES[kind]}, got {value!r}")
    if isinstance(allowed, range) and value not in allowed:
        raise ConfigError(file, where, f"must be between {allowed.start} and {allowed.stop - 1}, got {value!r}")
    if allowed is not None and value not in allowed:
        raise ConfigError(file, where, f"must be one of {', '.join(repr(a) for a in allowed if a)}, got {value!r}")
    if kind in (int, float) and value < 0:
        raise ConfigError(file, where, f"must not be negative, got {value!r}")
    return value


def resolve_state_dir(config: dict) -> Path:
    env = os.environ.get("GATEWAY_STATE_DIR")
    if env:
        return Path(env).expanduser().resolve()
    if config["gateway"]["state_dir"]:
        return Path(config["gateway"]["state_dir"]).expanduser().resolve()
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return (Path(base) / "agent-gateway").resolve()
