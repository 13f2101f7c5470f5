"""HTTP mode: the small server the platform POSTs the robot's messages to (aiohttp, on the adapter's bridge loop).

Every request is checked before anything else is done with it: its ``timestamp`` and ``sign`` headers (signing.py),
otherwise 401 and nothing is stored; a body that is no JSON object is 400, a too large one 413; each refusal is
reported to ``on_refused``. Then ``deliver(message)`` is awaited and only then is 200 answered, which the adapter
makes mean "the inbox row is committed" (or the message is skipped); a failure is 500, and the platform sends the
message again.
"""
from __future__ import annotations

import json
import time
from typing import Any, Awaitable, Callable

from aiohttp import web

from actors.adapters.dingtalk.signing import refusal
from actors.adapters.push_server import PushServer, Refused
from supervision.http_serving import HttpLimits


class CallbackServer(PushServer):
    def __init__(self, host: str, port: int, path: str, app_secret: str, max_age_s: float,
                 deliver: Callable[[Any], Awaitable[None]], on_error: Callable[[str], None],
                 on_refused: Callable[[str], None] = lambda reason: None, limits: HttpLimits = HttpLimits(),
                 clock: Callable[[], float] = time.time):
        super().__init__(host, port, path, limits, on_refused)
        self._secret, self._max_age_s, self._clock = app_secret, max_age_s, clock
        self._deliver, self._on_error = deliver, on_error

    async def handle(self, request: web.Request) -> web.Response:
        try:
            body = await self.body_of(request)
        except Refused as refused:
            return refused.response
        why = refusal(self._secret, request.headers.get("timestamp"), request.headers.get("sign"), self._clock(),
                      self._max_age_s)
        if why is not None:
            return self.refusal("callback", why, 401)
        try:
            message = json.loads(body)
        except (ValueError, RecursionError) as exc:
            return self.refusal("callback", f"the body is no JSON ({type(exc).__name__})", 400)
        if not isinstance(message, dict):
            return self.refusal("callback", f"the body is {type(message).__name__}, not an object", 400)
        return await self.stored(message, self._deliver, self._on_error)
