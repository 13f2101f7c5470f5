"""The small HTTP server a platform pushes its events to (a webhook), on the adapter's bridge loop: one POST route,
served with the gateway's HTTP limits (supervision/http_serving.py), no access log (a request line is of no use to
an operator here, and the path may be made secret-ish).

A base class of the platforms' push servers (telegram/webhook.py, slack/events_http.py); its fields are its own,
each server adds its checks in ``handle(request)``, reading the body with ``body_of`` (a refusal is raised as
``Refused`` with the answer to give) and handing the event on with ``stored`` (2xx only once it is committed: a
failure answers 500 and the platform delivers it again). ``StoredThisLife`` is the adapter's side of a push: one
event stored at a time, a repeat of one this life stored answered without a write (Google Chat, Teams).
"""
from __future__ import annotations

import asyncio
import collections
from typing import Any, Awaitable, Callable, Hashable, Optional

from aiohttp import web

from supervision.http_serving import BodyTimeout, HttpLimits, read_body, serve


class Refused(Exception):
    """The request is refused with ``response`` (the reason was reported to ``on_refused``)."""

    def __init__(self, response: web.Response):
        super().__init__(response.text)
        self.response = response


class PushServer:
    max_body_bytes = 1 << 20   # an event is a few KB; nothing legitimate comes close
    methods: tuple = ("POST",)  # routed to ``handle`` (WeCom checks its callback URL with a GET)

    def __init__(self, host: str, port: int, path: str, limits: HttpLimits = HttpLimits(),
                 on_refused: Callable[[str], None] = lambda reason: None):
        self.host, self.requested_port, self.path, self.limits = host, port, path, limits
        self._on_refused = on_refused
        self._runner: Optional[web.AppRunner] = None
        self.port: Optional[int] = None
        self.refused = 0   # requests refused by the platform's own checks (``refusal``)

    async def handle(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def body_of(self, request: web.Request) -> bytes:
        """The whole body, within the size and time limits; ``Refused`` (408 / 413) past them."""
        try:
            return await read_body(request)
        except BodyTimeout as exc:
            self._on_refused(str(exc))
            raise Refused(web.Response(status=408, text="request body too slow")) from None
        except web.HTTPRequestEntityTooLarge:
            self._on_refused(f"body over {self.max_body_bytes} bytes")
            raise Refused(web.Response(status=413, text="too large")) from None

    def refusal(self, what: str, reason: str, status: int) -> web.Response:
        """A request the platform's checks refused (a bad signature, no event): counted, its reason reported once,
        answered ``status`` with nothing else done."""
        self.refused += 1
        self._on_refused(f"{what} refused: {reason}")
        return web.Response(status=status, text="refused")

    async def stored(self, event: Any, deliver: Callable[[Any], Awaitable[None]],
                     on_error: Callable[[str], None]) -> web.Response:
        """``deliver(event)`` (the adapter commits its inbox row), then 200; a failure is 500: not stored, so the
        platform must deliver it again."""
        try:
            await deliver(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - not stored: the platform delivers it again
            on_error(f"{type(exc).__name__}: {exc}")
            return web.Response(status=500, text="not stored, try again")
        return web.Response(status=200)

    async def start(self) -> int:
        """Listen; returns the bound port (useful when 0 was asked for)."""
        app = web.Application(client_max_size=self.max_body_bytes)
        for method in self.methods:
            app.router.add_route(method, self.path, self.handle)
        self.add_routes(app)
        self._runner, self.port = await serve(app, self.host, self.requested_port, limits=self.limits,
                                              on_refused=self._on_refused)
        return self.port

    def add_routes(self, app: web.Application) -> None:
        """Routes besides the push route, for a server that also answers something else on its port (LINE's
        files, fetched by the platform from the same public server)."""

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


class KeptPushServer:
    """A served adapter's push server, owned by the adapter as a field: started by its first ``connect`` and kept up
    between connection attempts, so the platform's pushes are still taken while its API refuses (WeCom, WhatsApp);
    the adapter closes it when its intake stops (a drain) and at stop."""

    def __init__(self) -> None:
        self.server: Optional[PushServer] = None

    async def close(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            await server.stop()

    def url(self) -> Optional[str]:
        """Where it serves (``status`` shows it), once it listens."""
        server = self.server
        if server is None or server.port is None:
            return None
        return f"http://{server.host}:{server.port}{server.path}"


class StoredThisLife:
    """The keys of pushed events committed in this life (the newest ``most``), and the lock that stores one at a time:
    a repeat (the platform's retry racing its first delivery, or a redelivery) is answered without a write. The
    inbox's dedup covers a repeat after a restart; this only spares it the transaction."""

    def __init__(self, most: int = 4096):
        self.most = most
        self.repeats = 0
        self._keys: collections.OrderedDict = collections.OrderedDict()
        self._lock: Optional[asyncio.Lock] = None   # made on the loop that stores

    async def store_once(self, key: Optional[Hashable], store: Callable[[], Awaitable[None]]) -> bool:
        """``store()`` unless ``key`` was stored in this life already (a None key is always stored); True if it
        was. A failed store remembers nothing: the platform's retry stores it."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if key is not None and key in self._keys:
                self.repeats += 1
                return False
            await store()
            if key is not None:
                self._keys[key] = True
                while len(self._keys) > self.most:
                    self._keys.popitem(last=False)
            return True
