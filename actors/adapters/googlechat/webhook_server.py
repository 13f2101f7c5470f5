"""The HTTP endpoint Google Chat posts interaction events to (aiohttp, on the adapter's bridge loop).

``POST`` with the JSON event and ``Authorization: Bearer`` (a JWT Google signed), checked in this order, each
failure a refusal reported once to ``on_refused`` with its reason (nothing is parsed, stored or handed on): the body
within its size and time limits; the token (``verify(header)``: signature, issuer, audience, expiry; 401: whoever
sent it is not Google Chat calling this app); the body a JSON event (400). Only then is ``deliver(event)`` awaited,
and 200 ``{}`` answered once it returns (an empty answer: no message in the response; the answer goes later through
the API), which the adapter makes mean "the row is committed". A failure to store, or the signing keys out of reach,
answers 500: nothing was stored.
"""
from __future__ import annotations

import json
from typing import Awaitable, Callable

from aiohttp import web

from actors.adapters.bearer_tokens import TokenRefused
from actors.adapters.googlechat.inbound import EventRefused, event_of
from actors.adapters.push_server import PushServer, Refused
from supervision.http_serving import HttpLimits


class EventServer(PushServer):
    max_body_bytes = 256 * 1024   # one event: a message and its space and sender; files come by reference

    def __init__(self, host: str, port: int, path: str, *, verify: Callable[[str], Awaitable[dict]],
                 deliver: Callable[[dict], Awaitable[None]], on_error: Callable[[str], None],
                 on_refused: Callable[[str], None] = lambda reason: None, limits: HttpLimits = HttpLimits()):
        super().__init__(host, port, path, limits, on_refused)
        self._verify, self._deliver, self._on_error = verify, deliver, on_error
        self.refused = 0

    async def handle(self, request: web.Request) -> web.Response:
        try:
            body = await self.body_of(request)
        except Refused as refused:
            return refused.response
        try:
            await self._verify(request.headers.get("Authorization"))
            event = event_of(body)
        except TokenRefused as refused:
            return self._refuse(f"event refused: {refused}", 401)
        except EventRefused as refused:
            return self._refuse(f"event refused: {refused.reason}", refused.status)
        except Exception as exc:  # noqa: BLE001 - the keys could not be fetched: nothing verified, nothing stored
            self._on_error(f"the token could not be checked: {type(exc).__name__}: {exc}")
            return web.Response(status=500, text="not stored, try again")
        answer = await self.stored(event, self._deliver, self._on_error)
        if answer.status != 200:
            return answer
        return web.Response(status=200, text=json.dumps({}), content_type="application/json")

    def _refuse(self, reason: str, status: int) -> web.Response:
        self.refused += 1
        self._on_refused(reason)
        return web.Response(status=status, text="refused")
