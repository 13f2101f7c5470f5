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


SESSION_COMMANDS = ("stop", "reset")


@dataclass(frozen=True)
class SessionCommand:
    """-> the session shard that hosts ``session_key`` (and from it to the session's cell): ``stop`` the turn that
    runs (what the chat's /stop does), or ``reset`` the conversation (what /new does: the current session is kept
    as 'reset' and a fresh one answers the next message; a running turn is stopped first). Answered by
    SessionCommandDone."""
    action: str
    session_key: str
    by: str = ""


@dataclass(frozen=True)
class SessionCommandDone:
    session_key: str
    action: str
    ok: bool
    detail: str = ""


APPROVAL_VERDICTS = ("approve", "deny")


@dataclass(frozen=True)
class ApprovalAnswer:
    """-> the session shard that hosts ``session_key``: the operator's ``approve`` or ``deny`` of a tool call
    waiting for approval (docs/approvals.md). The first answer wins, whoever gives it; a winning one makes the
    session's turn go on. Answered by ApprovalAnswerDone."""
    action: str                   # approve | deny
    approval_id: str
    session_key: str
    by: str = ""


@dataclass(frozen=True)
class ApprovalAnswerDone:
    session_key: str
    action: str
    ok: bool                      # this answer counted
    detail: str = ""              # what was done, or what came first
