"""Messages: sessions and turns (the rules every message keeps: actors/messages/__init__.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Passivate:
    """Session shard -> session cell: stop if idle (idle timeout or the live-session cap)."""


@dataclass(frozen=True)
class RunCells:
    """Session shard -> itself: its cells still have mail after one run's budget (run again once Thespian has
    transmitted what they sent so far)."""


@dataclass(frozen=True)
class SpawnConsumer:
    """Session -> session supervisor: start the stream consumer of one reply. Sessions run a thread (their async
    bridge) so they create no processes themselves; the supervisor, which has none, forks the consumer."""
    turn_id: str
    args: Any


@dataclass(frozen=True)
class ConsumerReady:
    turn_id: str
    address: Any


@dataclass(frozen=True)
class ConsumerGone:
    """Session supervisor -> session: the consumer of this turn exited before reporting ReplyDone (``outside_cause``:
    it stopped on storage being unavailable, which is waited out rather than counted)."""
    turn_id: str
    reason: str = ""
    outside_cause: bool = False


@dataclass(frozen=True)
class ReplyDone:
    """Stream consumer -> session: the reply of this turn is delivered (or failed for good)."""
    turn_id: str
    ok: bool
    detail: str = ""
    message_ids: tuple = ()


@dataclass(frozen=True)
class ModelOutcome:
    """Session -> its shard: how a turn's request to a model service went (one per turn that reached the model;
    actors/sessions/model_health.py)."""
    endpoint: str                  # "MODEL at URL" (actors/agents/base.py endpoint_name)
    ok: bool
    error: str = ""                # the operator's words of the failure (AgentError.message), redacted
    kind: str = ""                 # common.chat_errors.failure_kind of it
    at: float = 0.0                # time.time() of the outcome
