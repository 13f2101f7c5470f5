"""The HTTP side of a platform's API client: its aiohttp session, made on first use (on the loop that uses it: an
aiohttp session binds to the running loop) and owned and closed by the client unless the caller gave one, and one
JSON request whose network failure says whether it may have reached the platform, and one download of a user's
file within a size cap (``download``: LINE's content, Feishu's message resources).

``FloodStreaks`` is the doubling wait of a chat's throttled answers in a row, for platforms that name none (Google
Chat, Teams).

A base class of the API clients (telegram/client.py, slack/client.py, discord/client.py, fake/client.py); its fields
are its own, the clients call ``request_json`` and inherit ``close`` and the ``async with`` form.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, Mapping, Optional

import aiohttp

from actors.adapters.errors import RetryableError


class HttpSession:
    def __init__(self, session: Optional[aiohttp.ClientSession] = None, request_timeout: float = 30.0,
                 session_headers: Optional[Mapping[str, str]] = None):
        self._session, self._owns_session = session, session is None
        self._session_headers = dict(session_headers or {})
        self.request_timeout = request_timeout   # seconds a request may take beyond any long-poll wait it asks for

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or (self._owns_session and self._session.closed):
            self._session = aiohttp.ClientSession(headers=self._session_headers)
        return self._session

    async def request_json(self, http_method: str, url: str, *, op: str, timeout: Optional[float] = None,
                           redact: Callable[[str], str] = lambda text: text,
                           **kwargs) -> tuple[int, Mapping[str, str], Any]:
        """One request: its status, headers and JSON body (None when there is no JSON). A network error or a
        timeout is a RetryableError of ``op``, ``maybe_done`` unless the connection was never made (only then is it
        sure not to have reached the platform); its text goes through ``redact`` (an aiohttp error may carry the
        URL, and with it a token) and the original is dropped (``from None``) for the same reason."""
        client_timeout = aiohttp.ClientTimeout(total=timeout or self.request_timeout)
        try:
            async with self.session().request(http_method, url, timeout=client_timeout, **kwargs) as resp:
                text = await resp.text()
                status, headers = resp.status, resp.headers
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise RetryableError(f"network error: {type(exc).__name__}: {redact(str(exc))}", method=op,
                                 maybe_done=not isinstance(exc, aiohttp.ClientConnectorError)) from None
        try:
            body = json.loads(text) if text else None
        except ValueError:
            body = None
        return status, headers, body

    async def __aenter__(self):
        return self

    async def download(self, url: str, cap: int, too_large: Callable[[int], Exception], *, op: str,
                       refused: Callable[[int, Any, Mapping[str, str]], Exception],
                       redact: Callable[[str], str] = lambda text: text, headers: Optional[Mapping[str, str]] = None,
                       ready: Callable[[aiohttp.ClientResponse], bool] = lambda resp: resp.status == 200) -> bytes:
        """A user's file: ``GET url`` read within ``cap`` (``capped_body``), with at least a minute for it. An
        answer that is not ``ready`` is ``refused(status, its JSON body or None, headers)``, raised; a network error
        or a timeout is a RetryableError of ``op`` (a read changes nothing: no ``maybe_done``)."""
        timeout = aiohttp.ClientTimeout(total=max(self.request_timeout, 60.0))
        try:
            async with self.session().get(url, timeout=timeout, headers=headers) as resp:
                if not ready(resp):
                    text = await resp.content.read(64 * 1024)
                    try:
                        body = json.loads(text)
                    except (ValueError, RecursionError):
                        body = None
                    raise refused(resp.status, body, resp.headers)
                return await capped_body(resp, cap, too_large)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise RetryableError(f"network error: {type(exc).__name__}: {redact(str(exc))}", method=op) from None

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            session, self._session = self._session, None
            await session.close()


async def capped_body(resp: aiohttp.ClientResponse, cap: int, too_large: Callable[[int], Exception]) -> bytes:
    """A response body read in pieces and given up past ``cap`` bytes (``too_large(size so far)`` is raised, the
    declared length checked first): a file a platform sized wrongly never fills memory."""
    if resp.content_length is not None and resp.content_length > cap:
        raise too_large(resp.content_length)
    data = bytearray()
    async for piece in resp.content.iter_chunked(1 << 16):
        data += piece
        if len(data) > cap:
            raise too_large(len(data))
    return bytes(data)


def retry_after_header(headers, most_s: float = 3600.0) -> Optional[float]:
    """The seconds a ``Retry-After`` header asks for (its seconds form), None if it names none or no sane number."""
    try:
        value = float((headers or {}).get("Retry-After", ""))
    except ValueError:
        return None
    return value if 0 <= value <= most_s else None


class FloodStreaks:
    """Throttled answers in a row per chat (of the newest ``remembered`` chats), for a wait that doubles with each
    one, from ``base_s`` to at most ``most_s``: the exponential backoff a platform asks for when it names no wait."""

    def __init__(self, base_s: float, most_s: float = 64.0, remembered: int = 4096):
        self.base_s, self.most_s, self.remembered = base_s, most_s, remembered
        self.in_a_row: dict[str, int] = {}   # chat -> throttled answers since its last answered call

    def answered(self, chat: str) -> None:
        self.in_a_row.pop(chat, None)

    def flooded(self, chat: str) -> float:
        """Count one more throttled answer of ``chat``; the wait it calls for."""
        floods = self.in_a_row.pop(chat, 0) + 1
        self.in_a_row[chat] = floods   # the newest last: the oldest forgotten first
        while len(self.in_a_row) > self.remembered:
            self.in_a_row.pop(next(iter(self.in_a_row)))
        return min(self.base_s * 2 ** (floods - 1), self.most_s)
