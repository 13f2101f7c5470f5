"""The webhook URL LINE calls (aiohttp, on the adapter's bridge loop).

``POST`` with the JSON body and ``X-Line-Signature``, checked in this order, each failure a refusal reported once to
``on_refused`` with its reason (nothing is parsed, stored or handed on): the body within its size and time limits;
the signature over the raw bytes (401: whoever sent it does not hold the channel secret); the body a JSON object
with an ``events`` list (400). Only then is ``deliver(events)`` awaited, and 200 answered once it returns: the
adapter makes that mean "the rows are committed". A failure to store answers 500, and LINE, with webhook
redelivery on, sends the events again (``deliveryContext.isRedelivery``).

The console's "Verify" button sends a signed body with no events: it is answered 200 like any other.

The same server answers LINE's fetches of the files a reply sends (media.py): ``GET <media_path>/<token>/<name>``
of a file in ``media`` (not expired, its name as given) is its bytes under its type; anything else under that path
is 404 (a HEAD, a POST: 405), told nothing of which part was wrong. Only where ``media`` is given (``public_url``
set): without it the path is not routed at all.
"""
from __future__ import annotations

from typing import Awaitable, Callable, Optional

from aiohttp import web

from actors.adapters.line.inbound import WebhookRefused, events_of, signature_ok
from actors.adapters.line.media import ServedMedia
from actors.adapters.push_server import PushServer, Refused
from supervision.http_serving import HttpLimits


class WebhookServer(PushServer):
    max_body_bytes = 512 * 1024   # events are small (files come by id); LINE batches a few per request

    def __init__(self, host: str, port: int, path: str, *, channel_secret: str,
                 deliver: Callable[[list], Awaitable[None]], on_error: Callable[[str], None],
                 on_refused: Callable[[str], None] = lambda reason: None, limits: HttpLimits = HttpLimits(),
                 media: Optional[ServedMedia] = None, media_path: str = "/line/media"):
        super().__init__(host, port, path, limits, on_refused)
        self._secret = channel_secret
        self._deliver, self._on_error = deliver, on_error
        self.media, self.media_path = media, media_path.rstrip("/")

    def add_routes(self, app: web.Application) -> None:
        if self.media is not None:
            app.router.add_get(self.media_path + "/{token}/{name}", self.serve_file, allow_head=False)

    async def serve_file(self, request: web.Request) -> web.Response:
        served = self.media.get(request.match_info["token"], request.match_info["name"])
        if served is None:
            return web.Response(status=404, text="not found")
        return web.Response(body=served.data, content_type=served.mime,
                            headers={"Cache-Control": "private, max-age=3600", "X-Content-Type-Options": "nosniff"})

    async def handle(self, request: web.Request) -> web.Response:
        try:
            body = await self.body_of(request)
        except Refused as refused:
            return refused.response
        try:
            if not signature_ok(self._secret, body, request.headers.get("X-Line-Signature")):
                raise WebhookRefused("bad or missing X-Line-Signature", status=401)
            events = events_of(body)
        except WebhookRefused as refused:
            return self.refusal("webhook", refused.reason, refused.status)
        return await self.stored(events, self._deliver, self._on_error)
