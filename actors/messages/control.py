"""Messages: runtime control (the rules every message keeps: actors/messages/__init__.py)."""
from __future__ import annotations

from dataclasses import dataclass, field


# Supervision: parent <-> child.













# Health and inspection.













# Drain and shutdown.











@dataclass(frozen=True)
class DrainRequest:
    timeout_s: float = 30.0


@dataclass(frozen=True)
class DrainReport:
    ok: bool
    waited_s: float
    in_flight_left: int   # -1: the drain did not start
    detail: str = ""

    def __str__(self) -> str:
        """A sentence for the log and the operator (the dataclass repr is for debugging)."""
        if self.in_flight_left < 0:
            return f"drain not done: {self.detail}"
        left = ("every turn finished" if self.in_flight_left == 0 else
                f"{self.in_flight_left} turn(s) still in flight, kept for the next instance")
        return f"drained in {self.waited_s:.2f}s: {left}" + (f"; {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class ShutdownRequest:
    """Launcher -> root: graceful shutdown (stop intake, flush everything, then answer ShutdownReady)."""
    timeout_s: float = 10.0


@dataclass(frozen=True)
class ShutdownReady:
    flushed: int = 0
    detail: str = ""

    def __str__(self) -> str:
        return f"flushed {self.flushed} item(s)" + (f"; {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class DrainDone:
    """Root -> launcher: the drain finished; the launcher stops the actor system and exits 0."""
    report: DrainReport


@dataclass(frozen=True)
class StatusRequest:
    pass


@dataclass(frozen=True)
class GatewayStatus:
    started_at: float
    actors_up: int
    actors_restarting: int
    actors_failed: int
    sessions_live: int
    obligations_pending: int
    draining: bool
    detail: dict = field(default_factory=dict)


