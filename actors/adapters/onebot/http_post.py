"""OneBot v11 over HTTP (communication/http.md and http-post.md): the implementation POSTs each event to a server
of the adapter's, and answers actions on its own HTTP API.

Events in. ``POST`` of one event as JSON, with ``X-Self-ID`` and, when a ``secret`` is set on both sides,
``X-Signature: sha1=<hex>``: the HMAC-SHA1 of the raw body keyed with the secret. Checked in this order, each
failure a refusal (nothing parsed, stored or handed on): the body within its size and time limits; the signature,
in constant time (missing 401, wrong 403); an account other than the table's (403); the body a JSON object (400).
Refusals are counted, and each reason logged at most once a minute (reverse.Refusals).
Then ``deliver(event)`` is awaited and 204 answered (no quick operation) once it returns: for a message, once its
row is committed. The implementation does not send an event again after a failure: a 500 loses it there, and the
log says so.

Actions out. ``POST {api_url}/{action}`` with the params as JSON and ``Authorization: Bearer``; the answer is the
same ``{"status", "retcode", "data"}`` as on the WebSocket (link.answer_data). HTTP 401 / 403 is the token, 404 an
unknown action.
"""
from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Awaitable, Callable, Optional

from aiohttp import web

from actors.adapters.errors import PermanentError, RetryableError
from actors.adapters.http_session import HttpSession
from actors.adapters.onebot.link import answer_data
from actors.adapters.onebot.reverse import Refusals
from actors.adapters.push_server import PushServer, Refused
from supervision.http_serving import HttpLimits

HTTP_REFUSALS = {401: "the access token is missing", 403: "the access token is wrong",
                 404: "the implementation has no such action"}


def signature_ok(secret: str, body: bytes, header: Optional[str]) -> bool:
    """``X-Signature`` is ``sha1=`` and the hex HMAC-SHA1 of ``body`` keyed with ``secret`` (pure)."""
    if not header or not header.startswith("sha1="):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha1).hexdigest()
    return hmac.compare_digest(header[5:].strip().lower(), expected)


class EventPostServer(PushServer):
    max_body_bytes = 1 << 20

    def __init__(self, host: str, port: int, path: str, *, secret: str, self_id: Callable[[], str],
                 deliver: Callable[[Any], Awaitable[None]], on_error: Callable[[str], None],
                 on_refused: Callable[[str], None], limits: HttpLimits):
        super().__init__(host, port, path, limits, on_refused)
        self._secret, self._self_id = secret, self_id
        self._deliver, self._on_error = deliver, on_error
        self.refusals = Refusals(on_refused)

    def _refuse(self, status: int, reason: str) -> web.Response:
        self.refusals.refused("an event POST refused", status, reason)
        return web.Response(status=status, text="refused")

    async def handle(self, request: web.Request) -> web.Response:
        try:
            body = await self.body_of(request)
        except Refused as refused:
            return refused.response
        if self._secret:
            header = request.headers.get("X-Signature")
            if header is None:
                return self._refuse(401, "no X-Signature")
            if not signature_ok(self._secret, body, header):
                return self._refuse(403, "a wrong X-Signature")
        account, caller = self._self_id(), request.headers.get("X-Self-ID", "").strip()
        if account and caller and caller != account:
            return self._refuse(403, f"account {caller[:20] if caller.isdigit() else '(not a number)'} is not this "
                                     f"table's ({account})")
        try:
            event = json.loads(body)
        except ValueError:
            return self._refuse(400, "the body is no JSON")
        if not isinstance(event, dict):
            return self._refuse(400, "the body is no JSON object")
        answered = await self.stored(event, self._deliver, self._on_error)
        return web.Response(status=204) if answered.status == 200 else answered


class HttpApi(HttpSession):
    """The implementation's HTTP API: ``call`` as ``Link.call``."""

    def __init__(self, api_url: str, token: str, request_timeout: float):
        super().__init__(request_timeout=request_timeout,
                         session_headers={"Authorization": f"Bearer {token}"} if token else None)
        self.api_url = api_url.rstrip("/")

    async def call(self, action: str, params: dict) -> Any:
        status, _headers, body = await self.request_json("POST", f"{self.api_url}/{action}", op=action, json=params)
        if status in HTTP_REFUSALS:
            raise PermanentError(HTTP_REFUSALS[status], method=action, status=status)
        if status >= 500:
            raise RetryableError("the implementation failed", method=action, status=status, maybe_done=True)
        return answer_data(action, body)
