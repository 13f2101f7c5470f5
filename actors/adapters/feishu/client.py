"""Async client for the Feishu / Lark open platform (aiohttp): the few calls the adapter makes. Nothing here stores
anything but the tenant access token it made.

    POST   /open-apis/auth/v3/tenant_access_token/internal {app_id, app_secret}  -> {tenant_access_token, expire}
    GET    /open-apis/bot/v3/info                                                -> {"bot": {"open_id", ...}}
    POST   /open-apis/im/v1/messages?receive_id_type=chat_id {receive_id, msg_type, content, uuid}
    POST   /open-apis/im/v1/messages/:id/reply {msg_type, content, reply_in_thread, uuid}
    PUT    /open-apis/im/v1/messages/:id {msg_type, content}                    an edit (text and post only)
    DELETE /open-apis/im/v1/messages/:id                                         a recall
    POST   /open-apis/im/v1/images (multipart: image_type, image)               -> {image_key}
    POST   /open-apis/im/v1/files (multipart: file_type, file_name, file)       -> {file_key}
    POST   /open-apis/im/v1/messages/:id/reactions {reaction_type: {emoji_type}} -> {reaction_id}
    GET    /open-apis/im/v1/messages/:id/reactions                               -> {items: [{reaction_id, operator,
                                                                                 reaction_type: {emoji_type}}]}
    DELETE /open-apis/im/v1/messages/:id/reactions/:reaction_id
    GET    /open-apis/im/v1/messages/:id/resources/:key?type=image|file          the bytes of a user's file
    POST   /callback/ws/endpoint {AppID, AppSecret}                              -> {URL, ClientConfig}: the long
                                                                                 connection's WebSocket (no token)

Every answer is ``{"code", "msg", "data"}``, code 0 for success. The tenant access token (``Authorization: Bearer
t-...``) lives 2 hours; it is made once and made again 5 minutes before it expires (or at once when an answer
calls it invalid: 99991663, 99991661, 99991668), never per request. A ``uuid`` (at most 50 characters) makes a send
happen once within an hour whatever the number of requests carrying it: the repeat is answered with the first
message.

Failures, as actors.adapters.errors:

    HTTP 429 or code 99991400 (frequency limit)   FloodError(x-ogw-ratelimit-reset, else ``rate_limit_wait_s``)
    5xx, network errors, timeouts                 RetryableError (``maybe_done`` once a send may have left)
    230001 / 230025 / "too long"                  TooLongError (the content is over the limit)
    230011 / 231003 (message recalled or gone)    MessageNotFoundError
    anything else (no permission, not in chat)    PermanentError, with the platform's code and words
"""
from __future__ import annotations

import json
import time
from typing import Any, Optional
from urllib.parse import quote

import aiohttp

from actors.adapters.app_tokens import AppToken
from actors.adapters.errors import (FloodError, MessageNotFoundError, PermanentError, PlatformError, RetryableError,
                                    TooLongError)
from actors.adapters.http_session import HttpSession
from common.redact import redact as redact_secrets

FREQUENCY_LIMIT = 99991400
TOKEN_INVALID = {99991661, 99991663, 99991668}
TOO_LONG = {230001, 230025}
MESSAGE_GONE = {230011, 231003}
SEND_OPS = ("create", "reply")
# The long connection's endpoint answers these when the fault is the platform's (the SDK retries them); any other
# non-zero code refuses the app (a wrong secret, for one).
ENDPOINT_BUSY = {1, 1000040343}


class ResourceTooLarge(Exception):
    def __init__(self, size: int):
        super().__init__(f"{size} bytes")
        self.size = size


