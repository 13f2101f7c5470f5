"""Messages: metrics (the rules every message keeps: actors/messages/__init__.py)."""
from __future__ import annotations

from dataclasses import dataclass


# Facts told to the metrics actor (its address is in the Directory) by the actors that see them. Best effort: a fact
# sent while the metrics actor restarts is lost, and nobody waits for an answer (actors/metrics.py).

@dataclass(frozen=True)
class StalledReply:
    """Stream consumer -> metrics: a reply that could make no progress for longer than its bound, and why
    (no_adapter: the directory names no adapter for its platform)."""
    platform: str
    reason: str


@dataclass(frozen=True)
class LostSend:
    """Stream consumer / sweeper -> metrics: a send whose outcome was unknown (its answer died with a process or a
    connection, or never came), and how it ended: found (its copy is the part now), never_landed (sent again as
    usual), marked (sent again under the re-sent marker), unanswered (no answer in time: taken for lost)."""
    platform: str
    outcome: str


@dataclass(frozen=True)
class TurnFinished:
    """Session -> metrics: a turn is over (its reply delivered or given up)."""
    profile: str
    platform: str
    outcome: str                   # done | failed | interrupted | cancelled
    seconds: float                 # from the inbound message's arrival to the end of the turn
    internal: bool = False         # the turn answered the gateway's own event (a scheduled run), not a user




@dataclass(frozen=True)
class FloodWaited:
    """Adapter -> metrics: the platform answered 429; the chat waits ``seconds`` before its next operation."""
    platform: str
    seconds: float


@dataclass(frozen=True)
class IntakeSilent:
    """Adapter -> metrics, just before it crashes on purpose: its intake believed itself connected and showed no
    progress for ``seconds``, past its bound (a zombie connection: actors/adapters/liveness.py)."""
    adapter: str
    seconds: float


@dataclass(frozen=True)
class AdapterConnection:
    """Adapter -> metrics: its platform connection came up or went down (sent again on every new Directory).
    Two reports can cross on their way, so each carries its count in the adapter's incarnation: the metrics actor
    keeps a report of the same reporter only if it is newer than the one it holds."""
    adapter: str
    connected: bool
    seq: int = 0


@dataclass(frozen=True)
class HookFailed:
    """A plugin's hook -> the actor that ran it (a bridge item) -> metrics: the hook overran its bound (timeout), raised
    (error), had too many calls waiting (busy), answered what its hook point does not take (bad_answer), or the
    plugin could not be loaded (hook "load"). The actor thread logs ``log_line`` and reports it
    (supervision/behaviour.py: ``metric_fact``); the message went on without the hook."""
    plugin: str
    hook: str
    outcome: str
    detail: str = ""
    metric_fact = True        # not a field: what makes the actor thread log and report it

    @property
    def log_line(self) -> str:
        return f"plugin {self.plugin}: {self.hook} hook {self.outcome}: {self.detail}"


# Asked of the metrics actor (not facts: these have an answer).

@dataclass(frozen=True)
class RecentMinutesWanted:
    """The console -> metrics: the last hour of its counters, minute by minute (actors/console/recent_minutes.py)."""


@dataclass(frozen=True)
class RecentMinutes:
    """Metrics -> the asker: ``rows`` are ((minute, turns, failed, restarts, (latency bucket counts...)), ...);
    ``platforms`` are, since the metrics actor started, ((platform, turns, rate-limit waits, seconds waited), ...)."""
    rows: tuple = ()
    platforms: tuple = ()
