"""The events a plugin's hooks receive, and what a before-dispatch hook may answer. Frozen dataclasses: a hook reads
them and returns its verdict; nothing it does to an event reaches the gateway but what it returns.

Text in an event is redacted (configured secrets and known credential shapes become ``[redacted]``) unless the
plugin's table grants it secrets (``[plugins.NAME] see_secrets = true``): docs/plugins.md.

The hook points, by the attribute a plugin defines for each (any it lacks is not called):

  before_dispatch(InboundMessage) -> None | Rewrite | Drop | Answer
        at the head of every inbound message an adapter admitted, before it is stored (so before any turn)
  before_model_call(ModelCall) -> None | str
        at the start of a turn, before the model is called: a string is added to the request as context
  after_turn(TurnRecord) -> None
        when a turn's reply was delivered (or given up): its answer and its tool calls
  on_delivery(Delivery) -> None
        a reply reached the chat (by its stream consumer, or by the sweeper after a crash)
  on_adapter_state(AdapterState) -> None
        an adapter's platform connection came up or went down
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

HOOK_POINTS = ("before_dispatch", "before_model_call", "after_turn", "on_delivery", "on_adapter_state")


# ------------------------------------------------------------------------------------------------- the events

@dataclass(frozen=True)
class InboundMessage:
    """One inbound message, as the adapter normalised it, before it is stored."""
    adapter: str                # the [adapters.NAME] name
    platform: str               # its type: telegram, slack, fake, ...
    chat_id: str
    chat_type: str              # dm | group | channel
    user_id: str
    user_name: str
    profile: str
    platform_message_id: str
    text: str
    attachments: int            # how many files came with it


@dataclass(frozen=True)
class ModelCall:
    """A turn about to call its model."""
    session_key: str
    profile: str
    turn_id: str
    text: str                   # the user's message this turn answers
    history_messages: int       # messages in the request (system prompt and history included)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str
    result: str
    ok: bool


@dataclass(frozen=True)
class TurnRecord:
    """A turn that ended: what was asked, what was answered, with which tools."""
    session_key: str
    profile: str
    platform: str
    chat_id: str
    turn_id: str
    kind: str                   # agent | command (a reply no model wrote: a command, a notice)
    text: str                   # the user's message
    answer: str
    tool_calls: tuple           # of ToolCall, in the order they finished
    delivered: bool


@dataclass(frozen=True)
class Delivery:
    """A reply that reached the chat."""
    session_key: str
    adapter: str
    chat_id: str
    thread_id: Optional[str]
    turn_id: str                # "" when the sweeper delivered it (the turn's process was gone)
    text: str
    message_ids: tuple          # the platform's ids of the reply's parts
    by: str                     # consumer | sweeper


@dataclass(frozen=True)
class AdapterState:
    adapter: str
    platform: str
    connected: bool


# ------------------------------------------------------------------------------- before_dispatch's verdicts

@dataclass(frozen=True)
class Rewrite:
    """Store the message with this text instead (what the model then receives)."""
    text: str


@dataclass(frozen=True)
class Drop:
    """Do not store the message: no turn, no answer (acknowledged to the platform all the same)."""
    reason: str = ""


@dataclass(frozen=True)
class Answer:
    """Do not store the message; send this text to its chat instead of a turn."""
    text: str


VERDICTS = (Rewrite, Drop, Answer)
