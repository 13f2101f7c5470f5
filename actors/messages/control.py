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




# Reloading the configuration (actors/config_reload.py).

@dataclass(frozen=True)
class ReloadRequest:
    """Admin client or launcher (SIGHUP) -> root: read the configuration file again and apply what may change live.
    ``via`` says who asked, for the log; ``path``: the file the asker means ("" for the one the gateway runs on)."""
    via: str = "reload"
    path: str = ""


@dataclass(frozen=True)
class ReloadReport:
    """Root -> asker. ``ok``: the new configuration runs (generation, the file's sha256, when it was read);
    ``changed``: what it changed for new turns; ``needs_restart``: what changed in the file but keeps its running
    value until a restart. Refused: ``error`` (and ``file``/``key`` for a bad file), ``config_error`` true for a
    file that does not check (the CLI exits 78, as a start would)."""
    ok: bool
    generation: int
    sha256: str = ""
    loaded_at: float = 0.0
    changed: tuple = ()
    needs_restart: tuple = ()
    error: str = ""
    file: str = ""
    key: str = ""
    config_error: bool = False

    def __str__(self) -> str:
        if not self.ok:
            return f"reload refused: {self.error}"
        changed = ", ".join(self.changed) or "nothing"
        text = f"configuration generation {self.generation} (sha256 {self.sha256[:12]}) runs; changed: {changed}"
        if self.needs_restart:
            text += f"; needs a restart (running values kept): {', '.join(self.needs_restart)}"
        return text
