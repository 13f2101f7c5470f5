"""Which adapters can run in a gateway started on demand ([gateway] idle_exit_s; daemon/idle_exit.py).

A gateway that stops when idle is started again by its service manager when someone connects to one of its ports
(deploy/on-demand/). That brings back the platforms that call us (webhooks, the web chat, the HTTP API) and the
terminal chat (the admin port). A platform the gateway itself asks or connects to (Telegram's long polling,
Discord's gateway, IRC, Matrix's /sync...) would have no way to wake it: its messages would wait unseen until
something else did. So the configuration check refuses idle_exit_s beside any such adapter, naming it and, where
the platform has one, the webhook mode to use instead (a pure function of the configuration).
"""
from __future__ import annotations

from typing import Mapping

from actors.adapters import registry
from common.config import ConfigError


def check_idle_exit(config: Mapping) -> None:
    """Raise ConfigError for ``[gateway] idle_exit_s`` when an adapter could not wake a stopped gateway."""
    if not config["gateway"].get("idle_exit_s"):
        return
    file = registry.config_file(config)
    if (config.get("cluster") or {}).get("enabled"):
        raise ConfigError(file, "[gateway] idle_exit_s", "a leader of worker hosts does not stop when idle (its "
                                                          "workers would lose it): set it to 0 with [cluster]")
    waiting = [f"{name} ({table['type']}: {_how(registry.entry_of(table).intake)} the platform)"
               for name, table in registry.validate_all(config).items() if not registry.entry_of(table).serves(table)]
    if waiting:
        raise ConfigError(file, "[gateway] idle_exit_s",
                          f"{', '.join(waiting)} would miss messages while the gateway is stopped: only a platform "
                          f"that calls the gateway (a webhook mode) can start it again. Switch those adapters to "
                          f"their webhook mode where they have one, or set idle_exit_s = 0")


def _how(intake: str) -> str:
    return "polls" if intake == "poll" else "keeps a connection to"
