"""Async client for Mattermost's REST API v4 (aiohttp): the calls a chat bot makes, every failure raised as one of
actors.adapters.errors:

    429 (the server's rate limit)            FloodError, waiting ``Retry-After`` (else ``X-RateLimit-Reset``)
    5xx, network errors, timeouts            RetryableError (``maybe_done`` unless the connection was never made)
    404 on a post or a file (patch, delete, get)   MessageNotFoundError (gone, or never was)
    400 ``model.post.is_valid.message_length``   TooLongError (over the server's MaxPostSize: split)
    any other 4xx (401 bad token, 403 not a member of the channel)   PermanentError

Errors are ``{"id", "message", "status_code", ...}``; their text is built from the call's name and the server's
``id``/``message``, never from a URL, and redacted with the token. The token travels as ``Authorization: Bearer``.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any, Optional

import aiohttp

from actors.adapters.errors import (FloodError, MessageNotFoundError, PermanentError, PlatformError,
                                    RetryableError, TooLongError)
from actors.adapters.http_session import HttpSession, capped_body
from common.redact import redact as redact_secrets

TOO_LONG_IDS = ("model.post.is_valid.message_length.app_error",)
DEFAULT_FLOOD_S = 1.0
ERROR_BODY_CAP = 64 * 1024


class MattermostREST(HttpSession):
    """``MattermostREST(base_url, token)``; owns its aiohttp session."""

    def __init__(self, base_url: str, token: str, request_timeout: float = 30.0):
        super().__init__(request_timeout=request_timeout)
        self._token = token
        self.api = base_url.rstrip("/") + "/api/v4"

    def __repr__(self) -> str:  # never the token
        return f"MattermostREST(api={self.api!r})"

    def redact(self, text: str) -> str:
        return redact_secrets(text, [self._token])

    # -- calls
    async def me(self) -> dict:
        return await self.call("GET", "/users/me", "get_me")

    async def my_channels(self) -> list:
        """Every channel the bot is a member of, on every team, direct and group messages included."""
        return await self.call("GET", "/users/me/channels", "get_channels") or []

    async def posts_since(self, channel_id: str, since_ms: int) -> dict:
        """The channel's posts created, edited or deleted after ``since_ms`` (a PostList: ``order``, ``posts``)."""
        return await self.call("GET", f"/channels/{channel_id}/posts?since={int(since_ms)}", "get_posts_since") or {}

    async def create_post(self, channel_id: str, message: str, *, root_id: Optional[str] = None,
                          pending_post_id: Optional[str] = None, props: Optional[dict] = None,
                          file_ids: tuple[str, ...] = ()) -> dict:
        body: dict[str, Any] = {"channel_id": channel_id, "message": message}
        if file_ids:
            body["file_ids"] = list(file_ids)
        if root_id:
            body["root_id"] = root_id
        if pending_post_id:
            body["pending_post_id"] = pending_post_id
        if props:
            body["props"] = props
        return await self.call("POST", "/posts", "create_post", body)

    async def patch_post(self, post_id: str, message: str) -> dict:
        return await self.call("PUT", f"/posts/{post_id}/patch", "patch_post", {"message": message})

    async def delete_post(self, post_id: str) -> None:
        await self.call("DELETE", f"/posts/{post_id}", "delete_post")

    async def reactions(self, post_id: str) -> list:
        return await self.call("GET", f"/posts/{post_id}/reactions", "get_reactions") or []

    async def add_reaction(self, user_id: str, post_id: str, emoji_name: str) -> None:
        await self.call("POST", "/reactions", "add_reaction",
                        {"user_id": user_id, "post_id": post_id, "emoji_name": emoji_name})

    async def remove_reaction(self, user_id: str, post_id: str, emoji_name: str) -> None:
        await self.call("DELETE", f"/users/{user_id}/posts/{post_id}/reactions/{emoji_name}", "remove_reaction")

    async def typing(self, user_id: str, channel_id: str, parent_id: str = "") -> None:
        """The typing indicator through REST, for when the WebSocket is down (it is the ``user_typing`` action)."""
        await self.call("POST", f"/users/{user_id}/typing", "typing",
                        {"channel_id": channel_id, "parent_id": parent_id})

    async def upload(self, channel_id: str, name: str, mime: str, data: bytes) -> str:
        """``POST /files`` (multipart: ``channel_id``, ``files``) -> the new file's id, to attach to a post."""
        form = aiohttp.FormData()
        form.add_field("channel_id", channel_id)
        form.add_field("files", data, filename=name or "file", content_type=mime or "application/octet-stream")
        answer = await self.call("POST", "/files", "upload_file", form=form)
        infos = answer.get("file_infos") if isinstance(answer, dict) else None
        if not (isinstance(infos, list) and infos and isinstance(infos[0], dict) and isinstance(infos[0].get("id"),
                                                                                              str)):
            raise PermanentError("POST /files answered no file", method="upload_file")
        return infos[0]["id"]

    async def download(self, file_id: str, cap: int, too_large) -> bytes:
        """``GET /files/{id}``: the file's bytes, given up past ``cap`` (``too_large(size)`` is raised)."""
        timeout = aiohttp.ClientTimeout(total=self.request_timeout)
        try:
            async with self.session().get(f"{self.api}/files/{file_id}", timeout=timeout,
                                          headers={"Authorization": f"Bearer {self._token}"}) as resp:
                if resp.status != 200:
                    head = await resp.content.read(ERROR_BODY_CAP)   # an error is a small JSON object
                    try:
                        body = json.loads(head) if head else None
                    except ValueError:
                        body = None
                    raise classify_error("get_file", resp.status, resp.headers, body)
                return await capped_body(resp, cap, too_large)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise RetryableError(f"network error: {type(exc).__name__}", method="get_file") from None

    # -- transport
    async def call(self, method: str, path: str, name: str, body: Optional[dict] = None,
                   form: Optional[aiohttp.FormData] = None) -> Any:
        payload_kw = {"data": form} if form is not None else {"json": body}
        status, headers, payload = await self.request_json(
            method, self.api + path, op=name, redact=self.redact,
            headers={"Authorization": f"Bearer {self._token}"}, **payload_kw)
        if 200 <= status < 300:
            return payload
        raise classify_error(name, status, headers, payload)


