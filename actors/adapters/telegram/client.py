"""Async client for the Telegram Bot API (aiohttp), and the pure text helpers a Telegram adapter needs.

Every failure is raised as one of actors.adapters.errors, classified by what the caller should do:
429 -> FloodError(retry_after); 5xx, network errors, timeouts, 409 -> RetryableError (409: ConflictError);
"can't parse entities" -> FormattingError (resend as plain text); "message is too long" / MESSAGE_TOO_LONG ->
TooLongError (split); "message to edit/delete not found" -> MessageNotFoundError; any other 4xx (blocked,
chat not found, bad token) -> PermanentError. An edit to the same text ("message is not modified") is success.

The token is part of every request URL, so no URL is ever put in an exception or a log line: messages are built
from the method name and Telegram's description, and anything else is passed through ``redact``
(common.redact, with this client's token as a known secret).
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
from urllib.parse import quote
from typing import Any, Optional

import aiohttp

from actors.adapters.http_session import HttpSession, capped_body
from actors.adapters.errors import (ConflictError, FloodError, FormattingError, MessageNotFoundError,
                                    PermanentError, PlatformError, RetryableError, TooLongError)
from common.redact import redact as redact_secrets

UPLOAD_TIMEOUT_S = 180.0   # a 50 MB upload on a slow uplink; the answer comes once Telegram has the whole file

log = logging.getLogger(__name__)


class FileTooLarge(Exception):
    """A download passed its cap; ``size`` is how far it got."""

    def __init__(self, size: int):
        super().__init__(f"over the cap after {size} bytes")
        self.size = size



class TelegramAPI(HttpSession):
    """``TelegramAPI(token, base_url='https://api.telegram.org', session=None)``.

    Owns (and closes) its aiohttp session unless one is given. ``request_timeout`` bounds ordinary calls;
    a long poll gets its own ``timeout`` on top of it.
    """

    def __init__(self, token: str, base_url: str = "https://api.telegram.org",
                 session: Optional[aiohttp.ClientSession] = None, request_timeout: float = 30.0):
        self._token = token
        self.base_url = base_url.rstrip("/")
        self.bot_id = token.split(":", 1)[0] if ":" in token else "?"
        super().__init__(session, request_timeout)

    def __repr__(self) -> str:  # never the token
        return f"TelegramAPI(bot_id={self.bot_id}, base_url={self.base_url!r})"

    def redact(self, text: str) -> str:
        return redact_secrets(text, [self._token])

    # -- methods
    async def get_me(self) -> dict:
        return await self.call("getMe")

    async def get_updates(self, offset: Optional[int] = None, timeout: int = 0, limit: int = 100,
                          allowed_updates: Optional[list[str]] = None) -> list[dict]:
        """Updates from ``offset`` on; calling with last update_id + 1 confirms everything before it."""
        return await self.call("getUpdates", {"offset": offset, "timeout": timeout, "limit": limit,
                                              "allowed_updates": allowed_updates},
                               timeout=timeout + self.request_timeout)

    async def send_message(self, chat_id: int | str, text: str, parse_mode: Optional[str] = None,
                           thread_id: Optional[int] = None, reply_to: Optional[int] = None,
                           buttons: tuple = ()) -> int:
        """Returns the new message_id. A reply whose target was deleted is sent anyway, as a plain message.
        ``buttons``: ((label, callback data), ...), one row of inline buttons under the message."""
        params: dict[str, Any] = {"chat_id": chat_id, "text": text, "parse_mode": parse_mode,
                                  "message_thread_id": thread_id, "reply_markup": inline_keyboard(buttons)}
        if reply_to is not None:
            params["reply_parameters"] = {"message_id": reply_to, "allow_sending_without_reply": True}
        return (await self.call("sendMessage", params))["message_id"]

    async def send_file(self, chat_id: int | str, kind: str, data: bytes, name: str, mime: str, caption: str = "",
                        thread_id: Optional[int] = None, reply_to: Optional[int] = None) -> int:
        """sendPhoto (``kind`` photo: shown inline), sendVoice (``kind`` voice: OGG Opus, MP3 or M4A, shown as a voice
        note) or sendDocument, uploaded as multipart/form-data; returns the new message_id. The caption goes as plain
        text (no parse mode: a caption has no room for a fallback)."""
        form = aiohttp.FormData()
        form.add_field("chat_id", str(chat_id))
        if caption:
            form.add_field("caption", caption)
        if thread_id is not None:
            form.add_field("message_thread_id", str(thread_id))
        if reply_to is not None:
            form.add_field("reply_parameters", json.dumps({"message_id": reply_to,
                                                           "allow_sending_without_reply": True}))
        field = kind if kind in ("photo", "voice") else "document"
        form.add_field(field, data, filename=name or field, content_type=mime or "application/octet-stream")
        method = {"photo": "sendPhoto", "voice": "sendVoice"}.get(kind, "sendDocument")
        return (await self.call(method, form=form, timeout=UPLOAD_TIMEOUT_S))["message_id"]

    async def set_message_reaction(self, chat_id: int | str, message_id: int, emoji: str) -> None:
        """The bot's reaction on a message: one emoji, or none ("")."""
        await self.call("setMessageReaction", {"chat_id": chat_id, "message_id": message_id,
                                               "reaction": [{"type": "emoji", "emoji": emoji}] if emoji else []})

    async def edit_message_text(self, chat_id: int | str, message_id: int, text: str,
                                parse_mode: Optional[str] = None, buttons: tuple = ()) -> bool:
        """True if edited; False if the message already had this content (the goal is reached either way). An edit
        without ``buttons`` takes the message's inline buttons away (Telegram's rule)."""
        try:
            await self.call("editMessageText", {"chat_id": chat_id, "message_id": message_id, "text": text,
                                                "parse_mode": parse_mode, "reply_markup": inline_keyboard(buttons)})
        except PermanentError as exc:
            if "message is not modified" in exc.description:
                return False
            raise
        return True

    async def answer_callback_query(self, query_id: str, text: str = "") -> None:
        """Stops the client's spinner on a pressed button; ``text`` shows as a short notice (at most 200)."""
        await self.call("answerCallbackQuery", {"callback_query_id": query_id, "text": text[:200] or None})

    async def delete_message(self, chat_id: int | str, message_id: int) -> None:
        await self.call("deleteMessage", {"chat_id": chat_id, "message_id": message_id})

    async def send_chat_action(self, chat_id: int | str, action: str = "typing",
                               thread_id: Optional[int] = None) -> None:
        await self.call("sendChatAction", {"chat_id": chat_id, "action": action, "message_thread_id": thread_id})

    async def set_webhook(self, url: str, secret_token: Optional[str] = None,
                          allowed_updates: Optional[list[str]] = None, drop_pending_updates: bool = False) -> None:
        await self.call("setWebhook", {"url": url, "secret_token": secret_token, "allowed_updates": allowed_updates,
                                       "drop_pending_updates": drop_pending_updates or None})

    async def delete_webhook(self, drop_pending_updates: bool = False) -> None:
        await self.call("deleteWebhook", {"drop_pending_updates": drop_pending_updates or None})

    async def get_webhook_info(self) -> dict:
        return await self.call("getWebhookInfo")

    async def get_file(self, file_id: str) -> dict:
        """``File``: file_id, file_size and the ``file_path`` to download it from (valid for an hour at least)."""
        return await self.call("getFile", {"file_id": file_id})

    async def download_file(self, file_path: str, cap: int, timeout: float = 120.0) -> bytes:
        """The bytes at ``/file/bot<token>/<file_path>``, read in pieces and given up past ``cap`` bytes
        (``FileTooLarge``): a file the platform sized wrongly never fills memory. Errors as ``call``'s."""
        url = f"{self.base_url}/file/bot{self._token}/{quote(file_path)}"
        try:
            async with self.session().get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                if resp.status != 200:
                    raise classify_error("download", resp.status, None)
                return await capped_body(resp, cap, FileTooLarge)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise RetryableError(f"network error: {type(exc).__name__}: {self.redact(str(exc))}",
                                 method="download") from None

    # -- transport
    async def call(self, method: str, params: Optional[dict] = None, *, timeout: Optional[float] = None,
                   form: Optional[aiohttp.FormData] = None) -> Any:
        """POST one method with a JSON body (None values left out), or ``form`` (an upload); returns ``result`` or
        raises PlatformError."""
        payload = {k: v for k, v in (params or {}).items() if v is not None}
        url = f"{self.base_url}/bot{self._token}/{method}"
        body_kwargs = {"data": form} if form is not None else {"json": payload}
        status, _headers, body = await self.request_json("POST", url, op=method, timeout=timeout,
                                                         redact=self.redact, **body_kwargs)
        if isinstance(body, dict) and body.get("ok") is True:
            return body.get("result")
        error = classify_error(method, status, body)
        log.debug("telegram %s failed: %s", method, self.redact(str(error)))
        raise error


