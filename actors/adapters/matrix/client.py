"""Async client for the Matrix client-server API (v3, aiohttp): the calls a chat bot makes, and every failure
raised as one of actors.adapters.errors:

    429 M_LIMIT_EXCEEDED                  FloodError(retry_after_ms / 1000, else the Retry-After header, else 1 s)
    5xx, network errors, timeouts         RetryableError (``maybe_done`` unless the connection was never made)
    413 M_TOO_LARGE                       TooLongError (the event is over 65,536 bytes: split)
    404 M_NOT_FOUND on an event           MessageNotFoundError (the message to edit or redact is gone)
    401 M_UNKNOWN_TOKEN, 403 M_FORBIDDEN, any other 4xx   PermanentError (a wrong token, a room the bot left)

The access token travels in the ``Authorization`` header only, never in a URL; error texts are built from the
call's name and the server's ``errcode``/``error`` and redacted with the token as a known secret. Every path
segment taken from outside (room ids, event ids, transaction ids) is percent-quoted.
"""
from __future__ import annotations

import json
import re
from typing import Any, Optional
from urllib.parse import quote

from actors.adapters.errors import (FloodError, MessageNotFoundError, PermanentError, PlatformError,
                                    RetryableError, TooLongError)
from actors.adapters.http_session import HttpSession
from common.redact import redact as redact_secrets

CLIENT_API = "/_matrix/client/v3"
MEDIA_UPLOAD = "/_matrix/media/v3/upload"
MEDIA_DOWNLOAD = "/_matrix/client/v1/media/download"   # authenticated media (spec v1.11; Synapse requires it)
MXC = re.compile(r"mxc://(?P<server>[A-Za-z0-9.:\[\]-]{1,255})/(?P<media>[A-Za-z0-9_-]{1,255})")


def segment(value: str) -> str:
    """One path segment: ``!room:server``, ``$event`` and transaction ids quoted whole (no ``/`` survives)."""
    return quote(str(value), safe="")


