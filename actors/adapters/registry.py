"""The adapter registry: which platforms exist, which actor runs each, and what its ``[adapters.NAME]`` table holds.

A platform is one folder, ``actors/adapters/<type>/``, whose ``platform.py`` declares a ``Platform``
(actors/adapters/spec.py: its options, access default, checks, capabilities and pacing). ``REGISTRY`` is made by
finding those files (``discover``): adding a platform edits nothing here. Everything else (child specs, config
validation, secret redaction, pacing, ``run_gateway.py platforms``) follows from the entry.

    [adapters.support_bot]       NAME: the adapter's name in the tree, its inbox platform and its offset key
    type = "telegram"            picks the Platform
    profile = "default"          every adapter takes these common keys
    pacing = { edit_interval_s = 2.0 }
    token = "123:abc"            then the keys of its type

Errors are ``ConfigError(file, "[adapters.NAME] key", reason)``, like every other configuration error.
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
from typing import Any, Mapping, Optional

import actors.adapters as adapters_package
from actors.adapters.access import MODES, pairing_problems
from actors.adapters.pacing import DEFAULT_PACING, PlatformPacing
from actors.adapters.sender_limits import limit_problems
from actors.adapters.spec import REQUIRED, Option, Platform
from actors.profiles.profiles import profile_streams
from common.config import TYPE_NAMES, ConfigError, unknown_name

ADAPTER_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")  # also a session-key and log-friendly platform name
PACING_FIELDS = {f.name: f.type for f in dataclasses.fields(PlatformPacing) if f.name != "platform"}

COMMON_OPTIONS: dict[str, Option] = {
    "type": Option(str, doc="which platform (a key of REGISTRY: `run_gateway.py platforms` lists them)"),
    "profile": Option(str, "default", doc="the profile whose sessions this adapter's chats belong to"),
    "pacing": Option(dict, {}, doc="overrides of this platform's PlatformPacing fields"),
    "access": Option(str, "", allowed=("",) + MODES, doc="who may talk to the agent: open | allowlist | pairing "
                                                         "(empty: the platform's default; docs/access.md)"),
    "allow": Option(list, [], doc="platform user ids always admitted"),
    "pairing": Option(dict, {}, doc="{ ttl_s, max_codes, lockout_s } of pairing codes"),
    "limits": Option(dict, {}, doc="{ per_minute, burst, max_queued_turns } per sender (default 30, 10, 10; "
                                   "per_minute = 0: no limit)"),
    "max_silence_s": Option(float, 0.0, doc="an intake that believes itself connected and shows no progress for "
                            "this long is restarted (0: the platform's own bound, from its heartbeat or poll wait; "
                            "docs/adapters.md, liveness)"),
}

REGISTRY: dict[str, Platform] = {}


def register(entry: Platform) -> Platform:
    clash = set(entry.options) & set(COMMON_OPTIONS)
    if clash:
        raise ValueError(f"adapter type {entry.type!r} redefines common options {sorted(clash)}")
    REGISTRY[entry.type] = entry
    return entry


def discover() -> dict[str, Platform]:
    """Register the ``PLATFORM`` of every platform folder (a sub-package of actors.adapters with a ``platform.py``).
    A folder's ``platform.py`` imports only declarations (spec.py, pacing.py): finding every platform costs
    milliseconds and loads no client library; the adapter's own module is imported where an adapter runs."""
    for info in pkgutil.iter_modules(adapters_package.__path__):
        if not info.ispkg:
            continue
        try:
            module = importlib.import_module(f"{adapters_package.__name__}.{info.name}.platform")
        except ModuleNotFoundError as exc:
            if exc.name == f"{adapters_package.__name__}.{info.name}.platform":
                continue     # a package of shared parts, not a platform
            raise
        entry = getattr(module, "PLATFORM", None)
        if not isinstance(entry, Platform):
            raise TypeError(f"{module.__name__} has no PLATFORM = Platform(...)")
        if entry.type != info.name:
            raise ValueError(f"{module.__name__} registers type {entry.type!r}: a platform's folder is named by "
                             "its type")
        register(entry)
    return REGISTRY


