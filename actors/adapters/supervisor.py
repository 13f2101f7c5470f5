"""The adapter supervisor: one child per configured platform connection, one_for_one, each with its own backoff.

An adapter that keeps crashing is restarted with growing delays; if it exceeds the intensity the whole adapter layer
escalates to the root. A platform that is down or refuses the configuration (a revoked token) does not crash its
adapter: the adapter retries on its own and shows as down in ``status`` (actors/adapters/intake.py). Where each
adapter is goes to the root (an AddressesChanged whenever one comes up or goes away), which publishes it in the
Directory.
"""
from __future__ import annotations

from actors.adapters import registry
from supervision.spec import ChildSpec, Restart, flags_from_config
from supervision.supervisor import Supervisor


def adapter_specs(config: dict) -> list:
    """One child per [adapters.NAME] table, its args the validated table (ConfigError names a bad key)."""
    specs = []
    for name, args in registry.validate_all(config).items():
        entry = registry.entry_of(args)
        specs.append(ChildSpec(name, entry.actor, kind=entry.kind, args=args, restart=Restart.PERMANENT))
    return specs


class AdapterSupervisor(Supervisor):
    announces = "adapters"     # the root's Directory says where each adapter is (supervision/supervisor.py)

    def child_specs(self, args):
        return adapter_specs(self.config)

    def flags(self, args):
        return flags_from_config(self.config)