class FeishuAPI(HttpSession):
    def __init__(self, base_url: str, app_id: str, app_secret: str, request_timeout: float = 30.0,
                 rate_limit_wait_s: float = 2.0, clock=time.monotonic):
        super().__init__(request_timeout=request_timeout)
        self.base_url = base_url.rstrip("/")
        self.app_id, self._secret = app_id, app_secret
        self.rate_limit_wait_s = rate_limit_wait_s
        self._token = AppToken(self._make_token, clock)

    def __repr__(self) -> str:   # never the secret or the token
        return f"FeishuAPI(base_url={self.base_url!r}, app_id={self.app_id!r})"

    def redact(self, text: str) -> str:
        return redact_secrets(text, [self._secret] + ([self._token.value] if self._token.value else []))

    @property
    def tokens_made(self) -> int:
        return self._token.made

    async def token(self) -> str:
        """The tenant access token, made again only near its expiry (app_tokens.py)."""
        return await self._token.get()

    async def _make_token(self) -> tuple[str, float]:
        status, headers, body = await self.request_json(
            "POST", self.base_url + "/open-apis/auth/v3/tenant_access_token/internal", op="token",
            redact=self.redact, json={"app_id": self.app_id, "app_secret": self._secret})
        if status != 200 or not isinstance(body, dict) or body.get("code") != 0:
            raise classify("token", status, body, headers, self.rate_limit_wait_s)
        token, expire = body.get("tenant_access_token"), body.get("expire")
        if not isinstance(token, str) or not isinstance(expire, int):
            raise RetryableError("the token answer names no token", method="token")
        return token, expire

    async def call(self, http_method: str, path: str, op: str, form=None, **kwargs) -> dict:
        """One API call; its ``data`` object. An answer calling the token invalid makes a new one, and the call goes
        once more. ``form`` makes a multipart body (one per attempt: a body is consumed by its request)."""
        for attempt in range(2):
            headers = {"Authorization": f"Bearer {await self.token()}"}
            if form is not None:
                kwargs["data"] = form()
            status, answer_headers, body = await self.request_json(http_method, self.base_url + path, op=op,
                                                                   redact=self.redact, headers=headers, **kwargs)
            if status == 200 and isinstance(body, dict) and body.get("code") == 0:
                return body.get("data") if isinstance(body.get("data"), dict) else {}
            if attempt == 0 and isinstance(body, dict) and body.get("code") in TOKEN_INVALID:
                self._token.forget()
                continue
            raise classify(op, status, body, answer_headers, self.rate_limit_wait_s)
        raise AssertionError("unreachable")

    async def bot_info(self) -> dict:
        status, headers, body = await self.request_json(
            "GET", self.base_url + "/open-apis/bot/v3/info", op="bot_info", redact=self.redact,
            headers={"Authorization": f"Bearer {await self.token()}"})
        if status == 200 and isinstance(body, dict) and body.get("code") == 0 and isinstance(body.get("bot"), dict):
            return body["bot"]
        raise classify("bot_info", status, body, headers, self.rate_limit_wait_s)

    async def ws_endpoint(self) -> tuple[str, dict]:
        """The long connection's WebSocket URL (its query names the connection's ``device_id`` and ``service_id``)
        and the platform's ``ClientConfig`` for it (reconnect and ping intervals, seconds). Asked anew for every
        connection."""
        status, headers, body = await self.request_json(
            "POST", self.base_url + "/callback/ws/endpoint", op="ws_endpoint", redact=self.redact,
            headers={"locale": "zh"}, json={"AppID": self.app_id, "AppSecret": self._secret})
        code = body.get("code") if isinstance(body, dict) else None
        if status == 200 and code == 0:
            data = body.get("data") if isinstance(body.get("data"), dict) else {}
            url = data.get("URL")
            if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
                raise RetryableError("the endpoint answer names no WebSocket URL", method="ws_endpoint")
            config = data.get("ClientConfig")
            return url, config if isinstance(config, dict) else {}
        if status == 200 and code not in ENDPOINT_BUSY:
            words = str(body.get("msg") or "")[:200] if isinstance(body, dict) else ""
            raise PermanentError(f"the long connection's endpoint refused the app: {words or 'no reason'} "
                                 f"(code {code})", method="ws_endpoint", status=status)
        raise RetryableError(f"the long connection's endpoint is busy: HTTP {status}"
                             + (f" (code {code})" if code is not None else ""), method="ws_endpoint", status=status)

    async def create(self, chat_id: str, msg_type: str, content: dict, uuid: Optional[str]) -> str:
        body = {"receive_id": chat_id, "msg_type": msg_type, "content": json.dumps(content, ensure_ascii=False)}
        if uuid:
            body["uuid"] = uuid
        data = await self.call("POST", "/open-apis/im/v1/messages?receive_id_type=chat_id", "create", json=body)
        return message_id_of(data, "create")

    async def reply(self, message_id: str, msg_type: str, content: dict, uuid: Optional[str],
                    in_thread: bool) -> str:
        body = {"msg_type": msg_type, "content": json.dumps(content, ensure_ascii=False), "reply_in_thread": in_thread}
        if uuid:
            body["uuid"] = uuid
        data = await self.call("POST", f"/open-apis/im/v1/messages/{quote(message_id, safe='')}/reply", "reply",
                               json=body)
        return message_id_of(data, "reply")

    async def update(self, message_id: str, msg_type: str, content: dict) -> None:
        await self.call("PUT", f"/open-apis/im/v1/messages/{quote(message_id, safe='')}", "update",
                        json={"msg_type": msg_type, "content": json.dumps(content, ensure_ascii=False)})

    async def recall(self, message_id: str) -> None:
        await self.call("DELETE", f"/open-apis/im/v1/messages/{quote(message_id, safe='')}", "recall")

    async def add_reaction(self, message_id: str, emoji_type: str) -> str:
        data = await self.call("POST", f"/open-apis/im/v1/messages/{quote(message_id, safe='')}/reactions",
                               "add_reaction", json={"reaction_type": {"emoji_type": emoji_type}})
        reaction = data.get("reaction_id")
        if not isinstance(reaction, str):
            raise RetryableError("the answer names no reaction", method="add_reaction")
        return reaction

    async def reactions(self, message_id: str) -> list[dict]:
        """The message's reactions (the first 50: a status reaction is one of the bot's few)."""
        data = await self.call("GET", f"/open-apis/im/v1/messages/{quote(message_id, safe='')}/reactions"
                                      "?page_size=50", "reactions")
        items = data.get("items")
        return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []

    async def remove_reaction(self, message_id: str, reaction_id: str) -> None:
        await self.call("DELETE", f"/open-apis/im/v1/messages/{quote(message_id, safe='')}/reactions/"
                                  f"{quote(reaction_id, safe='')}", "remove_reaction")

    async def upload_image(self, data: bytes, name: str, mime: str) -> str:
        """An image to send (``image_type`` message): its ``image_key``."""
        def form() -> aiohttp.FormData:
            body = aiohttp.FormData()
            body.add_field("image_type", "message")
            body.add_field("image", data, filename=name or "image", content_type=mime or "application/octet-stream")
            return body
        return _key_of(await self.call("POST", "/open-apis/im/v1/images", "upload_image", form=form), "image_key",
                       "upload_image")

    async def upload_file(self, data: bytes, name: str, mime: str, file_type: str) -> str:
        """A file to send: its ``file_key``."""
        def form() -> aiohttp.FormData:
            body = aiohttp.FormData()
            body.add_field("file_type", file_type)
            body.add_field("file_name", name)
            body.add_field("file", data, filename=name, content_type=mime or "application/octet-stream")
            return body
        return _key_of(await self.call("POST", "/open-apis/im/v1/files", "upload_file", form=form), "file_key",
                       "upload_file")

    async def resource(self, message_id: str, key: str, resource_type: str, cap: int) -> bytes:
        """The bytes of a user's image or file, read in pieces and given up past ``cap`` (ResourceTooLarge)."""
        url = (f"{self.base_url}/open-apis/im/v1/messages/{quote(message_id, safe='')}/resources/"
               f"{quote(key, safe='')}?type={quote(resource_type, safe='')}")
        return await self.download(
            url, cap, ResourceTooLarge, op="resource", redact=self.redact,
            headers={"Authorization": f"Bearer {await self.token()}"},
            refused=lambda status, body, headers: classify("resource", status, body, headers, self.rate_limit_wait_s),
            ready=lambda resp: resp.status == 200 and resp.content_type != "application/json")


