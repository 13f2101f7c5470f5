"""Async client for the Slack Web API (aiohttp): the few methods the adapter calls, and what their failures mean.

Slack answers HTTP 200 with ``{"ok": false, "error": "<code>"}`` for the refusals it decides on, 429
``ratelimited`` with ``Retry-After`` (whole seconds) for rate limits, and 5xx for failures of its own. Each is
raised as one of actors.adapters.errors:

    429                                          FloodError(Retry-After)
    5xx, network errors, timeouts                RetryableError (``maybe_done`` once the request may have left)
    internal_error, fatal_error, service_unavailable, request_timeout
                                                 RetryableError(maybe_done=True): Slack's own failure, which may
                                                 or may not have taken effect
    msg_too_long                                 TooLongError (the sender splits)
    message_not_found                            MessageNotFoundError
    any other code (invalid_auth, channel_not_found, not_in_channel, cant_update_message...)
                                                 PermanentError

Tokens travel in the ``Authorization`` header only, never in a URL, and error texts are built from the method name
and Slack's error code, so no message carries a credential.
"""
from __future__ import annotations

import logging
from typing import Any, Optional


from actors.adapters.http_session import HttpSession
from actors.adapters.errors import (FloodError, MessageNotFoundError, PermanentError, PlatformError,
                                    RetryableError, TooLongError)
from common.redact import redact as redact_secrets

log = logging.getLogger(__name__)
SLACK_API = "https://slack.com/api/"
TRANSIENT = ("internal_error", "fatal_error", "service_unavailable", "request_timeout", "team_added_to_org")


class SlackAPI(HttpSession):
    """``SlackAPI(token, base_url='https://slack.com/api/')``: one token (the bot's ``xoxb-`` or the app-level
    ``xapp-``); owns its aiohttp session."""

    def __init__(self, token: str, base_url: str = SLACK_API, request_timeout: float = 30.0):
        super().__init__(request_timeout=request_timeout)
        self._token = token
        self.base_url = base_url.rstrip("/") + "/"

    def __repr__(self) -> str:  # never the token
        return f"SlackAPI(base_url={self.base_url!r})"

    # -- methods
    async def auth_test(self) -> dict:
        return await self.call("auth.test")

    async def open_connection(self) -> str:
        """apps.connections.open (app-level token): the WebSocket URL of a new Socket Mode connection."""
        url = (await self.call("apps.connections.open")).get("url")
        if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
            raise RetryableError(f"no WebSocket URL in the answer ({str(url)[:40]!r})", method="apps.connections.open")
        return url

    async def post_message(self, channel: str, text: str, thread_ts: Optional[str] = None,
                           blocks: Optional[list] = None) -> str:
        """chat.postMessage; returns the new message's ts (its id in the channel). With ``blocks`` the text is the
        notification's fallback and the blocks are what is shown."""
        answer = await self.call("chat.postMessage", {"channel": channel, "text": text, "thread_ts": thread_ts,
                                                      "blocks": blocks})
        ts = answer.get("ts")
        if not isinstance(ts, str) or not ts:
            raise RetryableError("the answer names no ts", method="chat.postMessage", maybe_done=True)
        return ts

    async def update(self, channel: str, ts: str, text: str, blocks: Optional[list] = None) -> None:
        await self.call("chat.update", {"channel": channel, "ts": ts, "text": text, "blocks": blocks})

    async def post_ephemeral(self, channel: str, user: str, text: str, thread_ts: Optional[str] = None) -> None:
        """chat.postEphemeral: a message only ``user`` sees, in the channel (and thread), not kept by Slack."""
        await self.call("chat.postEphemeral", {"channel": channel, "user": user, "text": text,
                                               "thread_ts": thread_ts})

    async def delete(self, channel: str, ts: str) -> None:
        await self.call("chat.delete", {"channel": channel, "ts": ts})

    # -- transport
    async def call(self, method: str, params: Optional[dict] = None) -> dict:
        """POST one method with a JSON body (None values left out); the answer, or a PlatformError."""
        payload = {k: v for k, v in (params or {}).items() if v is not None}
        headers = {"Authorization": f"Bearer {self._token}", "Content-Type": "application/json; charset=utf-8"}
        status, answer_headers, body = await self.request_json("POST", self.base_url + method, op=method,
                                                               json=payload, headers=headers, redact=self.redact)
        retry_after = answer_headers.get("Retry-After")
        if status == 200 and isinstance(body, dict) and body.get("ok") is True:
            return body
        error = classify_error(method, status, body, retry_after)
        log.debug("slack %s failed: %s", method, error)
        raise error

    def redact(self, text: str) -> str:
        return redact_secrets(text, [self._token])


def classify_error(method: str, status: int, body: Any, retry_after: Optional[str] = None) -> PlatformError:
    """Map a Web API failure to the exception class that tells the caller what to do."""
    code = str(body.get("error") or "no error code") if isinstance(body, dict) else f"HTTP {status}, no JSON"
    if status == 429 or code == "ratelimited":
        try:
            seconds = max(1.0, float(retry_after)) if retry_after is not None else 1.0
        except ValueError:
            seconds = 1.0
        return FloodError(seconds, code, method=method, status=status)
    if status >= 500 or not isinstance(body, dict):
        return RetryableError(code, method=method, status=status)
    if code in TRANSIENT:
        return RetryableError(code, method=method, status=status, maybe_done=True)
    if code == "msg_too_long":
        return TooLongError(code, method=method, status=status)
    if code == "message_not_found":
        return MessageNotFoundError(code, method=method, status=status)
    return PermanentError(code, method=method, status=status)
