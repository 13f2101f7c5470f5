"""The generic webhook: ``POST /webhook`` in (HMAC-signed JSON), replies out to ``callback_url`` (signed the same way).

Inbound body: ``{"conversation_id", "user_id", "message_id", "text"}`` (``user_name`` optional). Answers: 401 bad
or missing signature or timestamp (signing.py), 413 body or text too large (``[gateway] max_text_chars``), 400
malformed, 503 not accepting (starting or draining: retry), 202 ``{"accepted": true, "seq": N}`` once the inbox row
is durable, 200 ``{"duplicate": true}`` for a message id already stored. ``message_id`` needs to be unique within its
conversation only.

Outbound: every platform operation on a webhook conversation is POSTed as ``{"conversation_id", "message_id",
"action", "text", "final"}`` (plus ``in_reply_to`` on the first part of a reply). The callback's answer decides what
the gateway does next: 2xx done; 429 wait ``Retry-After`` and retry; 404/410 the message is gone (an edit becomes
a new send); 413 too long; other 4xx permanent; 5xx and network failures retried, then left to the delivery ledger.
A send retried after a lost answer carries the same ``message_id``: receivers should treat it as a replacement.
"""
from __future__ import annotations

import json
import time
from typing import Any, Optional

import aiohttp
from aiohttp import web

from actors.adapters.intake import SenderOverLimit, TextTooLong
from actors.adapters.payload_fields import MalformedPayload, a_string
from actors.adapters.errors import (FloodError, MessageNotFoundError, PermanentError, PlatformError, RetryableError,
                                    TooLongError)
from actors.adapters.http.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, signature_problem, signed_headers
from actors.messages import MessageEvent, PlatformOp, Source
from supervision.http_serving import BodyTimeout, read_body

ORIGIN = "webhook"
API_CHAT_PREFIX = "v1:"          # conversations of the OpenAI-compatible endpoint; refused here
MAX_ID_CHARS = 256
CALLBACK_TIMEOUT_S = 10.0


def inbound_id(conversation_id: str, message_id: str) -> str:
    """The inbox dedup key: senders number messages per conversation, so the conversation is part of it."""
    return f"{conversation_id}/{message_id}"


def webhook_event(body: Any, adapter_name: str, profile: str) -> MessageEvent:
    """The MessageEvent of a webhook body; MalformedPayload names the first problem."""
    if not isinstance(body, dict):
        raise MalformedPayload(f"body must be a JSON object, got {type(body).__name__}")
    for field in ("conversation_id", "user_id", "message_id"):
        value = body.get(field)
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_CHARS:
            raise MalformedPayload(f"{field} must be a non-empty string of at most {MAX_ID_CHARS} characters")
    text = body.get("text")
    a_string(text, "text")
    conversation, user = str(body["conversation_id"]), str(body["user_id"])
    if conversation.startswith(API_CHAT_PREFIX):
        raise MalformedPayload(f"conversation ids starting with {API_CHAT_PREFIX!r} are reserved")
    user_name = body.get("user_name")
    source = Source(platform=adapter_name, chat_id=conversation, chat_type="dm", user_id=user,
                    user_name=user_name if isinstance(user_name, str) and user_name else user, profile=profile)
    return MessageEvent(source=source, text=text, received_at=time.time(),
                        platform_message_id=inbound_id(conversation, str(body["message_id"])))


