"""The small HTTP server Telegram pushes updates to in webhook mode (aiohttp, on the adapter's bridge loop).

Telegram treats any 2xx as "delivered, never send it again", and retries anything else. So the server answers 2xx
only once ``deliver(update)`` has returned, which the adapter makes mean "the inbox row is committed"; a failure
answers 500 and Telegram delivers the update again later (the inbox dedup absorbs a repeat). A request without the
configured ``X-Telegram-Bot-Api-Secret-Token`` is refused with 401 before its body is read, a body that is no
JSON with 400; each refusal is reported to ``on_refused(reason)`` (the adapter logs it), since no update comes of it.
"""
from __future__ import annotations

import hmac
import json
from typing import Any, Awaitable, Callable

from aiohttp import web

from actors.adapters.push_server import PushServer, Refused
from supervision.http_serving import HttpLimits

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class WebhookServer(PushServer):
    def __init__(self, host: str, port: int, path: str, secret: str,
                 deliver: Callable[[Any], Awaitable[None]], on_error: Callable[[str], None],
                 on_refused: Callable[[str], None] = lambda reason: None, limits: HttpLimits = HttpLimits()):
        super().__init__(host, port, path, limits, on_refused)
        self._secret = secret.encode()
        self._deliver, self._on_error = deliver, on_error

    async def handle(self, request: web.Request) -> web.Response:
        # Headers arrive decoded with surrogateescape: a non-UTF-8 token is a wrong token (401), not a 500.
        given = request.headers.get(SECRET_HEADER, "").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, self._secret):
            self._on_refused(f"{'wrong' if given else 'no'} {SECRET_HEADER}")
            return web.Response(status=401, text="wrong secret token")
        try:
            update = json.loads(await self.body_of(request))
        except Refused as refused:
            return refused.response
        except (ValueError, RecursionError) as exc:   # RecursionError: JSON nested too deeply to parse
            self._on_refused(f"body is not JSON: {type(exc).__name__}: {exc}")
            return web.Response(status=400, text="not JSON")
        return await self.stored(update, self._deliver, self._on_error)
