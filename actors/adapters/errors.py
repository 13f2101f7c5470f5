"""The errors every platform client raises, classified by what the caller should do next.

    PlatformError
    ├── RetryableError          try again later (5xx, network failure, timeout); ``retry_after`` when known
    │   ├── FloodError          rate limited: wait exactly ``retry_after`` seconds first (HTTP 429)
    │   └── ConflictError       another poller or a webhook holds the update stream (HTTP 409)
    └── PermanentError          the same request will never succeed (blocked, chat not found, bad token)
        ├── FormattingError     the markup was rejected: resend as plain text
        ├── TooLongError        the text is over the platform's limit: split it and resend
        └── MessageNotFoundError   the message to edit or delete is gone: send a new one instead

Subclasses sit under the class whose generic handling is still correct, so a caller that only knows
``RetryableError``/``PermanentError`` does the safe thing. Messages never contain credentials: clients build
them from the method name and the platform's own description, never from a request URL.
"""
from __future__ import annotations

from typing import Optional


class PlatformError(Exception):
    """A platform request failed. ``status`` is the HTTP status (None for network failures)."""

    def __init__(self, description: str, *, method: str = "", status: Optional[int] = None):
        self.description = description
        self.method = method
        self.status = status
        prefix = f"{method}: " if method else ""
        code = f"[{status}] " if status is not None else ""
        super().__init__(f"{prefix}{code}{description}")


class RetryableError(PlatformError):
    """A transient failure; the request may be repeated unchanged. ``retry_after`` is a hint in seconds, if any.
    ``maybe_done``: the request left and its answer was lost (a timeout, a connection cut mid-call), so it may have
    taken effect; repeating a send then could show it twice."""

    def __init__(self, description: str, *, method: str = "", status: Optional[int] = None,
                 retry_after: Optional[float] = None, maybe_done: bool = False):
        super().__init__(description, method=method, status=status)
        self.retry_after = retry_after
        self.maybe_done = maybe_done


class FloodError(RetryableError):
    """Rate limited (HTTP 429). Requests to the same scope before ``retry_after`` seconds pass are refused again."""

    def __init__(self, retry_after: float, description: str = "flood control", *, method: str = "",
                 status: Optional[int] = 429):
        super().__init__(description, method=method, status=status, retry_after=float(retry_after))


class ConflictError(RetryableError):
    """The update stream is held elsewhere (a webhook is set, or another getUpdates poller took over)."""


class PermanentError(PlatformError):
    """Repeating the request unchanged cannot succeed."""


class FormattingError(PermanentError):
    """The platform could not parse the message markup; the caller should fall back to plain text."""


class TooLongError(PermanentError):
    """The text exceeds the platform's size limit; the caller should split it."""


class MessageNotFoundError(PermanentError):
    """The message to edit or delete does not exist (deleted by the user, or never sent)."""
