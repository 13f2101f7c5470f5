"""The bot's messaging endpoint the Bot Connector POSTs activities to (aiohttp, on the adapter's bridge loop).

Each request is checked in this order, each failure a refusal reported once to ``on_refused`` with its reason
(nothing stored, nothing handed on): the body within its size and time limits; the bearer token (``verify(header)``:
signature, issuer, audience, expiry: 401, whoever sent it is not the Connector calling this bot); the body an
activity (400); the token speaks for it (``check(claims, activity)``: its serviceUrl claim, its key's endorsements:
401); the activity's serviceUrl one the bot may answer at (403). Only then is ``deliver(activity)`` awaited, and 200
answered once it returns, which the adapter makes mean "the row is committed". A failure to store, or the signing
keys out of reach, answers 500: nothing was stored, and the Connector delivers it again.
"""
from __future__ import annotations

from typing import Awaitable, Callable

from aiohttp import web

from actors.adapters.bearer_tokens import TokenRefused
from actors.adapters.push_server import PushServer, Refused
from actors.adapters.teams.inbound import ActivityRefused, activity_of
from actors.adapters.teams.serviceurls import ServiceUrlRefused
from supervision.http_serving import HttpLimits


class ActivityServer(PushServer):
    max_body_bytes = 256 * 1024   # one activity; files come by reference

    def __init__(self, host: str, port: int, path: str, *, verify: Callable[[str], Awaitable[dict]],
                 check: Callable[[dict, dict], None], deliver: Callable[[dict], Awaitable[None]],
                 on_error: Callable[[str], None], on_refused: Callable[[str], None] = lambda reason: None,
                 limits: HttpLimits = HttpLimits()):
        super().__init__(host, port, path, limits, on_refused)
        self._verify, self._check, self._deliver, self._on_error = verify, check, deliver, on_error

    async def handle(self, request: web.Request) -> web.Response:
        try:
            body = await self.body_of(request)
        except Refused as refused:
            return refused.response
        try:
            claims = await self._verify(request.headers.get("Authorization"))
            activity = activity_of(body)
            self._check(claims, activity)
        except TokenRefused as refused:
            return self.refusal("activity", str(refused), 401)
        except ActivityRefused as refused:
            return self.refusal("activity", refused.reason, refused.status)
        except ServiceUrlRefused as refused:
            return self.refusal("activity", str(refused), 403)
        except Exception as exc:  # noqa: BLE001 - the keys could not be fetched: nothing verified, nothing stored
            self._on_error(f"the token could not be checked: {type(exc).__name__}: {exc}")
            return web.Response(status=500, text="not stored, try again")
        return await self.stored(activity, self._deliver, self._on_error)
