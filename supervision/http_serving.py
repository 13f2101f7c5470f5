"""Serving HTTP from an actor's async bridge: the one way the gateway's small servers start (web chat, webhooks,
the OpenAI-compatible API, metrics), with the same bounds on slow clients for all of them."""
from __future__ import annotations

import asyncio
import ipaddress
from urllib.parse import urlsplit

from aiohttp import web

REQUEST_TIMEOUT_S = 10.0          # [gateway] http_request_timeout_s
REQUEST_TIMEOUT = web.AppKey("request_timeout_s", float)


class BodyTimeout(Exception):
    """The client did not send its request body within the request timeout."""


async def serve(app: web.Application, host: str, port: int, *, request_timeout_s: float = REQUEST_TIMEOUT_S,
                shutdown_timeout: float = 1.0) -> tuple:
    """Listen on ``host:port`` (0 picks a free port); returns ``(runner, bound port)``, and ``runner.cleanup()``
    stops it. A failed bind cleans up and re-raises, so nothing is left half-listening.

    Slow clients: aiohttp's keep-alive timer runs from a connection's start and from each answer, and closes the
    connection if no whole request has arrived by then, so ``request_timeout_s`` bounds unfinished headers and idle
    keep-alive alike (a websocket or a streamed answer in progress is not idle). Bodies are bounded by
    ``read_body``.

    No access log: aiohttp would write it from the loop thread, and only an actor's own thread logs. No signal
    handlers: the actor process's signals belong to Thespian and the launcher."""
    app[REQUEST_TIMEOUT] = request_timeout_s
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=shutdown_timeout,
                           keepalive_timeout=request_timeout_s)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, reuse_address=True).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, runner.addresses[0][1]


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