def _key_of(data: dict, field: str, op: str) -> str:
    value = data.get(field)
    if not isinstance(value, str) or not value:
        raise RetryableError(f"the answer names no {field}", method=op)
    return value


def file_type(mime: str, name: str) -> str:
    """The ``file_type`` an upload names (the platform shows a file by it): pdf, doc, xls, ppt, or stream."""
    mime, name = (mime or "").lower(), (name or "").lower()
    if mime == "application/pdf" or name.endswith(".pdf"):
        return "pdf"
    for kind, marks in (("doc", ("msword", "wordprocessing")), ("xls", ("excel", "spreadsheet")),
                        ("ppt", ("powerpoint", "presentation"))):
        if any(mark in mime for mark in marks):
            return kind
    return "stream"


def message_id_of(data: dict, op: str) -> str:
    value = data.get("message_id")
    if not isinstance(value, str) or not value:
        raise RetryableError("the answer names no message", method=op, maybe_done=True)
    return value


def _reset_after(headers) -> Optional[float]:
    try:
        value = float((headers or {}).get("x-ogw-ratelimit-reset", ""))
    except ValueError:
        return None
    return value if 0 <= value <= 3600 else None


def classify(op: str, status: int, body: Any, headers=None, rate_limit_wait_s: float = 2.0) -> PlatformError:
    """Map a failed answer to the exception class that tells the caller what to do (the module docstring)."""
    code = body.get("code") if isinstance(body, dict) else None
    words = str(body.get("msg") or "")[:200] if isinstance(body, dict) else ""
    description = f"{words or f'HTTP {status}'}" + (f" (code {code})" if code is not None else "")
    if status == 429 or code == FREQUENCY_LIMIT:
        return FloodError(_reset_after(headers) or rate_limit_wait_s, description, method=op)
    if status >= 500:
        return RetryableError(description, method=op, status=status, maybe_done=op in SEND_OPS)
    if code in TOO_LONG or "too long" in words.lower():
        return TooLongError(description, method=op, status=status)
    if code in MESSAGE_GONE:
        return MessageNotFoundError(description, method=op, status=status)
    return PermanentError(description, method=op, status=status)