discover()

# The terminal (``run_gateway.py chat``) is always there unless a [adapters.cli] table says otherwise.
IMPLICIT_ADAPTERS = {"cli": {"type": "cli"}}
# With no [adapters] at all, the embedded default: the web chat on http://127.0.0.1:8765/.
DEFAULT_ADAPTERS = {"web": {"type": "webchat"}}


def pacing_for(platform: str, overrides: Optional[Mapping[str, Any]] = None) -> PlatformPacing:
    """The pacing of platform type ``platform`` (DEFAULT_PACING if no folder declares it), with configured field
    overrides applied."""
    entry = REGISTRY.get(platform)
    base = entry.pacing if entry is not None else dataclasses.replace(DEFAULT_PACING, platform=platform)
    return dataclasses.replace(base, **dict(overrides)) if overrides else base


# ------------------------------------------------------------------------------------------------- validation

def config_file(config: Mapping) -> str:
    return config.get("_source") or "(configuration)"


def lookup(name: str, table: Mapping, file: str = "(configuration)") -> Platform:
    kind = table.get("type")
    if kind is None:
        raise ConfigError(file, f"[adapters.{name}] type", f"missing (known types: {', '.join(sorted(REGISTRY))})")
    if not isinstance(kind, str) or kind not in REGISTRY:
        raise ConfigError(file, f"[adapters.{name}] type",
                          f"unknown adapter type {kind!r} (known types: {', '.join(sorted(REGISTRY))})")
    return REGISTRY[kind]


def validate_adapter(name: str, table: Mapping, file: str = "(configuration)") -> dict:
    """The table with every key checked and defaults filled in; raises ConfigError naming every unknown, missing or
    mistyped key (``more``), else the first problem the platform's own checks find."""
    if not isinstance(name, str) or not ADAPTER_NAME.fullmatch(name):
        raise ConfigError(file, f"[adapters.{name}]",
                          "adapter names must be 1-32 of a-z, 0-9, '_' or '-', starting with a letter or digit")
    if not isinstance(table, Mapping):
        raise ConfigError(file, f"[adapters.{name}]", "must be a table")
    entry = lookup(name, table, file)
    options = {**COMMON_OPTIONS, **entry.options}
    errors = [ConfigError(file, f"[adapters.{name}] {key}", unknown_name(f"key for type {entry.type!r}", key, options))
              for key in table if key not in options]
    out = {}
    for key, option in options.items():
        where = f"[adapters.{name}] {key}"
        try:
            if key not in table:
                if option.default is REQUIRED:
                    raise ConfigError(file, where, f"missing (required for type {entry.type!r})")
                out[key] = option.default
                continue
            out[key] = _checked(file, where, table[key], option)
        except ConfigError as exc:
            errors.append(exc)
    if errors:
        raise ConfigError(errors[0].file, errors[0].key, errors[0].reason, errors[1:])
    _check_pacing(file, name, out["pacing"])
    _check_access(file, name, out)
    for check in entry.checks:
        if (problem := check(out)) is not None:
            raise ConfigError(file, f"[adapters.{name}] {problem[0]}", problem[1])
    return out


def _check_access(file: str, name: str, args: Mapping) -> None:
    for user in args["allow"]:
        if isinstance(user, bool) or not isinstance(user, (str, int)) or not str(user).strip():
            raise ConfigError(file, f"[adapters.{name}] allow", f"user ids are strings or integers, got {user!r}")
    for problem in pairing_problems(args["pairing"]):
        raise ConfigError(file, f"[adapters.{name}] pairing", problem)
    for problem in limit_problems(args["limits"]):
        raise ConfigError(file, f"[adapters.{name}] limits", problem)


def _checked(file: str, where: str, value: Any, option: Option) -> Any:
    kind = option.kind
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
        shown = "[redacted]" if option.secret else repr(value)
        raise ConfigError(file, where, f"expected {TYPE_NAMES.get(kind, 'a table')}, got {shown}")
    if option.allowed is not None and value not in option.allowed:
        raise ConfigError(file, where, f"must be one of {', '.join(map(repr, option.allowed))}")
    if kind in (int, float) and value < 0:
        raise ConfigError(file, where, f"must not be negative, got {value!r}")
    if kind is str and option.default is REQUIRED and not value.strip():
        raise ConfigError(file, where, "must not be empty")
    return value


