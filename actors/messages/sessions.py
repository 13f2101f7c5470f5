"""Messages: sessions and turns (the rules every message keeps: actors/messages/__init__.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class Passivate:
    """Session shard -> session cell: stop if idle (idle timeout or the live-session cap)."""


@dataclass(frozen=True)
class RunCells:
    """Session shard -> itself: its cells still have mail after one run's budget (run again once Thespian has
    transmitted what they sent so far)."""


@dataclass(frozen=True)
class ShardArgs:
    """What a session shard (a process actor) is started with: its index among the shards of this host, how many
    they are, and the child names of every shard of the convention then (the shard starts the sessions of the keys
    it wins among them: common/host_map.py)."""
    index: int
    count: int
    places: tuple = ()


@dataclass(frozen=True)
class SessionArgs:
    """What a session cell is started with (its ChildSpec's args): the conversation it is."""
    session_key: str


@dataclass(frozen=True)
class ConsumerArgs:
    """What a stream consumer cell is started with (its ChildSpec's args): where its turn's reply goes and how, as
    the turn started (actors/sessions/turn.py consumer_args). A reload during the turn changes nothing of it, even
    for a consumer started again after a crash."""
    turn_id: str
    session_key: str
    inbound_ref: str                   # the inbound message's reference: the reply's obligation is keyed on it
    adapter: str                       # the adapter's name ([adapters.NAME])
    platform: str                      # its type (telegram, slack, ...): whose pacing table applies
    chat_id: str
    thread_id: Optional[str] = None
    chat_type: str = "dm"
    profile: Optional[str] = None
    stream: bool = True                # the profile streams previews (False: the reply is sent once, complete)
    status_reactions: tuple = ()       # (while working, once answered); empty or "" when off
    reply_to: Optional[str] = None     # the platform message it answers (None: a scheduled run's, the gateway's own)
    tool_progress: str = "bubble"      # the profile's: off | lines | bubble (actors/sessions/reply_text.py)
    stream_without_edits: str = "final"   # the profile's: final | paragraphs (actors/sessions/paragraph_parts.py)


@dataclass(frozen=True)
class SpawnConsumer:
    """Session -> session supervisor: start the stream consumer of one reply. Sessions run a thread (their async
    bridge) so they create no processes themselves; the supervisor, which has none, forks the consumer."""
    turn_id: str
    args: ConsumerArgs


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


@dataclass(frozen=True)
class TaskStop:
    """A chat's session -> its shard -> a background task's session (``/cancel N``: actors/sessions/tasks.py): stop
    the task's turn now, as /stop does. Dropped when the task's session is not live: the task row's cancel mark,
    committed before this leaves, stops a turn that has not started yet."""
    session_key: str
