"""Serving HTTP from an actor's async bridge: the one way the gateway's small servers start (web chat, webhooks,
the OpenAI-compatible API, metrics), with the same bounds on slow and greedy clients for all of them."""
from __future__ import annotations

import asyncio
import collections
import ipaddress
import time
from dataclasses import dataclass
from typing import Callable, Optional
from urllib.parse import urlsplit

from aiohttp import web

from common.config import setting

REQUEST_TIMEOUT_S = 10.0          # [gateway] http_request_timeout_s
CONNECTIONS_PER_CLIENT = 64       # [gateway] http_connections_per_client
REQUEST_TIMEOUT = web.AppKey("request_timeout_s", float)
BODY_TIMEOUT = web.AppKey("body_timeout_s", float)   # an application's own bound on its bodies (web chat uploads)
ON_REFUSED = web.AppKey("on_refused", object)        # the server's ``on_refused``: a refusal is never silent
# The page policy of the gateway's own pages (the web chat's and the console's): no framing, no sniffing, no
# referrer, nothing cached, and scripts, styles and connections from the page's own origin only.
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    # media-src: the web chat's audio player (a voice note, served by the page's own /media/KEY)
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; media-src 'self'; base-uri 'none'; form-action 'none'; "
                               "frame-ancestors 'none'",
}


@dataclass(frozen=True)
class HttpLimits:
    request_timeout_s: float = REQUEST_TIMEOUT_S
    connections_per_client: int = CONNECTIONS_PER_CLIENT   # 0: no cap (behind a proxy every client is the proxy)


def http_limits(config: dict) -> HttpLimits:
    return HttpLimits(setting(config, "gateway", "http_request_timeout_s"),
                      setting(config, "gateway", "http_connections_per_client"))


class BodyTimeout(Exception):
    """The client did not send its request body within the request timeout."""


async def serve(app: web.Application, host: str, port: int, *, limits: HttpLimits = HttpLimits(),
                shutdown_timeout: float = 1.0, on_refused: Optional[Callable[[str], None]] = None) -> tuple:
    """Listen on ``host:port`` (0 picks a free port); returns ``(runner, bound port)``, and ``runner.cleanup()``
    stops it. A failed bind cleans up and re-raises, so nothing is left half-listening.

    Greedy clients: one client address holds at most ``limits.connections_per_client`` open connections; one more
    is reset as it is accepted, before a byte of it is read (``ConnectionCap``), and ``on_refused`` (called on the
    loop, at most once a minute per address) says so.

    Slow clients: aiohttp's keep-alive timer runs from a connection's start and from each answer, and closes the
    connection if no whole request has arrived by then, so ``request_timeout_s`` bounds unfinished headers and idle
    keep-alive alike (a websocket or a streamed answer in progress is not idle). Bodies are bounded on every
    route, whatever its handler does (``bounded_body``): in size before a byte of one is read, in time by a deadline.

    No access log: aiohttp would write it from the loop thread, and only an actor's own thread logs. No signal
    handlers: the actor process's signals belong to Thespian and the launcher."""
    app[REQUEST_TIMEOUT] = limits.request_timeout_s
    if on_refused is not None:
        app[ON_REFUSED] = on_refused
    app.middlewares.insert(0, bounded_body)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=shutdown_timeout,
                           keepalive_timeout=limits.request_timeout_s)
    await runner.setup()
    if limits.connections_per_client:
        ConnectionCap(runner.server, limits.connections_per_client, on_refused)
    try:
        await web.TCPSite(runner, host, port, reuse_address=True).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, runner.addresses[0][1]


