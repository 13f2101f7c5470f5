"""Async client for the generic fake platform (tests/fakes/fakeplatform.py documents the wire format).

It exists so the pipeline can run end to end before real adapters do, and it classifies failures into the same
errors as the real clients (actors.adapters.errors), so code written against it handles real platforms too.
"""
from __future__ import annotations

import base64
import logging
from typing import Any, Optional

import aiohttp

from actors.adapters.http_session import HttpSession
from actors.adapters.errors import (FloodError, FormattingError, MessageNotFoundError, PermanentError,
                                    PlatformError, RetryableError, TooLongError)

log = logging.getLogger(__name__)

# error code in the body -> the class the caller acts on; anything else 4xx is permanent
_ERROR_CLASSES: dict[str, type[PlatformError]] = {
    "too_long": TooLongError,
    "not_found": MessageNotFoundError,
    "bad_markup": FormattingError,
}


class FakePlatformAPI(HttpSession):
    """``FakePlatformAPI(base_url, session=None)``; owns (and closes) its session unless one is given."""

    def __init__(self, base_url: str, session: Optional[aiohttp.ClientSession] = None,
                 request_timeout: float = 30.0):
        self.base_url = base_url.rstrip("/")
        super().__init__(session, request_timeout)

    # -- operations
    async def poll_updates(self, offset: int = 0, timeout: float = 0) -> list[dict]:
        """Updates with id >= offset; passing last id + 1 acknowledges everything before it."""
        body = await self._call("GET", "updates", params={"offset": offset, "timeout": timeout},
                                timeout=timeout + self.request_timeout)
        return body["updates"]

    async def send(self, chat: str, text: str, reply_to: Optional[str] = None,
                   thread: Optional[str] = None) -> str:
        payload: dict[str, Any] = {"chat": chat, "text": text}
        if reply_to is not None:
            payload["reply_to"] = reply_to
        if thread is not None:
            payload["thread"] = thread
        return (await self._call("POST", "send", json=payload))["message_id"]

    async def send_file(self, chat: str, kind: str, name: str, data: bytes, caption: str = "",
                        reply_to: Optional[str] = None, thread: Optional[str] = None) -> str:
        payload: dict[str, Any] = {"chat": chat, "kind": kind, "name": name, "caption": caption,
                                   "data": base64.b64encode(data).decode("ascii")}
        if reply_to is not None:
            payload["reply_to"] = reply_to
        if thread is not None:
            payload["thread"] = thread
        return (await self._call("POST", "send_file", json=payload))["message_id"]

    async def edit(self, chat: str, message_id: str, text: str) -> bool:
        """True if the text changed; False if it already was ``text`` (not an error: the goal is reached)."""
        try:
            await self._call("POST", "edit", json={"chat": chat, "message_id": message_id, "text": text})
        except PermanentError as exc:
            if exc.description == "not_modified":
                return False
            raise
        return True

    async def delete(self, chat: str, message_id: str) -> None:
        await self._call("POST", "delete", json={"chat": chat, "message_id": message_id})

    async def typing(self, chat: str) -> None:
        await self._call("POST", "typing", json={"chat": chat})

    # -- transport
    async def _call(self, http_method: str, op: str, *, timeout: Optional[float] = None, **kwargs) -> dict:
        status, _headers, body = await self.request_json(http_method, f"{self.base_url}/bot/{op}", op=op,
                                                         timeout=timeout, **kwargs)
        if status == 200 and isinstance(body, dict) and body.get("ok"):
            return body
        raise _classify(op, status, body)


def _classify(op: str, status: int, body: Any) -> PlatformError:
    body = body if isinstance(body, dict) else {}
    error = str(body.get("error") or "")
    if status == 429:
        return FloodError(float(body.get("retry_after", 1.0)), error or "flood", method=op)
    if status >= 500 or status < 400:  # a 2xx without ok:true is a garbled answer: worth repeating
        return RetryableError(error or "malformed response", method=op, status=status)
    return _ERROR_CLASSES.get(error, PermanentError)(error or "bad request", method=op, status=status)
