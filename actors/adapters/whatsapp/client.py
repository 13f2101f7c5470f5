"""Async client for the WhatsApp Cloud API, part of Meta's Graph API (aiohttp): the few calls the adapter makes.

Every call carries ``Authorization: Bearer <access token>`` (a system user's permanent token) and goes to
``{base_url}/{api_version}/...``:

    GET  /{phone-number-id}?fields=display_phone_number,verified_name   who the number is (connect: checks the token)
    POST /{phone-number-id}/messages   {"messaging_product": "whatsapp", "to", "type": "text", "text": {"body"},
                                        "context": {"message_id"}}  -> {"messages": [{"id": "wamid..."}]}
         the same path with {"type": "reaction", "reaction": {"message_id", "emoji"}} (emoji "": taken away),
         and {"status": "read", "message_id", "typing_indicator": {"type": "text"}}: read ticks and typing,
         and {"type": "template", "template": {"name", "language": {"code"}, "components": [{"type": "body",
         "parameters": [{"type": "text", "text"}]}]}}: an approved template (``template_message``), the one
         message that reaches a user past the 24-hour window
    POST /{phone-number-id}/media       multipart ``messaging_product``, ``type`` (the MIME type), ``file`` -> {"id"}:
                                           an upload, then sent as {"type": "image"|"document", ...: {"id"}}
    GET  /{media-id}                    -> {"url", "mime_type", "file_size", ...}: the media-URL indirection; the
                                           url is then fetched with the same bearer (it expires in minutes)

A failure is HTTP 4xx/5xx with ``{"error": {"message", "type", "code", "error_subcode", "error_data": {"details"},
"fbtrace_id"}}``, raised as one of actors.adapters.errors:

    130429 (throughput), 131056 (pair rate limit), 4 / 80007 (app or   FloodError(rate_limit_wait_s): the Graph API
    account call limits), HTTP 429                                     names no wait; the adapter's own is used
    131047 (re-engagement: the 24-hour window is closed)               WindowClosed (a PermanentError)
    190 (the access token is invalid or expired)                       TokenRefused (a PermanentError): at connect
                                                                        the adapter is "refused" until it changes
    1, 2, 131000, 131016 (unknown, service, something went wrong),     RetryableError (``maybe_done`` for a send:
    HTTP 5xx, network errors, timeouts                                  it may have taken effect)
    100 with "text" too long, 131009 / 131026 / 131051 / others        PermanentError (a bad parameter, a number
                                                                        that is not on WhatsApp, an unsupported type)
    132000 / 132001 / 132005 / 132015 / 132016 / 132018 (a template    PermanentError, Meta's code and words in it
    unknown, paused or disabled, its parameters refused)

The token travels in a header, never a URL; error texts are built from the call's name and Meta's code and message,
and anything from aiohttp goes through ``redact`` first.
"""
from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Optional

import aiohttp

from actors.adapters.errors import FloodError, PermanentError, PlatformError, RetryableError
from actors.adapters.http_session import HttpSession, capped_body
from common.redact import redact as redact_secrets

GRAPH_API = "https://graph.facebook.com"
RATE_LIMITS = (130429, 131056, 4, 80007, 131048)
TRANSIENT = (1, 2, 131000, 131016)
TOKEN_INVALID = 190
RE_ENGAGEMENT = 131047


# What Meta refuses in a template's text parameter (132018): a line break or tab, or more than 4 spaces in a row.
_BREAKS = re.compile(r"[ ]*[\r\n\t\v\f\u0085\u2028\u2029]+[ \r\n\t\v\f\u0085\u2028\u2029]*")
_LONG_SPACES = re.compile(r" {5,}")
CUT_MARK = "…"


def template_parameter(text: str, limit: int) -> str:
    """A reply as one text parameter of a template: its line breaks and tabs made single spaces, runs of spaces cut
    to 4, at most ``limit`` characters (a longer one ends with ``CUT_MARK``)."""
    flat = _LONG_SPACES.sub("    ", _BREAKS.sub(" ", text)).strip()
    return flat if len(flat) <= limit else flat[:limit - len(CUT_MARK)].rstrip() + CUT_MARK


def template_message(name: str, language: str, parameter: str) -> dict:
    """The ``template`` object of a send: the approved template ``name`` in ``language``, its body's one
    parameter ({{1}}) ``parameter`` (already made acceptable: ``template_parameter``)."""
    return {"name": name, "language": {"code": language},
            "components": [{"type": "body", "parameters": [{"type": "text", "text": parameter}]}]}


class WindowClosed(PermanentError):
    """131047: more than 24 hours since the user last wrote; only a template message may reach them now."""


class TokenRefused(PermanentError):
    """190: the access token is invalid, expired or revoked."""


class MediaTooLarge(Exception):
    def __init__(self, size: int):
        super().__init__(f"{size} bytes")
        self.size = size


