"""The small HTTP server a platform pushes its events to (a webhook), on the adapter's bridge loop: one POST route,
served with the gateway's HTTP limits (supervision/http_serving.py), no access log (a request line is of no use to
an operator here, and the path may be made secret-ish).

A base class of the platforms' push servers (telegram/webhook.py, slack/events_http.py); its fields are its own,
each server adds its checks in ``handle(request)``.
"""
from __future__ import annotations

from typing import Callable, Optional

from aiohttp import web

from supervision.http_serving import HttpLimits, serve


class PushServer:
    max_body_bytes = 1 << 20   # an event is a few KB; nothing legitimate comes close

    def __init__(self, host: str, port: int, path: str, limits: HttpLimits = HttpLimits(),
                 on_refused: Callable[[str], None] = lambda reason: None):
        self.host, self.requested_port, self.path, self.limits = host, port, path, limits
        self._on_refused = on_refused
        self._runner: Optional[web.AppRunner] = None
        self.port: Optional[int] = None

    async def handle(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def start(self) -> int:
        """Listen; returns the bound port (useful when 0 was asked for)."""
        app = web.Application(client_max_size=self.max_body_bytes)
        app.router.add_post(self.path, self.handle)
        self._runner, self.port = await serve(app, self.host, self.requested_port, limits=self.limits,
                                              on_refused=self._on_refused)
        return self.port

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
