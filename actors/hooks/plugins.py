"""Which plugins the gateway runs: those installed with an entry point in the ``agent_gateway.plugins`` group (found
through ``importlib.metadata``, no configuration needed) and those a ``[plugins.NAME]`` table names by
``module = "package.module:attribute"``.

A plugin is the object its entry point (or ``module``) names: a module or an instance with some of the hook
functions (events.HOOK_POINTS), or a class, made with the plugin's options: the keys of its table other than the
reserved ones below, and ``plugin_dir``, a directory of its own (<state dir>/plugins/NAME, made when it is loaded)
for what it keeps. ``[plugins.NAME]`` keys of the gateway's own:

    enabled = true        false: not loaded (an installed plugin is switched off without uninstalling it)
    module = ""           "pkg.mod:attr" (or "pkg.mod"): load this rather than the entry point NAME
    see_secrets = false   true: its events carry the text as written, configured secrets included
    timeout_s = 0         its own time bound; 0: [hooks] timeout_s

Pure apart from the imports: nothing here logs (it may run on a loop thread; a load error is handed back to be
logged by the actor) and nothing is kept between calls.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable

from actors.hooks.events import HOOK_POINTS
from common.config import ConfigError, raise_gathered, setting

ENTRY_POINT_GROUP = "agent_gateway.plugins"
RESERVED = {"enabled": bool, "module": str, "see_secrets": bool, "timeout_s": (int, float)}


@dataclass
class Plugin:
    name: str
    hooks: dict                 # hook point -> the plugin's callable
    see_secrets: bool = False
    timeout_s: float = 0.0      # 0: the gateway's [hooks] timeout_s
    origin: str = ""            # "entry point" or the module path it was loaded from


@dataclass(frozen=True)
class LoadError:
    plugin: str
    reason: str


@dataclass
class Loaded:
    plugins: list = field(default_factory=list)
    errors: list = field(default_factory=list)


def validate_plugins(config: dict) -> None:
    """The [plugins.NAME] tables' reserved keys have their types (ConfigError naming every bad one, before anything
    starts)."""
    file, errors = config.get("_source") or "(config)", []
    for name, table in (config.get("plugins") or {}).items():
        for key, kind in RESERVED.items():
            if key in table and (not isinstance(table[key], kind) or isinstance(table[key], bool) and kind != bool):
                errors.append(ConfigError(file, f"[plugins.{name}] {key}",
                                          f"expected {'a number' if kind != bool and kind != str else kind.__name__}, "
                                          f"got {table[key]!r}"))
        if isinstance(table.get("module"), str) and not table["module"].strip():
            errors.append(ConfigError(file, f"[plugins.{name}] module", "must not be empty"))
    raise_gathered(errors)


def import_object(path: str) -> Any:
    module, _, attribute = path.partition(":")
    obj = importlib.import_module(module.strip())
    for part in filter(None, attribute.strip().split(".")):
        obj = getattr(obj, part)
    return obj


def discovered() -> dict[str, Callable[[], Any]]:
    """The installed plugins' entry points: name -> its loader."""
    return {ep.name: ep.load for ep in entry_points(group=ENTRY_POINT_GROUP)}


def plugin_options(config: dict, name: str, table: dict, make_dir: bool = True) -> dict:
    """What a plugin class is made with: its table's own keys, and its directory (made private to the gateway;
    not made for a look that starts nothing: ``doctor``, ``report``)."""
    plugin_dir = Path(config["gateway"]["state_dir"]) / "plugins" / name
    if make_dir:
        plugin_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return {"plugin_dir": str(plugin_dir), **{k: v for k, v in table.items() if k not in RESERVED}}


def load_plugins(config: dict, make_dirs: bool = True) -> Loaded:
    tables = config.get("plugins") or {}
    loaders: dict[str, tuple[str, Callable[[], Any]]] = {}
    if setting(config, "hooks", "entry_points"):
        loaders = {name: ("entry point", load) for name, load in discovered().items()}
    result = Loaded()
    for name, table in tables.items():
        if table.get("module"):
            loaders[name] = (table["module"], lambda path=table["module"]: import_object(path))
        elif name not in loaders and table.get("enabled", True):
            result.errors.append(LoadError(name, f"no module = \"...\" in [plugins.{name}], and no installed "
                                                 f"package has an entry point {name!r} in {ENTRY_POINT_GROUP}"))
    for name, (origin, load) in sorted(loaders.items()):
        table = tables.get(name) or {}
        if table.get("enabled", True) is False:
            continue
        try:
            obj = load()
            if isinstance(obj, type):
                obj = obj(plugin_options(config, name, table, make_dirs))
        except Exception as exc:  # noqa: BLE001 - a broken plugin is reported and left out, never fatal
            result.errors.append(LoadError(name, f"cannot load {origin}: {type(exc).__name__}: {exc}"))
            continue
        hooks = {point: getattr(obj, point) for point in HOOK_POINTS if callable(getattr(obj, point, None))}
        if not hooks:
            result.errors.append(LoadError(name, f"{origin} defines none of the hook points: "
                                                 f"{', '.join(HOOK_POINTS)}"))
            continue
        result.plugins.append(Plugin(name, hooks, bool(table.get("see_secrets", False)),
                                     float(table.get("timeout_s", 0) or 0), origin))
    return result