class WebhookEndpoint:
    """``POST /webhook``. ``adapter`` is the HttpApiAdapter (see its "for the endpoints" section)."""

    def __init__(self, adapter):
        self.adapter = adapter

    async def handle(self, request: web.Request) -> web.Response:
        adapter = self.adapter
        try:
            body = await read_body(request)
        except BodyTimeout as exc:
            adapter.refused(request, f"webhook: {exc}")
            return web.json_response({"error": str(exc)}, status=408)
        except web.HTTPRequestEntityTooLarge:
            adapter.refused(request, "webhook: body too large")
            return web.json_response({"error": "body too large"}, status=413)
        problem = signature_problem(adapter.hmac_secret, body, request.headers.get(SIGNATURE_HEADER),
                                    request.headers.get(TIMESTAMP_HEADER))
        if problem is not None:
            adapter.refused(request, f"webhook: {problem}")
            return web.json_response({"error": problem}, status=401)
        try:
            raw = {"origin": ORIGIN, "body": json.loads(body)}
        except ValueError as exc:     # also UnicodeDecodeError
            raw = {"origin": ORIGIN, "unparsable": f"body is not JSON: {exc}"}
        except RecursionError:        # nested too deeply for json: a 500 would have the sender retry it forever
            raw = {"origin": ORIGIN, "unparsable": "body is not JSON: nested too deeply"}
        try:
            stored = await adapter.ingest(raw)
        except MalformedPayload as exc:
            return web.json_response({"error": str(exc)}, status=400)
        except SenderOverLimit as exc:
            return web.json_response({"error": str(exc)}, status=429, headers={"Retry-After": "10"})
        except TextTooLong as exc:
            return web.json_response({"error": str(exc)}, status=413)
        if stored is None:
            return web.json_response({"error": "not accepting messages right now"}, status=503,
                                     headers={"Retry-After": "1"})
        seq, inserted = stored
        if not inserted:
            return web.json_response({"duplicate": True, "seq": seq}, status=200)
        return web.json_response({"accepted": True, "seq": seq}, status=202)


def callback_payload(op: PlatformOp, message_id: str, file_part: Optional[dict] = None) -> dict:
    """What the callback URL is sent for one operation; a file's send carries its caption as ``text`` and the file
    as ``content``, one OpenAI-style part (content_parts.file_part)."""
    payload = {"conversation_id": op.chat_id, "message_id": message_id, "action": op.action,
               "text": op.text if op.action != "delete" else "", "final": op.final}
    if file_part is not None:
        payload.update(text=op.file.caption, content=[file_part])
    prefix = inbound_id(op.chat_id, "")
    if op.action == "send" and op.reply_to and op.reply_to.startswith(prefix):
        payload["in_reply_to"] = op.reply_to[len(prefix):]
    return payload


def error_for_status(status: int, retry_after: Optional[float], description: str) -> Optional[PlatformError]:
    """What a callback's HTTP status means for the operation: None for success, else the error to raise."""
    method = "callback"
    if 200 <= status < 300:
        return None
    if status == 429:
        return FloodError(retry_after if retry_after is not None else 1.0, description, method=method)
    if status in (404, 410):
        return MessageNotFoundError(description, method=method, status=status)
    if status == 413:
        return TooLongError(description, method=method, status=status)
    if 400 <= status < 500:
        return PermanentError(description, method=method, status=status)
    return RetryableError(description, method=method, status=status, retry_after=retry_after)


def _retry_after(response: aiohttp.ClientResponse, body: Any) -> Optional[float]:
    for value in (response.headers.get("Retry-After"), body.get("retry_after") if isinstance(body, dict) else None):
        try:
            if value is not None:
                return max(0.0, float(value))
        except (TypeError, ValueError):
            continue
    return None


class CallbackClient:
    """POSTs signed operations to the callback URL. Error texts never carry the URL (it may hold a credential)."""

    def __init__(self, url: str, secret: str):
        self.url, self.secret = url, secret
        self._session: Optional[aiohttp.ClientSession] = None

    async def post(self, payload: dict) -> None:
        if not self.url:
            raise PermanentError("no callback_url is configured for webhook replies", method="callback")
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CALLBACK_TIMEOUT_S))
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", **signed_headers(self.secret, body)}
        async with self._session.post(self.url, data=body, headers=headers) as response:
            text = await response.text(errors="replace")
            try:
                parsed = json.loads(text) if text else None
            except ValueError:
                parsed = None
            description = f"HTTP {response.status} {response.reason or ''}".strip()
            error = error_for_status(response.status, _retry_after(response, parsed), description)
        if error is not None:
            raise error

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
