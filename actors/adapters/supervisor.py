"""The adapter supervisor: one child per configured platform connection, one_for_one, each with its own backoff.

An adapter that keeps failing (a revoked token, a platform outage) is restarted with growing delays; if it exceeds
the intensity the whole adapter layer escalates to the root.
"""
from __future__ import annotations

from supervision.spec import flags_from_config
from supervision.supervisor import Supervisor


def adapter_specs(config: dict) -> list:
    """Child specs for the configured adapters (the registry fills this as platforms are added)."""
    return []


class AdapterSupervisor(Supervisor):
    def child_specs(self, args):
        return adapter_specs(self.config)

    def flags(self, args):
        return flags_from_config(self.config)
