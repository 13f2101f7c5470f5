"""The Request URL the open platform posts events to (aiohttp, on the adapter's bridge loop).

``POST`` with a JSON body, checked in this order, each failure a refusal reported once to ``on_refused`` with its
reason (nothing is stored or handed on): the body within its size and time limits; then ``open_callback``
(inbound.py): the signature and its age, the decryption, the verification token (401 for any of them: whoever sent
it does not hold the app's secrets; 400 for a body that is no callback). The URL check is answered with its
challenge; an event goes to ``deliver(payload)``, and 200 is answered once it returns: the adapter makes that mean
"the row is committed". A failure to store answers 500, and the platform delivers the event again.
"""
from __future__ import annotations

import time
from typing import Awaitable, Callable

from aiohttp import web

from actors.adapters.feishu.crypto import CallbackRefused
from actors.adapters.feishu.inbound import challenge_of, open_callback
from actors.adapters.push_server import PushServer, Refused
from supervision.http_serving import HttpLimits


class CallbackServer(PushServer):
    max_body_bytes = 256 * 1024   # one event per callback; files come by key

    def __init__(self, host: str, port: int, path: str, *, encrypt_key: str, verification_token: str,
                 max_age_s: float, deliver: Callable[[dict], Awaitable[None]], on_error: Callable[[str], None],
                 on_refused: Callable[[str], None] = lambda reason: None, limits: HttpLimits = HttpLimits()):
        super().__init__(host, port, path, limits, on_refused)
        self._encrypt_key, self._token, self._max_age_s = encrypt_key, verification_token, max_age_s
        self._deliver, self._on_error = deliver, on_error

    async def handle(self, request: web.Request) -> web.Response:
        try:
            body = await self.body_of(request)
        except Refused as refused:
            return refused.response
        try:
            payload = open_callback(body, request.headers, encrypt_key=self._encrypt_key,
                                    verification_token=self._token, now=time.time(), max_age_s=self._max_age_s)
            challenge = challenge_of(payload)
        except CallbackRefused as refused:
            return self.refusal("callback", refused.reason, refused.status)
        if challenge is not None:
            return web.json_response({"challenge": challenge})
        return await self.stored(payload, self._deliver, self._on_error)
