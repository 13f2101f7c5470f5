"""Async client for signal-cli's HTTP daemon (``signal-cli daemon --http``): JSON-RPC 2.0 on ``POST /api/v1/rpc``,
the health check ``GET /api/v1/check``, and every failure raised as one of actors.adapters.errors:

    JSON-RPC -5 (rate limited)                        FloodError(retry_after: the longest retryAfterSeconds given)
    -1 "Failed to send message", every result a NETWORK_FAILURE   RetryableError (signal-cli says it did not send)
    -3 (I/O), -32603 (internal), HTTP 5xx, network    RetryableError (``maybe_done`` only where the request left
                                                      and no answer came back: HttpSession decides)
    -1 (user error: unregistered, unknown group, not a member), -4 (untrusted identity), -32600..-32602,
    HTTP 4xx (421: the daemon pins its Host header; 415, 404, 405)          PermanentError

signal-cli's HTTP daemon has no authentication (its log says so): whoever reaches the port can send as the bot, so
it listens on loopback (actors/adapters/signal/README.md). The one secret-like thing is the bot's number, never in an error text here.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import itertools
import json
from typing import Any, Optional

import aiohttp

from actors.adapters.errors import FloodError, PermanentError, PlatformError, RetryableError
from actors.adapters.http_session import HttpSession, capped_body

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
USER_ERROR, IO_ERROR, UNTRUSTED_KEY, RATE_LIMITED = -1, -3, -4, -5
INTERNAL_ERROR = -32603


class AttachmentTooBig(Exception):
    def __init__(self, size: int):
        super().__init__(f"{size} bytes")
        self.size = size


class SignalRPC(HttpSession):
    """``SignalRPC(base_url, account=None)``; ``account`` is sent with every call (a multi-account daemon needs
    it to pick the account; a single-account daemon takes none)."""

    def __init__(self, base_url: str = DEFAULT_BASE_URL, account: Optional[str] = None,
                 request_timeout: float = 60.0):
        super().__init__(request_timeout=request_timeout)
        self.base_url = base_url.rstrip("/")
        self.account = account
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"SignalRPC(base_url={self.base_url!r})"

    def redact(self, text: str) -> str:
        return text

    # -- calls
    async def check(self) -> None:
        """``GET /api/v1/check``: 200 while the daemon runs."""
        status, _, _ = await self.request_json("GET", self.base_url + "/api/v1/check", op="check")
        if status != 200:
            raise (RetryableError if status >= 500 else PermanentError)(
                f"HTTP {status} for /api/v1/check", method="check", status=status)

    async def version(self) -> str:
        answer = await self.call("version")
        return str(answer.get("version")) if isinstance(answer, dict) else "?"

    async def send(self, chat: dict, text: str) -> int:
        """A message to ``chat`` (``recipient_params``): the timestamp that names it on Signal."""
        return _timestamp(await self.call("send", dict(chat, message=text)), "send")

    async def send_voice_note(self, chat: dict, data: bytes, mime: str, name: str, caption: str = "") -> int:
        """A voice note to ``chat``: the audio as an attachment given as a data URI (``data:MIME;filename=NAME;
        base64,DATA``, as signal-cli's ``--attachment`` takes one), marked ``voiceNote`` (signal-cli 0.14.2 and
        later; Signal clients then show a voice message with its player). The timestamp that names it."""
        uri = f"data:{mime or 'audio/ogg'};filename={name or 'voice.ogg'};base64,{base64.b64encode(data).decode()}"
        params = dict(chat, attachments=[uri], voiceNote=True)
        if caption:
            params["message"] = caption
        return _timestamp(await self.call("send", params), "send")

    async def send_typing(self, chat: dict) -> None:
        await self.call("sendTyping", dict(chat))

    async def remote_delete(self, chat: dict, timestamp: int) -> None:
        await self.call("remoteDelete", dict(chat, targetTimestamp=timestamp))

    async def get_attachment(self, attachment_id: str, chat: dict, cap: int) -> bytes:
        """The bytes of a received attachment signal-cli stored (``getAttachment``: base64 in the answer). The
        answer is read up to what ``cap`` bytes take in base64, no further."""
        params = {"id": attachment_id, **({"groupId": chat["groupId"]} if "groupId" in chat
                                          else {"recipient": chat["recipient"][0]})}
        limit = (cap + 2) // 3 * 4 + 4096
        answer = await self.call("getAttachment", params, max_answer_bytes=limit)
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, str):
            raise PermanentError("getAttachment answered no data", method="getAttachment")
        try:
            content = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise PermanentError("getAttachment answered data that is not base64", method="getAttachment") from None
        if len(content) > cap:
            raise AttachmentTooBig(len(content))
        return content

    # -- transport
    async def call(self, method: str, params: Optional[dict] = None, *, max_answer_bytes: Optional[int] = None) -> Any:
        """One JSON-RPC request: its ``result``, or the error raised as its class."""
        params = dict(params or {})
        if self.account:
            params["account"] = self.account
        body = {"jsonrpc": "2.0", "method": method, "params": params, "id": next(self._ids)}
        if max_answer_bytes is None:
            status, _, answer = await self.request_json("POST", self.base_url + "/api/v1/rpc", op=method, json=body)
        else:
            status, answer = await self._bounded(method, body, max_answer_bytes)
        if status != 200 or not isinstance(answer, dict):
            raise (RetryableError if status >= 500 else PermanentError)(
                f"HTTP {status}" + ("" if status != 421 else ": the daemon refused the Host header (it pins it to "
                                    "the address it listens on)"), method=method, status=status)
        if "error" in answer:
            raise classify_error(method, answer["error"])
        return answer.get("result")

    async def _bounded(self, method: str, body: dict, limit: int) -> tuple[int, Any]:
        timeout = aiohttp.ClientTimeout(total=self.request_timeout)
        try:
            async with self.session().post(self.base_url + "/api/v1/rpc", json=body, timeout=timeout) as resp:
                raw = await capped_body(resp, limit, lambda size: AttachmentTooBig(size // 4 * 3))   # base64
                status = resp.status
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise RetryableError(f"network error: {type(exc).__name__}: {exc}", method=method) from None
        try:
            return status, json.loads(bytes(raw)) if raw else None
        except ValueError:
            return status, None


def _timestamp(result: Any, method: str) -> int:
    timestamp = result.get("timestamp") if isinstance(result, dict) else None
    if type(timestamp) is not int:
        raise PermanentError(f"{method} answered no timestamp: {str(result)[:80]}", method=method)
    return timestamp


def classify_error(method: str, error: Any) -> PlatformError:
    """Map a JSON-RPC error object of signal-cli to the exception class that tells the caller what to do."""
    error = error if isinstance(error, dict) else {}
    code = error.get("code") if type(error.get("code")) is int else None
    results = _results(error.get("data"))
    types = sorted({r.get("type") for r in results if isinstance(r.get("type"), str)})
    description = f"{error.get('message') or 'error'}" + (f" ({', '.join(types)})" if types else "") + \
        (f" [code {code}]" if code is not None else "")
    if code == RATE_LIMITED or (types and set(types) == {"RATE_LIMIT_FAILURE"}):
        waits = [r["retryAfterSeconds"] for r in results if type(r.get("retryAfterSeconds")) is int]
        return FloodError(float(max(waits)) if waits else 1.0, description, method=method, status=code)
    if code == USER_ERROR and types and set(types) == {"NETWORK_FAILURE"}:
        return RetryableError(description, method=method, status=code)
    if code in (IO_ERROR, INTERNAL_ERROR):
        return RetryableError(description, method=method, status=code)
    return PermanentError(description, method=method, status=code)


def _results(data: Any) -> list:
    response = data.get("response") if isinstance(data, dict) else None
    results = response.get("results") if isinstance(response, dict) else None
    return [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []
