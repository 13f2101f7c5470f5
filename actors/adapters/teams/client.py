"""Async client for the Bot Connector REST API (aiohttp): the calls the bot makes, each at the conversation's
``serviceUrl`` (which the adapter checked: serviceurls.py) with ``Authorization: Bearer`` and the bot's access token
(auth.py); nothing here stores anything.

    POST   {serviceUrl}v3/conversations/{conversation}/activities               an activity -> {"id"}
    POST   {serviceUrl}v3/conversations/{conversation}/activities/{replyToId}   a reply in a thread -> {"id"}
    PUT    {serviceUrl}v3/conversations/{conversation}/activities/{id}          the updated activity -> {"id"}
    DELETE {serviceUrl}v3/conversations/{conversation}/activities/{id}

Failures, as actors.adapters.errors (the Connector's error body: ``{"error": {"code", "message"}}``):

    429, 412 (Teams' throttling)     FloodError(Retry-After, else ``rate_limit_wait_s`` doubled for each one in a row
                                     of that conversation, at most ``MAX_FLOOD_WAIT_S``: exponential backoff, as
                                     Microsoft asks)
    401                              RetryableError once, the access token forgotten (asked again first)
    5xx, network errors, timeouts    RetryableError (``maybe_done`` once a write may have left)
    413, 400 naming the size         TooLongError
    404 on an update or a delete     MessageNotFoundError
    400, 403, 404, anything else     PermanentError (the bot removed from the conversation, a wrong id)
"""
from __future__ import annotations

from typing import Any, Optional
from urllib.parse import quote

from actors.adapters.errors import (FloodError, MessageNotFoundError, PermanentError, PlatformError, RetryableError,
                                    TooLongError)
from actors.adapters.http_session import FloodStreaks, HttpSession, retry_after_header
from actors.adapters.teams.auth import BotTokens
from actors.adapters.teams.files import content_range, upload_ranges
from common.redact import redact as redact_secrets

MAX_FLOOD_WAIT_S = 64.0
REMEMBERED_FLOODED_CHATS = 4096
WRITES = ("send", "reply", "update", "delete", "typing")
THROTTLED = (429, 412)


class ConnectorAPI(HttpSession):
    def __init__(self, tokens: BotTokens, request_timeout: float = 30.0, rate_limit_wait_s: float = 2.0):
        super().__init__(request_timeout=request_timeout)
        self.tokens = tokens
        self.rate_limit_wait_s = rate_limit_wait_s
        self.floods = FloodStreaks(rate_limit_wait_s, MAX_FLOOD_WAIT_S, REMEMBERED_FLOODED_CHATS)

    def __repr__(self) -> str:   # never the token
        return "ConnectorAPI()"

    def redact(self, text: str) -> str:
        secrets = [s for s in (self.tokens.secret(), self.tokens.password) if s]
        return redact_secrets(text, secrets)

    async def send(self, service_url: str, conversation: str, activity: dict,
                   reply_to: Optional[str] = None) -> dict:
        path = _activities(conversation) + (f"/{quote(reply_to, safe='')}" if reply_to else "")
        op = "typing" if activity.get("type") == "typing" else "reply" if reply_to else "send"
        return await self._call("POST", service_url, path, op, conversation, json=activity)

    async def update(self, service_url: str, conversation: str, activity_id: str, activity: dict) -> dict:
        return await self._call("PUT", service_url, f"{_activities(conversation)}/{quote(activity_id, safe='')}",
                                "update", conversation, json=activity)

    async def delete(self, service_url: str, conversation: str, activity_id: str) -> None:
        await self._call("DELETE", service_url, f"{_activities(conversation)}/{quote(activity_id, safe='')}",
                         "delete", conversation)

    async def _call(self, http_method: str, service_url: str, path: str, op: str, conversation: str,
                    **kwargs) -> dict:
        headers = {"Authorization": f"Bearer {await self.tokens.token()}"}
        status, answer_headers, body = await self.request_json(http_method, service_url.rstrip("/") + path, op=op,
                                                               redact=self.redact, headers=headers, **kwargs)
        if 200 <= status < 300:
            self.floods.answered(conversation)
            return body if isinstance(body, dict) else {}
        if status == 401:
            self.tokens.forget()
        wait = self.floods.flooded(conversation) if status in THROTTLED else self.rate_limit_wait_s
        raise classify(op, status, body, answer_headers, wait)


async def put_file(http: HttpSession, upload_url: str, data: bytes, redact=lambda text: text) -> None:
    """The bytes PUT to a OneDrive upload session (files.py), range after range; no bot token goes with them (the
    session's URL is its own authorisation). A 202 asks for the next range; 200 or 201 is the whole file. A refusal
    is a PermanentError (the session expired or was cancelled: a new Allow makes a new one); a 5xx or a network
    error a RetryableError of ``upload``."""
    size = len(data)
    for first, last in upload_ranges(size):
        headers = {"Content-Range": content_range(first, last, size)}
        status, _, body = await http.request_json("PUT", upload_url, op="upload", redact=redact, headers=headers,
                                                  data=data[first:last + 1], timeout=max(http.request_timeout, 60.0))
        done = last + 1 >= size
        if status in (200, 201) and done or status == 202 and not done:
            continue
        error = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else {}
        description = f"the upload session answered {status} {str(error.get('message') or '')[:200]}".strip()
        if status >= 500:
            raise RetryableError(description, method="upload", status=status, maybe_done=True)
        raise PermanentError(description, method="upload", status=status)


def _activities(conversation: str) -> str:
    return f"/v3/conversations/{quote(conversation, safe='')}/activities"


def classify(op: str, status: int, body: Any, headers=None, rate_limit_wait_s: float = 2.0) -> PlatformError:
    """Map a failed answer to the exception class that tells the caller what to do (the module docstring)."""
    error = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else {}
    message = str(error.get("message") or "")[:200]
    description = f"{error.get('code') or 'HTTP'} {status}: {message}".strip().rstrip(":")
    if status in THROTTLED:
        return FloodError(retry_after_header(headers) or rate_limit_wait_s, description, method=op)
    if status == 401:
        return RetryableError(f"{description} (the access token is asked for again)", method=op, status=status)
    if status >= 500:
        return RetryableError(description, method=op, status=status, maybe_done=op in WRITES)
    if status == 413 or (status == 400 and any(w in message.lower() for w in ("too large", "too big", "size"))):
        return TooLongError(description, method=op, status=status)
    if status == 404 and op in ("update", "delete"):
        return MessageNotFoundError(description, method=op, status=status)
    return PermanentError(description, method=op, status=status)
