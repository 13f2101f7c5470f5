"""The agent interface: one turn in, a stream of events out (the event types live in actors.messages).

An agent's ``run`` is an async generator. It yields stream events and ends with exactly one ``TurnEnd`` whose
``final_text`` is the whole answer (every ``TextDelta`` joined). It raises ``AgentError`` when it cannot answer;
the caller turns that into a notice and ``TurnEnd(reason="error")``. Cancelling the task that iterates it
(an interrupt) raises ``asyncio.CancelledError`` inside the agent, which lets it propagate after closing what it
opened.
"""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Mapping, Optional, Protocol, Union
from urllib.parse import urlsplit, urlunsplit

from actors.messages import (ApprovalNeeded, GatewayNotice, LongToolHint, TextDelta, ToolCallDelta, ToolCallFinished,
                             ToolCallStarted, TurnEnd, WaitingForModel)

StreamEvent = Union[TextDelta, ToolCallStarted, ToolCallDelta, ToolCallFinished, LongToolHint, WaitingForModel,
                    GatewayNotice, ApprovalNeeded, TurnEnd]

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"


class AgentError(Exception):
    """The agent could not answer. ``message`` is for the operator's log (it may name the service's address and
    the exception seen); ``status`` is the model service's HTTP status when there was one; ``reason``, where the
    client knows it, the kind of failure (``common.chat_errors.KINDS``: unreachable, dns, timeout, broken...),
    which decides what the chat is told instead of the message."""

    def __init__(self, message: str, status: Optional[int] = None, reason: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class ApprovalGuard:
    """Which tool calls of a turn wait for a person's yes (docs/approvals.md). ``needs`` takes the name the model
    calls a tool by (the session builds it from its profile: actors/approvals/rules.py); ``approved`` are the call
    ids a person said yes to, whose execution the session has claimed in storage: they run without asking again."""
    needs: Callable[[str], bool]
    approved: frozenset = frozenset()

    def holds(self, call_id: str, name: str) -> bool:
        return call_id not in self.approved and self.needs(name)


@dataclass(frozen=True)
class OpenStep:
    """A step of the turn whose tool calls a question cut short, to go on from: the assistant message that asked
    for them (with its ``tool_calls``), the results some calls have already (``answered``: (call id, text) each,
    those that ran before the question and the refusals decided since), and the calls still to run, in order
    (``to_run``: (call id, name, arguments) each). Every call of the message must be in one of the two."""
    assistant_message: dict
    answered: tuple = ()
    to_run: tuple = ()


@dataclass(frozen=True)
class AgentRequest:
    messages: tuple                   # OpenAI chat format dicts: role, content, [tool_calls], [tool_call_id], [name]
    profile: str = "default"
    turn_id: str = ""
    # Messages the user sent during the turn; an agent with supports_steer folds them in at its next step.
    steer: Optional[asyncio.Queue] = field(default=None, compare=False, repr=False)
    # The media cache a tool's files go to (ToolRegistry.run); None: tools cannot send files in this turn.
    media: Any = field(default=None, compare=False, repr=False)
    # The turn's memory binding (actors/memory/binding.py) the remember / forget tools write through; None: none.
    memory: Any = field(default=None, compare=False, repr=False)
    # The turn's binding to its session (actors/sessions/task_tool.py), which the tools it decides ask; None: none.
    session_tools: Any = field(default=None, compare=False, repr=False)
    # Which tool calls wait for a yes (None: none do), and the step a turn answered since goes on from.
    approvals: Optional[ApprovalGuard] = field(default=None, compare=False, repr=False)
    open_step: Optional[OpenStep] = None
    # The most tokens (prompt and completion, summed over the run's model calls, as the service counts them) after
    # which the run asks the model nothing more: it ends with TurnEnd(reason="token_limit"). None: no bound.
    token_budget: Optional[int] = None

    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return content_text(message.get("content"))
        return ""


class Agent(Protocol):
    supports_steer: bool

    def run(self, request: AgentRequest) -> AsyncIterator[StreamEvent]:
        ...


def content_text(content: Any) -> str:
    """The text of a message's content, which is a string or a list of parts ({"type": "text", "text": ...})."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def take_steer_messages(queue: Optional[asyncio.Queue]) -> list[dict]:
    """Everything waiting in the steer queue now (never waits), as user messages."""
    taken: list[dict] = []
    while queue is not None:
        try:
            item = queue.get_nowait()
        except asyncio.QueueEmpty:
            break
        taken.append(dict(item) if isinstance(item, Mapping) else {"role": "user", "content": str(item)})
    return taken


def resolve_api_key(config: Mapping[str, Any], env: Mapping[str, str] = os.environ) -> Optional[str]:
    """The configured key, else the one in the named environment variable (OPENAI_API_KEY by default)."""
    if config.get("api_key"):
        return str(config["api_key"])
    return env.get(config.get("api_key_env") or DEFAULT_API_KEY_ENV) or None


def agent_kind(config: Mapping[str, Any]) -> str:
    """The kind of agent an ``[agent]`` section describes: its ``kind``, else 'openai' when it names a model and a
    base_url, else 'offline'."""
    return config.get("kind") or ("openai" if config.get("model") and config.get("base_url") else "offline")


def missing_api_key(config: Mapping[str, Any], env: Mapping[str, str] = os.environ) -> Optional[str]:
    """The environment variable an OpenAI-compatible agent would read its key from, when that variable is unset and
    no key is configured inline (its first turn would then be refused, HTTP 401, by any service that needs one);
    None when the agent has a key or is of a kind that needs none."""
    if agent_kind(config) != "openai" or resolve_api_key(config, env):
        return None
    return config.get("api_key_env") or DEFAULT_API_KEY_ENV


def endpoint_name(model: str, base_url: str) -> str:
    """``gpt-4o-mini at https://api.openai.com/v1``: the URL without user info, query or fragment (a key put in
    the URL stays out of status)."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return f"{model} at {urlunsplit((parts.scheme, netloc, parts.path.rstrip('/'), '', ''))}"
