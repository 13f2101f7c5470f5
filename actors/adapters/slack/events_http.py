"""The Events API over HTTP: the small server Slack POSTs events to (aiohttp, on the adapter's bridge loop).

Every request is checked before anything else is done with it: signed with the app's signing secret over
``v0:timestamp:body`` and no more than five minutes old (signing.py), otherwise 401 and nothing is stored. Then:

* ``url_verification`` (Slack checking the Request URL when it is entered in the app's settings): answered with
  its ``challenge``;
* ``event_callback``: ``deliver(payload)`` is awaited and only then is 200 answered, which the adapter makes mean
  "the inbox row is committed" (or the event is skipped). Slack waits 3 s for a 2xx; a slower answer, a failure
  (500) or a cut connection makes it retry (``X-Slack-Retry-Num`` 1, 2, 3, at once, after 1 and 5 minutes). A
  retry carries the same event, and its message the same ``channel:ts``, so the inbox dedup makes it no second row
  (and a retry that finds the row committed is answered 200 at once).

A body that is no JSON object answers 400, a too large one 413; each refusal is reported to ``on_refused``.
"""
from __future__ import annotations

import json
import time
from typing import Any, Awaitable, Callable

from aiohttp import web

from actors.adapters.slack.signing import refusal
from actors.adapters.push_server import PushServer, Refused
from supervision.http_serving import HttpLimits



class EventsServer(PushServer):
    def __init__(self, host: str, port: int, path: str, signing_secret: str,
                 deliver: Callable[[Any], Awaitable[None]], on_error: Callable[[str], None],
                 on_refused: Callable[[str], None] = lambda reason: None, limits: HttpLimits = HttpLimits(),
                 clock: Callable[[], float] = time.time):
        super().__init__(host, port, path, limits, on_refused)
        self._secret, self._clock = signing_secret, clock
        self._deliver, self._on_error = deliver, on_error
        self.retries_seen = 0           # requests carrying X-Slack-Retry-Num

    async def handle(self, request: web.Request) -> web.Response:
        try:
            body = await self.body_of(request)
        except Refused as refused:
            return refused.response
        why = refusal(self._secret, request.headers.get("X-Slack-Request-Timestamp"),
                      request.headers.get("X-Slack-Signature"), body, self._clock())
        if why is not None:
            self._on_refused(why)
            return web.Response(status=401, text="invalid signature")
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError) as exc:
            self._on_refused(f"body is not JSON: {type(exc).__name__}")
            return web.Response(status=400, text="not JSON")
        if not isinstance(payload, dict):
            self._on_refused(f"body is {type(payload).__name__}, not an object")
            return web.Response(status=400, text="not a JSON object")
        if payload.get("type") == "url_verification":
            return web.json_response({"challenge": str(payload.get("challenge", ""))})
        if request.headers.get("X-Slack-Retry-Num"):
            self.retries_seen += 1
        return await self.stored(payload, self._deliver, self._on_error)