class ConnectionCap:
    """Counts the open connections of a server per client address, and resets one past ``limit`` as soon as it is
    accepted. It takes the server's own connection hooks (aiohttp's Server calls them for every connection it
    accepts and loses), so nothing else of the server changes. Keep-alive, unfinished headers and websockets all
    hold a connection: without the cap one client could hold every file descriptor the process has."""

    LOG_EVERY_S = 60.0

    def __init__(self, server: web.Server, limit: int, on_refused: Optional[Callable[[str], None]] = None):
        self.limit, self.on_refused = limit, on_refused
        self.open: collections.Counter = collections.Counter()
        self.client_of: dict = {}
        self.refused = 0
        self._said: dict[str, float] = {}
        made, lost = server.connection_made, server.connection_lost

        def connection_made(handler, transport) -> None:
            peer = transport.get_extra_info("peername")
            client = peer[0] if isinstance(peer, tuple) and peer else "?"
            made(handler, transport)
            self.client_of[handler] = client
            self.open[client] += 1
            if self.open[client] > self.limit:
                self.refused += 1
                self._say(client)
                transport.abort()   # connection_lost follows, and gives the slot back

        def connection_lost(handler, exc=None) -> None:
            client = self.client_of.pop(handler, None)
            if client is not None:
                self.open[client] -= 1
                if self.open[client] <= 0:
                    del self.open[client]
            lost(handler, exc)

        server.connection_made, server.connection_lost = connection_made, connection_lost

    def _say(self, client: str) -> None:
        now = time.monotonic()
        if self.on_refused is not None and now - self._said.get(client, -self.LOG_EVERY_S) >= self.LOG_EVERY_S:
            self._said[client] = now
            self.on_refused(f"{client} holds {self.limit} connections already "
                            f"([gateway] http_connections_per_client); refusing more")


@web.middleware
async def bounded_body(request: web.Request, handler):
    """Every request with a body, on every server: one whose Content-Length is over the application's
    ``client_max_size`` is answered 413 before a byte of it is read; one whose body has not all arrived within the
    body deadline (the application's ``BODY_TIMEOUT``, else the request timeout, from the request's start) has its
    body cut: every read of it from then on raises ``BodyTimeout`` (answered 408 if the handler does not answer
    it), and the connection is closed after the answer. A sender at one byte a second holds a connection and the
    bytes it sent for that long at most, never longer."""
    if not request.body_exists:
        return await handler(request)
    limit = request.client_max_size
    if limit and request.content_length is not None and request.content_length > limit:
        if (say := request.app.get(ON_REFUSED)) is not None:
            say(f"a request body of {request.content_length} bytes, over {limit}: refused unread (413)")
        refused = web.json_response({"error": f"request body over {limit} bytes"}, status=413)
        refused.force_close()   # the body is never read: the connection goes with the answer
        return refused
    timeout_s = request.app.get(BODY_TIMEOUT) or request.app.get(REQUEST_TIMEOUT, REQUEST_TIMEOUT_S)
    cut: list = []

    def cut_body() -> None:
        if not request.content.is_eof():
            cut.append(True)
            request.content.set_exception(BodyTimeout(f"no complete request body within {timeout_s:g}s"))
    timer = asyncio.get_running_loop().call_later(timeout_s, cut_body)
    try:
        response = await handler(request)
    except BodyTimeout as exc:
        response = web.json_response({"error": str(exc)}, status=408)
    finally:
        timer.cancel()
    if cut:
        response.force_close()   # the rest of the body is never read: the connection goes with the answer
    return response


async def read_body(request: web.Request) -> bytes:
    """The request's body, or BodyTimeout if it does not arrive within the server's request timeout (the size
    limit stays the application's ``client_max_size``: HTTPRequestEntityTooLarge)."""
    timeout_s = request.app.get(REQUEST_TIMEOUT, REQUEST_TIMEOUT_S)
    try:
        return await asyncio.wait_for(request.read(), timeout_s)
    except asyncio.TimeoutError:
        raise BodyTimeout(f"no complete request body within {timeout_s:g}s") from None


def host_allowed(host_header: str) -> bool:
    """True for a Host header naming an IP literal or localhost (with or without a port). A page of another site
    that resolves its own name to 127.0.0.1 (DNS rebinding) carries that name here, so it is refused."""
    name = urlsplit(f"//{host_header}").hostname or ""
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False