def inline_keyboard(buttons: tuple) -> Optional[dict]:
    """``reply_markup`` for one row of callback buttons ((label, data), ...); None for none."""
    if not buttons:
        return None
    return {"inline_keyboard": [[{"text": label, "callback_data": data} for label, data in buttons]]}


def classify_error(method: str, status: int, body: Any) -> PlatformError:
    """Map a Bot API error answer to the exception class that tells the caller what to do."""
    body = body if isinstance(body, dict) else {}
    code = body.get("error_code") if isinstance(body.get("error_code"), int) else status
    description = redact_secrets(str(body.get("description") or f"HTTP {status}"))
    lowered = description.lower()
    if code == 429:
        retry_after = (body.get("parameters") or {}).get("retry_after", 1)
        return FloodError(float(retry_after), description, method=method, status=code)
    if code >= 500 or code < 400:  # 5xx, or a 2xx/3xx without "ok": a garbled answer worth repeating
        return RetryableError(description, method=method, status=code)
    if code == 409:
        return ConflictError(description, method=method, status=code)
    if code == 400 and ("can't parse entities" in lowered or "can't find end" in lowered):
        return FormattingError(description, method=method, status=code)
    if code == 400 and ("message is too long" in lowered or "message_too_long" in lowered
                        or "text is too long" in lowered):
        return TooLongError(description, method=method, status=code)
    if code == 400 and re.search(r"message to (edit|delete) not found|message_id_invalid", lowered):
        return MessageNotFoundError(description, method=method, status=code)
    return PermanentError(description, method=method, status=code)
