"""The adapter supervisor: one child per configured platform connection, one_for_one, each with its own backoff.

An adapter that keeps failing (a revoked token, a platform outage) is restarted with growing delays; if it exceeds
the intensity the whole adapter layer escalates to the root.
"""
from __future__ import annotations

from actors.adapters import registry
from actors.messages import AdaptersChanged
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
    def __init__(self):
        super().__init__()
        self.announcements = 0     # AdaptersChanged sent by this incarnation (the root keeps the newest)

    def child_specs(self, args):
        return adapter_specs(self.config)

    def flags(self, args):
        return flags_from_config(self.config)

    def on_ChildReady(self, message, sender) -> None:
        super().on_ChildReady(message, sender)
        self._announce()

    def child_exited(self, child, abnormal) -> None:
        self._announce()

    def _announce(self) -> None:
        """Tell the root where the adapters are now; it publishes the next Directory.

        Each adapter's address is the one its own ChildReady came from (``seen_as``), never the one createActor
        returned: that is a stand-in only this supervisor can use until Thespian learns the real address, and a
        child's first message can arrive before Thespian does. Handed to other processes, a stand-in reaches
        nobody: every reply the shards sent to that adapter was lost without an error."""
        adapters = tuple((name, c.seen_as) for name, c in self.children.items()
                         if c.seen_as is not None and c.status == "running")
        self.announcements += 1
        self.send(self.parent, AdaptersChanged(adapters, self.started_at, self.announcements))
