"""Async client for the LINE Messaging API (aiohttp): the few calls the adapter makes. Every call carries the
channel access token as ``Authorization: Bearer``; nothing here stores or remembers anything.

    GET  /v2/bot/info                                  who the bot is (connect: a refused token fails here)
    POST /v2/bot/message/reply   {replyToken, messages}                 -> {"sentMessages": [{"id", ...}]}
    POST /v2/bot/message/push    {to, messages} + X-Line-Retry-Key      -> the same
    POST /v2/bot/chat/loading/start {chatId, loadingSeconds}             -> 202 {}
    GET  <data>/v2/bot/message/{id}/content                            -> the bytes of a user's file

A retry key (a UUID) makes a push happen once whatever the number of requests carrying it: LINE answers a repeated
key 409 with ``x-line-accepted-request-id`` and the ``sentMessages`` of the push that was accepted, so a 409 is the
first push's success, and its message id is the answer. The reply API takes no retry key (LINE refuses one with
400); a reply token is single use and expires after about a minute: both are answered 400 "Invalid reply token"
(``ReplyTokenRefused``, for the caller to push instead).

Failures, as actors.adapters.errors:

    429 "You have reached your monthly limit."     QuotaExhausted (permanent: nothing goes until the month ends
                                                   or the plan changes; the operator is told which)
    429 otherwise (rate limit, concurrency)        FloodError(Retry-After, else ``rate_limit_wait_s``)
    5xx, network errors, timeouts                  RetryableError (``maybe_done`` once the request may have left)
    400 with "length" in its details               TooLongError
    400, 401, 403, 404, anything else              PermanentError (a wrong token, a user who blocked the bot, a
                                                   file gone)
"""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

from actors.adapters.errors import FloodError, PermanentError, PlatformError, RetryableError, TooLongError
from actors.adapters.http_session import HttpSession, retry_after_header
from common.redact import redact as redact_secrets

MONTHLY_LIMIT = "monthly limit"


class ReplyTokenRefused(PermanentError):
    """The reply token was used already or has expired: the message did not go; push it instead."""


class QuotaExhausted(PermanentError):
    """LINE's monthly message quota is used up: no push goes until it is renewed."""


class ContentTooLarge(Exception):
    def __init__(self, size: int):
        super().__init__(f"{size} bytes")
        self.size = size


class LineAPI(HttpSession):
    def __init__(self, access_token: str, base_url: str, data_url: str, request_timeout: float = 30.0,
                 rate_limit_wait_s: float = 10.0):
        super().__init__(request_timeout=request_timeout,
                         session_headers={"Authorization": f"Bearer {access_token}"})
        self._token = access_token
        self.base_url, self.data_url = base_url.rstrip("/"), data_url.rstrip("/")
        self.rate_limit_wait_s = rate_limit_wait_s

    def __repr__(self) -> str:   # never the token
        return f"LineAPI(base_url={self.base_url!r})"

    def redact(self, text: str) -> str:
        return redact_secrets(text, [self._token])

    async def bot_info(self) -> dict:
        return await self._call("GET", "/v2/bot/info", "info")

    async def reply(self, reply_token: str, messages: list[dict]) -> list[str]:
        """The ids of the messages sent with the reply token; ReplyTokenRefused if it is used or expired."""
        body = await self._call("POST", "/v2/bot/message/reply", "reply",
                                json={"replyToken": reply_token, "messages": messages})
        return sent_ids(body, "reply")

    async def push(self, to: str, messages: list[dict], retry_key: str) -> list[str]:
        """The ids of the messages pushed under ``retry_key``: those of this request, or, for a key LINE accepted
        before (409), those of the request it accepted then."""
        status, headers, body = await self.request_json(
            "POST", self.base_url + "/v2/bot/message/push", op="push", redact=self.redact,
            json={"to": to, "messages": messages}, headers={"X-Line-Retry-Key": retry_key})
        if status == 200 or (status == 409 and isinstance(body, dict) and body.get("sentMessages")):
            return sent_ids(body, "push")
        if status == 409:   # accepted before, and LINE named no message: the push is done, its id unknown here
            accepted = headers.get("x-line-accepted-request-id") or "?"
            return [f"request:{accepted[:64]}"]
        raise classify("push", status, body, headers, self.rate_limit_wait_s)

    async def show_loading(self, chat_id: str, seconds: int) -> None:
        await self._call("POST", "/v2/bot/chat/loading/start", "loading",
                         json={"chatId": chat_id, "loadingSeconds": seconds})

    async def content(self, message_id: str, cap: int) -> bytes:
        """The bytes of a user's image, audio or file, read in pieces and given up past ``cap`` (ContentTooLarge).
        202: LINE is still preparing it (a retry comes later); 404: gone or never there."""
        def refused(status: int, body: Any, headers) -> Exception:
            if status == 202:
                return RetryableError("the content is still being prepared", method="content", status=202)
            return classify("content", status, body, headers, self.rate_limit_wait_s)
        return await self.download(f"{self.data_url}/v2/bot/message/{quote(message_id, safe='')}/content", cap,
                                   ContentTooLarge, op="content", refused=refused, redact=self.redact)

    async def _call(self, http_method: str, path: str, op: str, **kwargs) -> dict:
        status, headers, body = await self.request_json(http_method, self.base_url + path, op=op,
                                                        redact=self.redact, **kwargs)
        if 200 <= status < 300:
            return body if isinstance(body, dict) else {}
        raise classify(op, status, body, headers, self.rate_limit_wait_s)


def sent_ids(body: Any, op: str) -> list[str]:
    sent = body.get("sentMessages") if isinstance(body, dict) else None
    ids = [str(m["id"]) for m in sent or () if isinstance(m, dict) and m.get("id")]
    if not ids:
        raise RetryableError("the answer names no sent message", method=op, maybe_done=True)
    return ids


def classify(op: str, status: int, body: Any, headers=None, rate_limit_wait_s: float = 10.0) -> PlatformError:
    """Map a failed answer to the exception class that tells the caller what to do (the module docstring)."""
    message = str(body.get("message") or "")[:200] if isinstance(body, dict) else ""
    details = body.get("details") if isinstance(body, dict) and isinstance(body.get("details"), list) else []
    detail = "; ".join(f"{d.get('property', '')}: {d.get('message', '')}"[:120] for d in details[:3]
                       if isinstance(d, dict))
    description = message + (f" ({detail})" if detail else "") or f"HTTP {status}"
    if status == 429 and MONTHLY_LIMIT in message.lower():
        return QuotaExhausted(f"LINE's monthly message quota is used up: {description}; nothing is pushed until "
                              "it renews or the plan allows more (replies with a reply token are free of it)",
                              method=op, status=status)
    if status == 429:
        return FloodError(retry_after_header(headers) or rate_limit_wait_s, description, method=op)
    if status >= 500:
        return RetryableError(description, method=op, status=status, maybe_done=op in ("push", "reply"))
    if status == 400 and op == "reply" and "reply token" in message.lower():
        return ReplyTokenRefused(description, method=op, status=status)
    if status == 400 and "length" in detail.lower():
        return TooLongError(description, method=op, status=status)
    return PermanentError(description, method=op, status=status)

