"""The webhook (HTTP callback) intake: the small server QQ POSTs events to, on the adapter's bridge loop.

QQ signs every request with Ed25519. The key pair is derived from the bot's AppSecret: the secret repeated until it
is at least 32 bytes, its first 32 bytes the seed. A request carries ``X-Signature-Timestamp`` and
``X-Signature-Ed25519`` (hex), the signature over the timestamp followed by the body; one that is missing or does
not verify is answered 401 and nothing of it is read on. Then:

* op 13, the validation QQ sends when the callback URL is configured: ``d`` has ``plain_token`` and ``event_ts``,
  answered ``{"plain_token", "signature"}``, the signature (hex) over ``event_ts`` followed by ``plain_token``.
  Signing what a request names makes the server a signing oracle, and the validation message has the shape of an
  event's (a timestamp, then text): so ``event_ts`` must be digits and ``plain_token`` letters and digits (as QQ
  sends them), which no event body (a JSON object, starting with ``{``) can be. With that rule a validation
  without signature headers is answered too (QQ's may come unsigned); one with a bad signature is refused.
* op 0, an event: ``deliver(name, data)`` is awaited (the adapter commits the inbox row, or skips the event) and
  only then is ``{"op": 12, "d": 0}`` (HTTP callback ACK) answered 200; a failure answers 500 and QQ sends the event
  again, which the inbox's dedup on the message id makes no second row.

A body over the push server's bound answers 413, one that is no JSON object 400; each refusal reported to
``on_refused``. No freshness bound on the timestamp: a replayed signed request re-delivers an event already stored.
"""
from __future__ import annotations

import json
import re
from typing import Any, Awaitable, Callable, Optional

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from actors.adapters.push_server import PushServer, Refused
from supervision.http_serving import HttpLimits

VALIDATION, DISPATCH, CALLBACK_ACK = 13, 0, 12
PLAIN_TOKEN = re.compile(r"[A-Za-z0-9]{1,128}")
EVENT_TS = re.compile(r"[0-9]{1,20}")


def signing_key(secret: str) -> Ed25519PrivateKey:
    """The bot's Ed25519 key, from its AppSecret as QQ derives it (pure)."""
    seed = secret.encode("utf-8")
    if not seed:
        raise ValueError("the AppSecret is empty")
    while len(seed) < 32:
        seed += seed
    return Ed25519PrivateKey.from_private_bytes(seed[:32])


def signature_ok(key: Ed25519PrivateKey, timestamp: Optional[str], body: bytes, signature: Optional[str]) -> bool:
    """Whether ``signature`` (hex) is the bot key's over ``timestamp`` + ``body`` (pure)."""
    if not timestamp or not signature:
        return False
    try:
        key.public_key().verify(bytes.fromhex(signature), timestamp.encode("utf-8") + body)
    except (ValueError, InvalidSignature):
        return False
    return True


def validation_answer(key: Ed25519PrivateKey, data: Any) -> Optional[dict]:
    """The answer to an op 13 validation, or None when ``data`` is no validation this server signs (pure)."""
    if not isinstance(data, dict):
        return None
    token, stamp = data.get("plain_token"), data.get("event_ts")
    if not (isinstance(token, str) and PLAIN_TOKEN.fullmatch(token) and isinstance(stamp, str)
            and EVENT_TS.fullmatch(stamp)):
        return None
    return {"plain_token": token, "signature": key.sign((stamp + token).encode("utf-8")).hex()}


class CallbackServer(PushServer):
    def __init__(self, host: str, port: int, path: str, secret: str,
                 deliver: Callable[[str, Any], Awaitable[None]], on_error: Callable[[str], None],
                 on_refused: Callable[[str], None] = lambda reason: None, limits: HttpLimits = HttpLimits()):
        super().__init__(host, port, path, limits, on_refused)
        self._key = signing_key(secret)
        self._deliver, self._on_error = deliver, on_error

    async def handle(self, request: web.Request) -> web.Response:
        try:
            body = await self.body_of(request)
        except Refused as refused:
            return refused.response
        timestamp, signature = (request.headers.get("X-Signature-Timestamp"),
                                request.headers.get("X-Signature-Ed25519"))
        signed = signature_ok(self._key, timestamp, body, signature)
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            payload = None
        if not isinstance(payload, dict):
            return self.refusal("a callback", "the body is no JSON object", 400 if signed else 401)
        if payload.get("op") == VALIDATION and (signed or (timestamp is None and signature is None)):
            answer = validation_answer(self._key, payload.get("d"))
            if answer is None:
                return self.refusal("a validation", "plain_token or event_ts is not as QQ sends them", 400)
            return web.json_response(answer)
        if not signed:
            return self.refusal("a callback", "the Ed25519 signature is missing or does not verify", 401)
        if payload.get("op") != DISPATCH or not isinstance(payload.get("t"), str):
            return web.json_response({"op": CALLBACK_ACK, "d": 0})     # nothing of ours: acknowledged
        answer = await self.stored((payload["t"], payload.get("d")), self._deliver_pair, self._on_error)
        if answer.status != 200:
            return answer
        return web.json_response({"op": CALLBACK_ACK, "d": 0})

    async def _deliver_pair(self, event: tuple) -> None:
        await self._deliver(*event)
