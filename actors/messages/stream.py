"""Messages: stream events (the rules every message keeps: actors/messages/__init__.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallStarted:
    call_id: str
    name: str


@dataclass(frozen=True)
class ToolCallDelta:
    call_id: str
    arguments_delta: str


@dataclass(frozen=True)
class ToolCallFinished:
    call_id: str
    name: str
    arguments: str
    result: str
    ok: bool = True
    files: tuple = ()              # of OutgoingFile: what the tool made, already in the media cache


@dataclass(frozen=True)
class ReplyFile:
    """A file the reply carries (a tool made it): shown after the reply's text, each file as its own part."""
    file: Any                      # OutgoingFile (actors/messages/platform_ops.py), already in the media cache


@dataclass(frozen=True)
class LongToolHint:
    """A tool is still running after a while: tell the chat something is happening."""
    call_id: str
    name: str
    elapsed_s: float


@dataclass(frozen=True)
class WaitingForModel:
    """The model has sent nothing of its answer yet after a while (a hung or overloaded service, a cold model
    loading): tell the chat the answer is still coming."""
    elapsed_s: float


@dataclass(frozen=True)
class GatewayNotice:
    """Text from the gateway itself (not the model): errors, resumes, command replies."""
    text: str
    level: str = "info"            # info | warning | error


@dataclass(frozen=True)
class ApprovalNeeded:
    """The model called a tool that waits for a person's yes (docs/approvals.md): the agent ran the calls before
    it, runs neither it nor the later calls of its step, and ends the run with TurnEnd(reason="awaiting_approval").
    ``step`` is the assistant message that asked for the calls, ``later`` the calls after this one ((call id, name,
    arguments) each): with the answers, what the turn goes on from (actors/agents/base.py OpenStep)."""
    call_id: str
    name: str
    arguments: str
    step: dict
    later: tuple = ()


AWAITING_APPROVAL = "awaiting_approval"   # the TurnEnd reason of a run stopped by an ApprovalNeeded
TOKEN_LIMIT = "token_limit"               # the TurnEnd reason of a run stopped at its token budget (a task's)


@dataclass(frozen=True)
class TurnEnd:
    reason: str = "complete"       # complete | interrupted | error | stopped | awaiting_approval | token_limit
    final_text: Optional[str] = None
    canned: bool = False           # the offline agent's own words, no model's: kept out of the history a model gets
    # (prompt, completion) tokens of every model request of the turn, when the model service counted them
    tokens: Optional[tuple] = None


# What a session's agent run, on the shard's loop, posts back to its session cell (through the bridge).
@dataclass(frozen=True)
class AgentEvent:
    turn_id: str
    event: Any                     # one of the stream events above


@dataclass(frozen=True)
class SessionToolCall:
    """A turn's call of a tool its session decides (start_background_task, create_watch), from its agent run on the
    shard's loop to its session, through the bridge (never out of the process: ``reply`` is a callable the session
    runs on the loop, ``reply(ok, text)``, to answer the call). The session does what the call asks and records
    the call with its result in one handler (actors/sessions/task_tool.py)."""
    turn_id: str
    call_id: str
    name: str                      # the tool's
    arguments: str                 # the call's arguments as JSON, as the transcript records them
    values: Any                    # the arguments as the model gave them (a dict; checked by the session)
    reply: Any


@dataclass(frozen=True)
class AgentCancelled:
    """The run was cancelled (the turn was interrupted or stopped)."""
    turn_id: str


@dataclass(frozen=True)
class AgentFailed:
    turn_id: str
    error: BaseException           # shown to the chat redacted, logged in full


@dataclass(frozen=True)
class StreamBatch:
    """Stream events of one turn, sent as one actor message: a tell per token would cap throughput
    (docs/design.md §4)."""
    turn_id: str
    seq: int
    events: tuple


