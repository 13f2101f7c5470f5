"""The session supervisor: routes session keys to Session actors, spawning them on demand."""
from __future__ import annotations

from supervision.spec import flags_from_config
from supervision.supervisor import Supervisor


class SessionSupervisor(Supervisor):
    def flags(self, args):
        return flags_from_config(self.config)
