"""What a chat user is told when the agent cannot answer. Pure functions.

The user gets one short line that says what happened in their terms and what they can do (try again, wait, or
nothing: the operator has to act), never the model service's host and port, an exception class or a credential:
those are the operator's, and the session logs the whole cause (``agent failed: AgentError(...)``) next to the
notice. Two steps, each tested on its own (tests/common/test_chat_errors.py):

    failure_kind(exc)         -> one of KINDS (from what the agent client saw: AgentError.reason, an HTTP
                                 status, or the exception's class)
    user_facing_error(exc)    -> the line for the chat
"""
from __future__ import annotations

import socket
from typing import Iterable

from common.redact import redact

TOLD = "The operator has been told."
# kind -> what the chat sees. "refused" and "agent" carry the service's or the agent's own words (redacted, short):
# a prompt too long for the model, a content filter, the offline agent's failure text.
TEXTS = {
    "unreachable": f"I can't reach the model service right now, so I could not answer. {TOLD} Please try again "
                   "later.",
    "dns": f"I can't reach the model service right now, so I could not answer. {TOLD} Please try again later.",
    "timeout": "The model service took too long to answer. Please try again in a moment.",
    "broken": "The model service stopped in the middle of the answer. Please ask again.",
    "auth": f"The model service refused the gateway's credentials, so I can't answer until the operator fixes "
            f"them. {TOLD}",
    "rate_limited": "The model service is busy right now (rate limited). Please try again in a minute.",
    "server_error": "The model service had an internal error. Please try again in a moment.",
    "refused": "The model service refused this request{detail}.",
    "agent": "The agent failed{detail}. " + TOLD,
    "other": f"Something went wrong while answering. {TOLD}",
}
KINDS = tuple(TEXTS)
DETAIL_STATUSES = (400, 413, 422)   # answers about the request itself, whose words help the user rephrase it


def failure_kind(exc: BaseException) -> str:
    """The kind of one agent failure. An ``AgentError`` may name its kind (``reason``: the client knew whether the
    service was unreachable or broke off mid-answer); else its HTTP ``status`` decides; else the exception's class
    (a connection error seen directly: refused, reset, a name that does not resolve, a timeout)."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and reason in KINDS:
        return reason
    status = getattr(exc, "status", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return _http_kind(status)
    if _is_dns(exc):
        return "dns"
    if isinstance(exc, TimeoutError):      # before OSError, of which it is one (aiohttp's timeouts too)
        return "timeout"
    if isinstance(exc, OSError):           # ConnectionError, aiohttp's ClientConnectorError / ClientOSError
        return "unreachable"
    if type(exc).__name__ == "AgentError":
        return "agent"
    return "other"


def _http_kind(status: int) -> str:
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limited"
    if status == 408:
        return "timeout"
    if status >= 500:
        return "server_error"
    return "refused"


def _is_dns(exc: BaseException) -> bool:
    # aiohttp wraps the resolver's error: ClientConnectorDNSError / ClientConnectorError(os_error=gaierror).
    return isinstance(exc, socket.gaierror) or isinstance(getattr(exc, "os_error", None), socket.gaierror)


def user_facing_error(exc: BaseException, extra_secrets: Iterable[str] = (), limit: int = 160) -> str:
    """The one line a chat shows for ``exc``: short, redacted, without internal addresses or exception names."""
    kind = failure_kind(exc)
    detail = ""
    if kind == "agent" or (kind == "refused" and getattr(exc, "status", None) in DETAIL_STATUSES):
        words = _one_line(redact(str(getattr(exc, "message", None) or exc), tuple(extra_secrets)), 10_000)
        words = _one_line(_without_http_prefix(words), limit)
        detail = f" ({words})" if words else ""
    elif kind == "refused":
        detail = f" (HTTP {exc.status}); the operator has been told"
    return TEXTS[kind].format(detail=detail)


def _without_http_prefix(text: str) -> str:
    head, _, rest = text.partition(":")
    return rest.strip() if head.startswith("HTTP ") and head[5:].strip().isdigit() else text


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
