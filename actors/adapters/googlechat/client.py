"""Async client for the Google Chat API (aiohttp): the few calls the app makes, each with ``Authorization: Bearer``
and the service account's access token (auth.py); nothing here stores anything.

    POST   /v1/{space}/messages?requestId=&messageReplyOption=   {text, thread: {name}, cardsV2,
                                                                   privateMessageViewer: {name}}  -> the Message
    PATCH  /v1/{message}?updateMask=text[,cardsV2]                {text[, cardsV2]}        -> the Message
    DELETE /v1/{message}                                                                   -> {}
    GET    /v1/{space}                                            (the doctor: the app can reach a space)
    GET    /v1/media/{resourceName}?alt=media                     a user's uploaded file (media.download)

A ``requestId`` makes a create happen once: Chat answers a repeated one with the message it created then, so a
create whose answer was lost is sent again under the same id and shows once. ``messageReplyOption``
``REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD`` puts the message in the named thread (a new thread if that one is gone).

Failures, as actors.adapters.errors (Google's error body: ``{"error": {"code", "message", "status"}}``):

    429 RESOURCE_EXHAUSTED                 FloodError(Retry-After, else ``rate_limit_wait_s`` doubled for each 429
                                           in a row of that space, at most ``MAX_FLOOD_WAIT_S``: Google names no
                                           wait and asks for exponential backoff)
    401 UNAUTHENTICATED                    RetryableError once, the access token forgotten (asked again first)
    5xx, network errors, timeouts          RetryableError (``maybe_done`` once a write may have left)
    400 naming the text's length           TooLongError
    404 NOT_FOUND on a patch or delete     MessageNotFoundError
    400, 403, 404, anything else           PermanentError (the app not in the space, a wrong space name)
"""
from __future__ import annotations

from typing import Any, Optional
from urllib.parse import quote

from actors.adapters.bearer_tokens import AccessTokens
from actors.adapters.errors import (FloodError, MessageNotFoundError, PermanentError, PlatformError, RetryableError,
                                    TooLongError)
from actors.adapters.http_session import FloodStreaks, HttpSession, retry_after_header
from common.redact import redact as redact_secrets

REPLY_IN_THREAD = "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"
MAX_FLOOD_WAIT_S = 64.0
REMEMBERED_FLOODED_SPACES = 4096
WRITES = ("create", "patch", "delete")


class ChatAPI(HttpSession):
    def __init__(self, tokens: AccessTokens, base_url: str, request_timeout: float = 30.0,
                 rate_limit_wait_s: float = 5.0):
        super().__init__(request_timeout=request_timeout)
        self.tokens, self.base_url = tokens, base_url.rstrip("/")
        self.rate_limit_wait_s = rate_limit_wait_s
        self.floods = FloodStreaks(rate_limit_wait_s, MAX_FLOOD_WAIT_S, REMEMBERED_FLOODED_SPACES)

    def __repr__(self) -> str:   # never the token
        return f"ChatAPI(base_url={self.base_url!r})"

    def redact(self, text: str) -> str:
        token = self.tokens.secret()
        return redact_secrets(text, [token] if token else [])

    async def create(self, space: str, text: str, request_id: str, thread: Optional[str] = None,
                     cards: Optional[list] = None, private_viewer: Optional[str] = None) -> dict:
        """``cards``: the message's ``cardsV2`` (cards.py); ``private_viewer``: the one user who sees it (a private
        message, which Chat allows only under app authentication, as here)."""
        params = {"requestId": request_id}
        body: dict = {"text": text}
        if cards:
            body["cardsV2"] = cards
        if private_viewer:
            body["privateMessageViewer"] = {"name": private_viewer}
        if thread:
            params["messageReplyOption"] = REPLY_IN_THREAD
            body["thread"] = {"name": thread}
        return await self._call("POST", f"/v1/{_path(space)}/messages", "create", space, params=params, json=body)

    async def patch(self, message: str, text: str, cards: Optional[list] = None) -> dict:
        """The text, and with ``cards`` the ``cardsV2`` too ([]: the card removed)."""
        if cards is None:
            return await self._call("PATCH", f"/v1/{_path(message)}", "patch", space_of(message),
                                    params={"updateMask": "text"}, json={"text": text})
        return await self._call("PATCH", f"/v1/{_path(message)}", "patch", space_of(message),
                                params={"updateMask": "text,cardsV2"}, json={"text": text, "cardsV2": cards})

    async def delete(self, message: str) -> None:
        await self._call("DELETE", f"/v1/{_path(message)}", "delete", space_of(message))

    async def space(self, space: str) -> dict:
        return await self._call("GET", f"/v1/{_path(space)}", "space", space)

    async def download(self, http: HttpSession, resource: str, cap: int, too_large) -> bytes:
        """``media.download`` of an attachment's ``attachmentDataRef.resourceName`` (the app's ``chat.bot`` scope
        may: developers.google.com/workspace/chat/api/reference/rest/v1/media/download), at most ``cap`` bytes."""
        headers = {"Authorization": f"Bearer {await self.tokens.token()}"}

        def refused(status, body, answer_headers):
            if status == 401:
                self.tokens.forget()
            return classify("download", status, body, answer_headers, self.rate_limit_wait_s)
        return await http.download(f"{self.base_url}/v1/media/{_path(resource)}?alt=media", cap, too_large,
                                   op="download", refused=refused, redact=self.redact, headers=headers)

    async def _call(self, http_method: str, path: str, op: str, space: str, **kwargs) -> dict:
        headers = {"Authorization": f"Bearer {await self.tokens.token()}"}
        status, answer_headers, body = await self.request_json(http_method, self.base_url + path, op=op,
                                                               redact=self.redact, headers=headers, **kwargs)
        if 200 <= status < 300:
            self.floods.answered(space)
            return body if isinstance(body, dict) else {}
        if status == 401:
            self.tokens.forget()
        wait = self.floods.flooded(space) if status == 429 else self.rate_limit_wait_s
        raise classify(op, status, body, answer_headers, wait)


def space_of(message: str) -> str:
    """``spaces/A`` of ``spaces/A/messages/B``."""
    return "/".join(message.split("/")[:2])


def _path(name: str) -> str:
    return quote(name, safe="/")


def classify(op: str, status: int, body: Any, headers=None, rate_limit_wait_s: float = 5.0) -> PlatformError:
    """Map a failed answer to the exception class that tells the caller what to do (the module docstring)."""
    error = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else {}
    message = str(error.get("message") or "")[:200]
    description = f"{error.get('status') or 'HTTP'} {status}: {message}".strip().rstrip(":")
    if status == 429:
        return FloodError(retry_after_header(headers) or rate_limit_wait_s, description, method=op)
    if status == 401:
        return RetryableError(f"{description} (the access token is asked for again)", method=op, status=status)
    if status >= 500:
        return RetryableError(description, method=op, status=status, maybe_done=op in WRITES)
    if status == 400 and ("length" in message.lower() or "too long" in message.lower()):
        return TooLongError(description, method=op, status=status)
    if status == 404 and op in ("patch", "delete"):
        return MessageNotFoundError(description, method=op, status=status)
    return PermanentError(description, method=op, status=status)