class GraphAPI(HttpSession):
    """One business phone number's client: its id and the access token; owns its aiohttp session."""

    def __init__(self, phone_number_id: str, access_token: str, base_url: str = GRAPH_API,
                 api_version: str = "v21.0", request_timeout: float = 30.0, rate_limit_wait_s: float = 6.0):
        super().__init__(request_timeout=request_timeout,
                         session_headers={"Authorization": f"Bearer {access_token}"})
        self.phone_number_id, self._token = phone_number_id, access_token
        self.base_url = f"{base_url.rstrip('/')}/{api_version.strip('/')}"
        self.rate_limit_wait_s = rate_limit_wait_s

    def __repr__(self) -> str:  # never the token
        return f"GraphAPI(phone_number_id={self.phone_number_id!r}, base_url={self.base_url!r})"

    def redact(self, text: str) -> str:
        return redact_secrets(text, [self._token])

    # -- calls
    async def phone_number(self) -> dict:
        """The number's display number and verified name: proves the token and the id (190 / 100 otherwise)."""
        return await self._request("GET", f"/{self.phone_number_id}?fields=display_phone_number,verified_name",
                                   "phone_number")

    async def send(self, to: str, kind: str, content: dict, reply_to: Optional[str] = None) -> str:
        """POST /messages of one message of ``kind`` (text, reaction, image, ...) -> its wamid."""
        payload: dict[str, Any] = {"messaging_product": "whatsapp", "recipient_type": "individual", "to": to,
                                   "type": kind, kind: content}
        if reply_to:
            payload["context"] = {"message_id": reply_to}
        body = await self._request("POST", f"/{self.phone_number_id}/messages", f"messages:{kind}", json=payload,
                                   may_take_effect=True)
        messages = body.get("messages")
        wamid = messages[0].get("id") if isinstance(messages, list) and messages and isinstance(messages[0], dict) \
            else None
        if not isinstance(wamid, str) or not wamid:
            raise RetryableError("the answer names no message id", method=f"messages:{kind}", maybe_done=True)
        return wamid

    async def mark_read(self, wamid: str, typing: bool) -> None:
        """The user's message ``wamid`` shows read; with ``typing`` the typing indicator shows too (25 s at most)."""
        payload: dict[str, Any] = {"messaging_product": "whatsapp", "status": "read", "message_id": wamid}
        if typing:
            payload["typing_indicator"] = {"type": "text"}
        await self._request("POST", f"/{self.phone_number_id}/messages", "messages:read", json=payload)

    async def upload(self, name: str, mime: str, data: bytes) -> str:
        """POST /media of one file -> its media id (kept by Meta for 30 days; an upload never sent is seen by no
        one)."""
        form = aiohttp.FormData()
        form.add_field("messaging_product", "whatsapp")
        form.add_field("type", mime)
        form.add_field("file", data, filename=name or "file", content_type=mime)
        body = await self._request("POST", f"/{self.phone_number_id}/media", "media:upload", data=form)
        media_id = body.get("id")
        if not isinstance(media_id, str) or not media_id:
            raise RetryableError("the answer names no media id", method="media:upload")
        return media_id

    async def media(self, media_id: str, cap: int) -> tuple[bytes, str]:
        """An inbound file's bytes and claimed type: its URL asked of ``/{media-id}``, then fetched with the bearer,
        in pieces, given up past ``cap`` (MediaTooLarge, before a byte when the size is declared)."""
        info = await self._request("GET", f"/{media_id}", "media")
        url, size = info.get("url"), info.get("file_size")
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise PermanentError("the media answer names no URL", method="media")
        if isinstance(size, int) and size > cap:
            raise MediaTooLarge(size)
        timeout = aiohttp.ClientTimeout(total=max(self.request_timeout, 60.0))
        try:
            async with self.session().get(url, timeout=timeout) as resp:
                if resp.status != 200:
                    text = await resp.content.read(64 * 1024)
                    raise classify("media:download", resp.status, _json(text), self.rate_limit_wait_s)
                return await capped_body(resp, cap, MediaTooLarge), str(info.get("mime_type") or "")
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise RetryableError(f"network error: {type(exc).__name__}: {self.redact(str(exc))}",
                                 method="media:download") from None

    async def _request(self, http_method: str, path: str, op: str, may_take_effect: bool = False,
                       **kwargs) -> dict:
        status, headers, body = await self.request_json(http_method, self.base_url + path, op=op,
                                                        redact=self.redact, **kwargs)
        if 200 <= status < 300 and isinstance(body, dict) and "error" not in body:
            return body
        raise classify(op, status, body, self.rate_limit_wait_s, may_take_effect)


def classify(method: str, status: int, body: Any, rate_limit_wait_s: float = 6.0,
             may_take_effect: bool = False) -> PlatformError:
    """Map a failed answer to the exception class that tells the caller what to do (the module docstring)."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        if status == 429:
            return FloodError(rate_limit_wait_s, "HTTP 429, no error object", method=method)
        if status >= 500 or 200 <= status < 300:
            return RetryableError(f"HTTP {status}, no error object", method=method, status=status,
                                  maybe_done=may_take_effect)
        return PermanentError(f"HTTP {status}, no error object", method=method, status=status)
    code = error.get("code")
    details = (error.get("error_data") or {}).get("details") if isinstance(error.get("error_data"), dict) else None
    description = f"error {code}: {str(error.get('message') or '')[:160]}" + (f" ({str(details)[:160]})"
                                                                              if details else "")
    if code in RATE_LIMITS or status == 429:
        return FloodError(rate_limit_wait_s, description, method=method, status=status)
    if code == RE_ENGAGEMENT:
        return WindowClosed("the 24-hour customer service window is closed (the user last wrote more than 24 h "
                            f"ago): free text cannot reach them, only a template message; {description}",
                            method=method, status=status)
    if code == TOKEN_INVALID:
        return TokenRefused(f"the access token was refused; {description}", method=method, status=status)
    if code in TRANSIENT or status >= 500:
        return RetryableError(description, method=method, status=status, maybe_done=may_take_effect)
    return PermanentError(description, method=method, status=status)


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (TypeError, ValueError, RecursionError):
        return None
