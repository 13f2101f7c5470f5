"""The webhook URL Meta calls (aiohttp, on the adapter's bridge loop): the verification handshake and the events.

* ``GET ?hub.mode=subscribe&hub.verify_token=...&hub.challenge=...``: Meta checking the Callback URL when it is
  saved in the app's WhatsApp > Configuration page. The token must equal ``verify_token`` (compared in constant
  time); the answer is 200 with ``hub.challenge`` as the body, else 403.
* ``POST`` with the JSON body and ``X-Hub-Signature-256``: in this order, each failure a refusal reported once to
  ``on_refused`` with its reason, nothing stored, nothing reaching a session: the body within its size and time
  limits; the signature over the raw bytes (401); the JSON a ``whatsapp_business_account`` webhook (400). Only then
  is ``deliver(messages, statuses)`` awaited, and 200 answered once it returns: the adapter makes that mean "every
  message of the body is committed". A failure to store answers 500: Meta delivers the body again (it retries an
  unacknowledged webhook with decreasing frequency for up to 7 days), and the wamid dedup makes that one row.
"""
from __future__ import annotations

import hmac
from typing import Awaitable, Callable

from aiohttp import web

from actors.adapters.push_server import PushServer, Refused
from actors.adapters.whatsapp.inbound import WebhookRefused, check_signature, webhook_items
from supervision.http_serving import HttpLimits


class WebhookServer(PushServer):
    methods = ("GET", "POST")
    max_body_bytes = 512 * 1024   # a batch of messages is a few KB; media come by id

    def __init__(self, host: str, port: int, path: str, *, app_secret: str, verify_token: str,
                 phone_number_id: str, deliver: Callable[[list, list], Awaitable[None]],
                 on_error: Callable[[str], None], on_refused: Callable[[str], None] = lambda reason: None,
                 limits: HttpLimits = HttpLimits()):
        super().__init__(host, port, path, limits, on_refused)
        self._app_secret, self._verify_token, self._phone_number_id = app_secret, verify_token, phone_number_id
        self._deliver, self._on_error = deliver, on_error
        self.verified = 0               # handshakes answered

    async def handle(self, request: web.Request) -> web.Response:
        if request.method == "GET":
            return self._handshake(request)
        try:
            body = await self.body_of(request)
        except Refused as refused:
            return refused.response
        try:
            check_signature(body, request.headers.get("X-Hub-Signature-256"), self._app_secret)
            messages, statuses = webhook_items(body, self._phone_number_id)
        except WebhookRefused as refused:
            self._on_refused(f"webhook refused: {refused.reason}")
            return web.Response(status=refused.status, text="refused")
        return await self.stored((messages, statuses), lambda items: self._deliver(*items), self._on_error)

    def _handshake(self, request: web.Request) -> web.Response:
        mode, token = request.query.get("hub.mode", ""), request.query.get("hub.verify_token", "")
        challenge = request.query.get("hub.challenge", "")
        if mode != "subscribe" or not challenge or not hmac.compare_digest(token.encode(),
                                                                           self._verify_token.encode()):
            self._on_refused("webhook verification refused: hub.mode is not subscribe, no hub.challenge, or "
                             "hub.verify_token is not this table's verify_token")
            return web.Response(status=403, text="forbidden")
        self.verified += 1
        return web.Response(status=200, text=challenge[:256], content_type="text/plain")