class MatrixClient(HttpSession):
    """``MatrixClient(homeserver, access_token)``; owns its aiohttp session. One per access token: Synapse
    remembers transaction ids per device, which the token names."""

    def __init__(self, homeserver: str, access_token: str, request_timeout: float = 30.0):
        super().__init__(request_timeout=request_timeout)
        self.homeserver = homeserver.rstrip("/")
        self._token = access_token

    def __repr__(self) -> str:  # never the token
        return f"MatrixClient(homeserver={self.homeserver!r})"

    def redact(self, text: str) -> str:
        return redact_secrets(text, [self._token])

    # -- calls
    async def whoami(self) -> dict:
        return await self.call("GET", "/account/whoami", "whoami")

    async def sync(self, since: Optional[str], timeout_ms: int, sync_filter: dict) -> dict:
        params = {"timeout": str(int(timeout_ms)), "filter": json.dumps(sync_filter, separators=(",", ":"))}
        if since:
            params["since"] = since
        return await self.call("GET", "/sync", "sync", params=params, timeout=self.request_timeout + timeout_ms / 1000)

    async def join(self, room_id: str) -> dict:
        return await self.call("POST", f"/join/{segment(room_id)}", "join", body={})

    async def leave(self, room_id: str) -> dict:
        return await self.call("POST", f"/rooms/{segment(room_id)}/leave", "leave", body={})

    async def joined_members(self, room_id: str) -> dict:
        return await self.call("GET", f"/rooms/{segment(room_id)}/joined_members", "joined_members")

    async def get_event(self, room_id: str, event_id: str) -> dict:
        return await self.call("GET", f"/rooms/{segment(room_id)}/event/{segment(event_id)}", "get_event")

    async def send_event(self, room_id: str, txn_id: str, content: dict,
                         event_type: str = "m.room.message") -> str:
        """PUT the event under ``txn_id``: the same id from the same device again returns the first event's id
        instead of making a second event (the spec's transaction-id idempotency)."""
        answer = await self.call("PUT", f"/rooms/{segment(room_id)}/send/{segment(event_type)}/{segment(txn_id)}",
                                 "send", body=content)
        event_id = answer.get("event_id") if isinstance(answer, dict) else None
        if not isinstance(event_id, str) or not event_id:
            raise RetryableError("the server answered the send without an event_id", method="send",
                                 maybe_done=True)
        return event_id

    async def redact_event(self, room_id: str, event_id: str, txn_id: str) -> None:
        await self.call("PUT", f"/rooms/{segment(room_id)}/redact/{segment(event_id)}/{segment(txn_id)}", "redact",
                        body={})

    async def typing(self, room_id: str, user_id: str, timeout_ms: int) -> None:
        await self.call("PUT", f"/rooms/{segment(room_id)}/typing/{segment(user_id)}", "typing",
                        body={"typing": True, "timeout": int(timeout_ms)})

    async def upload(self, data: bytes, mime: str, name: str) -> str:
        """The bytes in the homeserver's media repository (``POST /_matrix/media/v3/upload``): their ``mxc://``
        URI. Not idempotent: an upload repeated after a crash leaves an unused copy there, never a second event."""
        headers = {"Authorization": f"Bearer {self._token}", "Content-Type": mime or "application/octet-stream"}
        status, answer_headers, payload = await self.request_json(
            "POST", self.homeserver + MEDIA_UPLOAD, op="upload", data=data, params={"filename": name or "file"},
            headers=headers, redact=self.redact, timeout=max(self.request_timeout, 60.0))
        if not 200 <= status < 300:
            raise classify_error("upload", status, payload, answer_headers.get("Retry-After"))
        uri = payload.get("content_uri") if isinstance(payload, dict) else None
        if not isinstance(uri, str) or not MXC.fullmatch(uri):
            raise RetryableError("the upload answered no content_uri", method="upload", maybe_done=True)
        return uri

    async def download(self, mxc: str, cap: int, too_large) -> bytes:
        """A user's file by its ``mxc://`` URI (authenticated media), read within ``cap`` bytes."""
        found = MXC.fullmatch(mxc)
        if found is None:
            raise PermanentError(f"{mxc[:80]!r} is no mxc:// URI", method="download")

        def refused(status, body, headers):
            return classify_error("download", status, body, headers.get("Retry-After"))
        return await super().download(
            f"{self.homeserver}{MEDIA_DOWNLOAD}/{segment(found['server'])}/{segment(found['media'])}", cap,
            too_large, op="download", refused=refused, redact=self.redact,
            headers={"Authorization": f"Bearer {self._token}"})

    # -- transport
    async def call(self, method: str, path: str, name: str, body: Optional[dict] = None,
                   params: Optional[dict] = None, timeout: Optional[float] = None) -> Any:
        headers = {"Authorization": f"Bearer {self._token}"}
        status, answer_headers, payload = await self.request_json(
            method, self.homeserver + CLIENT_API + path, op=name, json=body, params=params, headers=headers,
            redact=self.redact, timeout=timeout)
        if 200 <= status < 300:
            return payload if payload is not None else {}
        raise classify_error(name, status, payload, answer_headers.get("Retry-After"))


def classify_error(name: str, status: int, body: Any, retry_after_header: Optional[str] = None) -> PlatformError:
    """Map a Matrix error answer (``{"errcode", "error"}``) to the exception that tells the caller what to do."""
    body = body if isinstance(body, dict) else {}
    errcode = body.get("errcode") if isinstance(body.get("errcode"), str) else ""
    text = body.get("error") if isinstance(body.get("error"), str) else f"HTTP {status}"
    description = redact_secrets(f"{errcode}: {text}" if errcode else text)[:300]
    if status == 429 or errcode == "M_LIMIT_EXCEEDED":
        return FloodError(retry_after_s(body, retry_after_header), f"rate limited: {description}", method=name,
                          status=status)
    if status >= 500 or status < 400:
        return RetryableError(description, method=name, status=status)
    if status == 413 or errcode == "M_TOO_LARGE":
        return TooLongError(description, method=name, status=status)
    if status == 404 and name in ("get_event", "redact"):
        return MessageNotFoundError(description, method=name, status=status)
    return PermanentError(description, method=name, status=status)


def retry_after_s(body: dict, header: Optional[str]) -> float:
    """Seconds to wait after a 429: the body's ``retry_after_ms`` (the spec's field), else the ``Retry-After``
    header (seconds, newer servers send both), else one second."""
    millis = body.get("retry_after_ms")
    if isinstance(millis, (int, float)) and not isinstance(millis, bool) and millis >= 0:
        return float(millis) / 1000.0
    try:
        seconds = float(header) if header is not None else None
    except ValueError:
        seconds = None
    return seconds if seconds is not None and seconds >= 0 else 1.0