def _seconds(value: Any) -> Optional[float]:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds >= 0 else None


def flood_wait(headers) -> float:
    """How long a 429 asks to wait: ``Retry-After``, else ``X-RateLimit-Reset`` (seconds until the window resets,
    as Mattermost's limiter sends it), else a second."""
    for name in ("Retry-After", "X-RateLimit-Reset"):
        seconds = _seconds(headers.get(name)) if headers is not None else None
        if seconds is not None:
            return seconds
    return DEFAULT_FLOOD_S


def classify_error(name: str, status: int, headers, body: Any) -> PlatformError:
    """A Mattermost error answer as the exception class that tells the caller what to do."""
    body = body if isinstance(body, dict) else {}
    error_id = body.get("id") if isinstance(body.get("id"), str) else ""
    text = body.get("message") if isinstance(body.get("message"), str) else f"HTTP {status}"
    description = redact_secrets(f"{text} ({error_id})" if error_id else text)[:300]
    if status == 429:
        return FloodError(flood_wait(headers), f"rate limited: {description}", method=name, status=status)
    if status >= 500 or status < 400:
        return RetryableError(description, method=name, status=status)
    if error_id in TOO_LONG_IDS:
        return TooLongError(description, method=name, status=status)
    if status == 404 and name in ("patch_post", "delete_post", "get_file"):
        return MessageNotFoundError(description, method=name, status=status)
    return PermanentError(description, method=name, status=status)
