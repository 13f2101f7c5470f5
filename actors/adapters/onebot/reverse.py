"""The reverse WebSocket: the implementation connects to a server of the adapter's (OneBot v11
communication/ws-reverse: NapCat's and LLOneBot's "WebSocket client", Lagrange's ``ReverseWebSocket``).

The implementation opens ``ws://HOST:PORT/PATH`` with ``X-Self-ID`` (its account), ``X-Client-Role`` (``Universal``:
one connection for events and actions) and ``Authorization: Bearer TOKEN`` (``?access_token=`` where a client
cannot set headers). The token is checked before the upgrade, in constant time: missing 401, wrong 403, an account
other than the table's 403; nothing of a refused connection is read, so nothing of it is stored. A role other than
Universal (the old split API/Event pair) is refused 400: the adapter needs answers and events on one socket.

The server is kept between connection attempts (``ReverseListener`` is a field of the adapter, started by the first
``connect`` and closed when the intake stops), so an implementation that reconnects while the adapter's intake is
between attempts is taken. A newer connection replaces the one before it (the implementation reconnected; the old
socket is half-open at best). ``accepted()`` waits for the connection of the next intake attempt.
"""
from __future__ import annotations

import asyncio
import hmac
import time
from typing import Callable, Optional

from aiohttp import web

from actors.adapters.onebot.link import MAX_FRAME_BYTES, Link
from supervision.http_serving import HttpLimits, serve

REFUSAL_LOG_EVERY_S = 60.0


def token_given(request: web.Request) -> Optional[str]:
    header = request.headers.get("Authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip()
    return request.query.get("access_token")


def refusal(token: str, self_id: str, given: Optional[str], role: str, caller_id: str) -> Optional[tuple[int, str]]:
    """Why a connection is refused (status, reason), None to accept it (pure)."""
    if token:
        if given is None:
            return 401, "no access token"
        if not hmac.compare_digest(given.encode(), token.encode()):
            return 403, "a wrong access token"
    if self_id and caller_id and caller_id != self_id:
        return 403, f"account {caller_id[:20] if caller_id.isdigit() else '(not a number)'} is not this table's " \
                    f"({self_id})"
    if role and role.lower() != "universal":
        return 400, f"X-Client-Role {role[:20]!r}: only Universal is taken"
    return None


class Refusals:
    """Connections or requests refused, counted; a refusal of each kind logged at most once a
    ``REFUSAL_LOG_EVERY_S`` (a client retrying forever, or a hostile one, does not flood the log), with the count
    so far."""

    def __init__(self, log: Callable[[str], None]):
        self._log = log
        self.count = 0
        self.last = ""
        self._logged: dict[int, float] = {}     # HTTP status -> when a refusal with it was last logged

    def refused(self, what: str, status: int, reason: str) -> None:
        """Count one refusal answered ``status``; the status is what a log line is kept per (a handful of values,
        where the reason may carry what the client sent)."""
        self.count += 1
        self.last = reason
        now = time.monotonic()
        if now - self._logged.get(status, float("-inf")) >= REFUSAL_LOG_EVERY_S:
            self._logged[status] = now
            self._log(f"{what}: {reason} ({self.count} refused so far)")


class ReverseListener:
    def __init__(self, host: str, port: int, path: str, token: str, self_id: str,
                 make_link: Callable[[], Link], on_refused: Callable[[str], None], limits: HttpLimits):
        self.host, self.requested_port, self.path = host, port, path
        self._token, self._self_id, self._make_link = token, self_id, make_link
        self._on_refused, self._limits = on_refused, limits
        self._runner: Optional[web.AppRunner] = None
        self.port: Optional[int] = None
        self._current: Optional[Link] = None
        self._fresh: asyncio.Queue = asyncio.Queue(maxsize=1)
        self.refusals = Refusals(on_refused)

    @property
    def url(self) -> Optional[str]:
        return None if self.port is None else f"ws://{self.host}:{self.port}{self.path}"

    async def start(self) -> None:
        if self._runner is not None:
            return
        app = web.Application()
        app.router.add_get(self.path, self._handle)
        self._runner, self.port = await serve(app, self.host, self.requested_port, limits=self._limits,
                                              on_refused=self._on_refused)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        why = refusal(self._token, self._self_id, token_given(request), request.headers.get("X-Client-Role", ""),
                      request.headers.get("X-Self-ID", "").strip())
        if why is not None:
            self.refusals.refused(f"a reverse WebSocket from {request.remote} refused", why[0], why[1])
            return web.Response(status=why[0], text=why[1])
        ws = web.WebSocketResponse(max_msg_size=MAX_FRAME_BYTES, autoping=True)
        await ws.prepare(request)
        link = self._make_link().attach(ws)
        previous, self._current = self._current, link
        if previous is not None:
            await previous.close()
        while not self._fresh.empty():        # an accepted link nobody took yet is the older one
            await self._fresh.get_nowait().close()
        self._fresh.put_nowait(link)
        await link.ended.wait()               # aiohttp keeps the socket while its handler runs
        return ws

    async def accepted(self, timeout: float) -> Link:
        """The connection the implementation opened for this intake attempt (the newest)."""
        return await asyncio.wait_for(self._fresh.get(), timeout)

    async def close(self) -> None:
        link, self._current = self._current, None
        if link is not None:
            await link.close()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self.port = None
