"""Messages: what an operator does to a running gateway, from the CLI or the console (one implementation, two faces:
the CLI sends them to the actor by name, the console finds the actor by a walk of the tree and sends the same).
``by`` says who, for the log line the actor writes (the console's ``access.who``, the CLI's ``cli:USER``).
"""
from __future__ import annotations

from dataclasses import dataclass

ADAPTER_COMMANDS = ("pause", "resume", "reconnect")


@dataclass(frozen=True)
class AdapterCommand:
    """-> an adapter: ``pause`` its intake (it takes nothing more from the platform, which keeps what is sent
    meanwhile; outbound continues), ``resume`` it, or ``reconnect`` (the intake closes its connection and opens a
    new one). Answered by AdapterCommandDone."""
    action: str
    by: str = ""


@dataclass(frozen=True)
class AdapterCommandDone:
    adapter: str
    action: str
    ok: bool
    detail: str = ""          # what was done, or why not
