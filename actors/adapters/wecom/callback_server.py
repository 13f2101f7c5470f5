"""The callback URL WeCom calls (aiohttp, on the adapter's bridge loop): the URL check and the message callbacks.

* ``GET ?msg_signature&timestamp&nonce&echostr``: WeCom checking the URL when it is saved in the admin console.
  The signature over ``echostr`` is checked, ``echostr`` decrypted, and its plaintext answered as the body.
* ``POST ?msg_signature&timestamp&nonce`` with the encrypted envelope: in this order, each failure a refusal
  reported once to ``on_refused`` with its reason (nothing is stored, nothing reaches a session): the body within
  its size and time limits; the envelope parsed (defusedxml) for ``Encrypt``; the signature over it checked;
  the timestamp within ``max_skew_s`` of our clock (a recorded callback replayed later is refused, after the
  inbox's dedup window too); decrypted (padding, ReceiveId = corp id); the message XML parsed (defusedxml).
  Only then is ``deliver(fields)`` awaited, and 200 with an empty body answered once it returns: the adapter makes
  that mean "the inbox row is committed".

The passive reply window. WeCom waits 5 s for the answer to a callback; with none it closes the connection and
sends the callback again, three times in all. An empty 200 means "received, no passive reply", and WeCom neither
retries nor shows anything. The gateway never uses the passive reply (an encrypted reply XML in the answer's
body): the agent's answer takes longer than 5 s as often as not, a passive reply has no message id for the
delivery ledger and cannot be recalled, and its fate is unknown when the connection is cut; and holding the answer
open until the agent is done would leave the event unacknowledged, so WeCom would deliver it again. So the answer
is an empty 200 as soon as the row is committed (milliseconds), and every reply goes out through the active
message/send API (api.py), where each send's outcome and id are known.
"""
from __future__ import annotations

import time
from typing import Any, Awaitable, Callable

from aiohttp import web

from actors.adapters.push_server import PushServer, Refused
from actors.adapters.wecom.crypto import CallbackRefused, check_signature, decrypt
from actors.adapters.wecom.inbound import encrypted_of, parse_fields
from supervision.http_serving import HttpLimits


class CallbackServer(PushServer):
    methods = ("GET", "POST")
    max_body_bytes = 256 * 1024   # a text message is at most a few KB encrypted; media come by id

    def __init__(self, host: str, port: int, path: str, *, token: str, key: bytes, corp_id: str,
                 deliver: Callable[[Any], Awaitable[None]], on_error: Callable[[str], None],
                 on_refused: Callable[[str], None] = lambda reason: None, limits: HttpLimits = HttpLimits(),
                 max_skew_s: float = 0.0, clock: Callable[[], float] = time.time):
        super().__init__(host, port, path, limits, on_refused)
        self._token, self._key, self._corp_id = token, key, corp_id
        self._deliver, self._on_error = deliver, on_error
        self._max_skew_s, self._clock = max_skew_s, clock
        self.verified = 0               # URL checks answered

    async def handle(self, request: web.Request) -> web.Response:
        try:
            if request.method == "GET":
                return self._verify_url(request)
            try:
                body = await self.body_of(request)
            except Refused as refused:
                return refused.response
            return await self.stored(self.message_of(request, body), self._deliver, self._on_error)
        except CallbackRefused as refused:
            self._on_refused(f"callback refused: {refused.reason}")
            return web.Response(status=refused.status, text="refused")

    def _query(self, request: web.Request, *names: str) -> list[str]:
        values = [request.query.get(name, "") for name in names]
        missing = [name for name, value in zip(names, values) if not value]
        if missing:
            raise CallbackRefused(f"no {', '.join(missing)} in the query", status=401)
        return values

    def _verify_url(self, request: web.Request) -> web.Response:
        signature, timestamp, nonce, echostr = self._query(request, "msg_signature", "timestamp", "nonce",
                                                           "echostr")
        echostr = echostr.replace(" ", "+")   # a '+' sent unescaped reads as a space: base64 never holds one
        check_signature(self._token, timestamp, nonce, echostr, signature)
        plain = decrypt(self._key, echostr, self._corp_id)
        self.verified += 1
        return web.Response(status=200, body=plain, content_type="text/plain")

    def message_of(self, request: web.Request, body: bytes) -> dict:
        """The decrypted message's fields, or CallbackRefused (in the order of the module docstring)."""
        signature, timestamp, nonce = self._query(request, "msg_signature", "timestamp", "nonce")
        encrypted = encrypted_of(body)
        check_signature(self._token, timestamp, nonce, encrypted, signature)
        if self._max_skew_s:
            if not timestamp.isdigit():
                raise CallbackRefused(f"timestamp {timestamp[:20]!r} is no number", status=401)
            skew = abs(self._clock() - int(timestamp))
            if skew > self._max_skew_s:
                raise CallbackRefused(f"timestamp is {skew:.0f} s from our clock, over {self._max_skew_s:.0f} s "
                                      "(a replay, or a clock to set right)", status=401)
        return parse_fields(decrypt(self._key, encrypted, self._corp_id), "message")