def _check_pacing(file: str, name: str, overrides: Mapping) -> None:
    for key, value in overrides.items():
        where = f"[adapters.{name}] pacing.{key}"
        if key not in PACING_FIELDS:
            raise ConfigError(file, where, f"unknown pacing field (known: {', '.join(sorted(PACING_FIELDS))})")
        declared = PACING_FIELDS[key]  # annotations are strings here: "int", "Optional[float]", ...
        wanted = bool if declared == "bool" else str if declared == "str" else int if declared == "int" else float
        ok = isinstance(value, wanted) or (wanted is float and isinstance(value, int))
        if not ok or (wanted is not bool and isinstance(value, bool)):
            raise ConfigError(file, where, f"expected {TYPE_NAMES[wanted]}, got {value!r}")


def validate_all(config: Mapping) -> dict:
    """Every [adapters.NAME] table, validated: {name: args}. Meant for config loading too (exit 78 early); the
    ConfigError names the errors of every table, not only of the first bad one."""
    file = config_file(config)
    tables = {**IMPLICIT_ADAPTERS, **(config.get("adapters") or DEFAULT_ADAPTERS)}
    validated, errors = {}, []
    for name, table in tables.items():
        try:
            validated[name] = validate_adapter(name, table, file)
        except ConfigError as exc:
            errors += exc.every()
    if errors:
        raise ConfigError(errors[0].file, errors[0].key, errors[0].reason, errors[1:])
    return validated


# ------------------------------------------------------------------------------------- what an adapter reads

def entry_of(args: Mapping) -> Platform:
    return REGISTRY[args["type"]]


def secret_values(args: Mapping) -> list[str]:
    """The configured secret values of an adapter (tokens, signing keys), for ``common.redact.redact``."""
    options = entry_of(args).options
    values = []
    for key, opt in options.items():
        value = args.get(key) if opt.secret else None
        if value:
            values.extend(str(v) for v in value) if isinstance(value, (list, tuple)) else values.append(str(value))
    return values


def pacing_of(args: Mapping) -> PlatformPacing:
    """The pacing of a validated table: its platform's row, what the table's options decide of it, then the
    table's ``pacing`` overrides."""
    decided = entry_of(args).table_pacing
    return pacing_for(args["type"], {**(decided(args) if decided else {}), **(args.get("pacing") or {})} or None)


def reply_pacing(config: dict, adapter: str, platform: str, stream: bool | None = None, profile: str | None = None):
    """The adapter's pacing: its registry entry's table with the [adapters.NAME] pacing overrides applied; for a
    reply of a profile with ``stream = false``, paced as on a platform without edits: sent once, complete."""
    pacing = _configured_pacing(config, adapter, platform)
    streams = stream if stream is not None else (not profile or profile_streams(config, profile))
    if not streams:   # as the turn's start had it (actors/sessions/turn.py consumer_args), else as configured
        pacing = dataclasses.replace(pacing, supports_edit=False)
    return pacing


_PACING_SEEN: dict[tuple[int, str], tuple[dict, PlatformPacing]] = {}   # (id(config), adapter) -> (config, pacing)


def _configured_pacing(config: dict, adapter: str, platform: str) -> PlatformPacing:
    """The adapter's pacing under ``config``, worked out once per configuration (every reply asks; validating every
    adapter table for it cost a reply more than cutting its text). A reload brings a new config object."""
    seen = _PACING_SEEN.get((id(config), adapter))
    if seen is not None and seen[0] is config:
        return seen[1]
    table = validate_all(config).get(adapter)
    pacing = pacing_of(table) if table is not None else pacing_for(platform)
    if len(_PACING_SEEN) >= 64:
        _PACING_SEEN.clear()
    _PACING_SEEN[(id(config), adapter)] = (config, pacing)
    return pacing
