"""Reloading the configuration file into a running gateway (``run_gateway.py reload``, SIGHUP): pure functions.

A reload reads the file the gateway started with and checks it whole, exactly as a start does (``check_whole``:
the schema, the adapter tables, the profiles and routes, the cron jobs). An invalid file is refused whole: nothing
changes, and the error names the file and the key.

What a reload changes (``LIVE``), for new turns only: the routes, the profiles (persona, agent, tools, busy mode,
streaming, status reactions, and whatever else a profile table holds), ``[agent]`` (the default profile's agent,
and what every profile starts from), the ``[sessions]`` keys that are profile defaults, the cron jobs and the
watches (``[watch.NAME]``, actors/watcher.py). Every other setting is taken when a process starts (an adapter's
token and ports, bind addresses, the state directory, the shard count, the supervision and watchdog timings): a
reload that changes one of them applies the rest, keeps the running value of those, and reports each as needing a
restart (``Reload.needs_restart``).

A reload cannot bring a secret the gateway did not start with (a new inline ``api_key``, or a key variable it did
not read): the log filter of every process was given the secrets at start, so a new one could reach the log. Such a
file is refused, saying so; a restart applies it.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass

from common.config import ConfigError, gathering, load, raise_gathered
from common.mcp_config import check_servers
from common.redact import configured_secrets
from actors.adapters import registry
from actors.adapters.on_demand import check_idle_exit
from actors.profiles.identities import load_identities
from actors.profiles.routes import load_routes
from actors.scheduling.jobs import validate_jobs
from actors.scheduling.watches import validate_watches
from actors.hooks.plugins import validate_plugins

# Whole sections taken from the new file.
LIVE_SECTIONS = ("agent", "profiles", "routes", "identities", "cron", "mcp", "watch")
# Keys of other sections taken from the new file: the defaults of every profile, read per turn or per message.
LIVE_KEYS = {"sessions": ("busy_mode", "collect_window_s", "per_user_in_groups", "status_reactions")}


@dataclass(frozen=True)
class Reload:
    """What a checked reload would run with: ``config`` (the live parts new, the rest as running), the keys it
    changes live and those it leaves for a restart (``[section] key`` or ``[section.NAME]``)."""
    config: dict
    changed: tuple = ()
    needs_restart: tuple = ()


def check_whole(config: dict, now: float | None = None) -> None:
    """Every check a start makes of a loaded configuration (common/config.py did the schema); one ConfigError
    naming every failure of every check (``more``), each once."""
    errors: list[ConfigError] = []
    checks = (registry.validate_all,  # the adapter tables
              load_routes,            # [profiles.NAME] and [[routes]], against the adapters
              load_identities,        # [[identities]], against the adapters
              validate_plugins,       # the [plugins.NAME] tables' own keys
              lambda c: check_servers(c.get("_source") or "(configuration)", c),   # [mcp.NAME] (docs/mcp.md)
              lambda c: validate_jobs(c, time.time() if now is None else now),  # [cron.NAME]
              validate_watches,       # [watch.NAME]
              check_idle_exit)        # [gateway] idle_exit_s, against the adapters' intakes
    for check in checks:
        with gathering(errors):
            check(config)
    raise_gathered(errors)


def reload_from_file(running: dict, now: float | None = None) -> Reload:
    """Read ``running``'s own file again and check it whole; the configuration a reload runs with. Raises
    ConfigError (the file, the key, the reason) for a file that must be refused."""
    path = running.get("_source") or ""
    if not path:
        raise ConfigError("(defaults)", "(file)", "the gateway runs on the embedded defaults, without a file: "
                                                  "there is nothing to reload (start it with --config FILE)")
    fresh = load(path)
    check_whole(fresh, now)
    planned = merge(running, fresh)
    try:
        check_whole(planned.config, now)
    except ConfigError as exc:   # valid alone, but not with what only a restart changes (e.g. a route to a new adapter)
        raise ConfigError(exc.file, exc.key, f"{exc.reason} (with the settings a reload keeps until a restart: "
                                             f"{', '.join(planned.needs_restart) or 'none'})", exc.more) from None
    _refuse_new_secrets(running, planned.config)
    return planned


def merge(running: dict, fresh: dict) -> Reload:
    """``running`` with the live parts of ``fresh``: the generation one more, the file's hash and reading time
    ``fresh``'s."""
    config = copy.deepcopy(running)
    changed, restart = [], []
    for section in sorted(set(running) | set(fresh)):
        if section.startswith("_"):
            continue
        old, new = running.get(section), fresh.get(section)
        if section in LIVE_SECTIONS:
            if old != new:
                changed.extend(_differences(section, old, new))
            config[section] = copy.deepcopy(new)
            continue
        if not isinstance(old, dict) or not isinstance(new, dict):
            if old != new:
                restart.append(f"[{section}]")
            continue
        live = LIVE_KEYS.get(section, ())
        for key in sorted(set(old) | set(new)):
            if old.get(key) == new.get(key):
                continue
            where = f"[{section}.{key}]" if section == "adapters" else f"[{section}] {key}"
            if key in live:
                changed.append(where)
                config[section][key] = copy.deepcopy(new[key])
            elif not (section == "gateway" and key == "state_dir"):   # resolved at load: compared below
                restart.append(where)
    if _state_dir(running) != _state_dir(fresh):
        restart.append("[gateway] state_dir")
    config["_sha256"], config["_loaded_at"] = fresh.get("_sha256", ""), fresh.get("_loaded_at", time.time())
    config["_generation"] = int(running.get("_generation", 1)) + 1
    return Reload(config, tuple(changed), tuple(restart))


def _differences(section: str, old, new) -> list[str]:
    """The names a live section's change is reported under: each table of an open section, else the section."""
    if isinstance(old, dict) and isinstance(new, dict) and section in ("profiles", "cron", "mcp", "watch"):
        return [f"[{section}.{name}]" for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]
    if isinstance(old, dict) and isinstance(new, dict):
        return [f"[{section}] {key}" for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]
    return [f"[[{section}]]" if section == "routes" else f"[{section}]"]


def _state_dir(config: dict) -> str:
    return str((config.get("gateway") or {}).get("state_dir", ""))


def _refuse_new_secrets(running: dict, planned: dict) -> None:
    known = set(configured_secrets(running))
    if not set(configured_secrets(planned)) - known:
        return
    file = planned.get("_source") or "(config)"
    tables = [("[agent]", planned.get("agent") or {})] + [
        (f"[profiles.{name}.agent]", table.get("agent") or {})
        for name, table in sorted((planned.get("profiles") or {}).items()) if isinstance(table.get("agent"), dict)]
    for where, table in tables:
        if set(configured_secrets({"agent": table})) - known:
            key = "api_key" if table.get("api_key") and str(table["api_key"]) not in known else "api_key_env"
            raise ConfigError(file, f"{where} {key}", "a reload cannot bring a key the gateway did not start "
                                                      "with (every process's log filter knows the keys it started "
                                                      "with); restart the gateway to use it")
    raise ConfigError(file, "(secrets)", "a reload cannot bring a secret the gateway did not start with; restart "
                                         "the gateway to use it")
