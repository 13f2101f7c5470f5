"""Async client for WeCom's server API (aiohttp): the access token and the few calls the adapter makes.

The access token. ``GET /cgi-bin/gettoken?corpid=&corpsecret=`` answers ``{"access_token", "expires_in": 7200}``;
every other call carries it as ``?access_token=``. WeCom limits gettoken itself, so the token is cached until
``expires_in`` is nearly over (``REFRESH_MARGIN_S`` early), one fetch at a time, and fetched again when a call
answers 40014 (invalid) or 42001 (expired) or 41001 (missing): that call is then repeated once with the new token,
which is safe because WeCom refused it without doing anything.

Answers are HTTP 200 with ``{"errcode", "errmsg"}`` (errcode 0: done). Each failure is raised as one of
actors.adapters.errors:

    45009 (api freq out of limit), 45033 (too many at once), 45011     FloodError(rate_limit_wait_s): WeCom names
                                                                        no wait; the adapter's own is used
    -1 (system busy), HTTP 5xx, network errors, timeouts               RetryableError (``maybe_done`` once the
                                                                        request may have left)
    45002 (content over the limit)                                     TooLongError
    40001 / 40013 / 40056 / 60020 / 81013 / 48002 / any other           PermanentError (a wrong secret, corp id or
                                                                        agent id, an address not on the trusted
                                                                        list, a member outside the app's visible
                                                                        range, an API the app may not use)

The secret and tokens travel in URLs, so every error text is built from the call's name and WeCom's errcode and
errmsg, and anything from aiohttp goes through ``redact`` first.
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Callable, Optional
from urllib.parse import urlencode

import aiohttp

from actors.adapters.errors import FloodError, PermanentError, PlatformError, RetryableError, TooLongError
from actors.adapters.http_session import HttpSession, capped_body
from common.redact import redact as redact_secrets

WECOM_API = "https://qyapi.weixin.qq.com"
REFRESH_MARGIN_S = 300.0
TOKEN_ERRORS = (40014, 42001, 41001)
RATE_LIMITS = (45009, 45033, 45011)
TRANSIENT = (-1,)


class MediaTooLarge(Exception):
    def __init__(self, size: int):
        super().__init__(f"{size} bytes")
        self.size = size


class WeComAPI(HttpSession):
    """One application's client: corp id + the application's secret; owns its aiohttp session and token."""

    def __init__(self, corp_id: str, secret: str, base_url: str = WECOM_API, request_timeout: float = 30.0,
                 rate_limit_wait_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        super().__init__(request_timeout=request_timeout)
        self.corp_id, self._secret = corp_id, secret
        self.base_url = base_url.rstrip("/")
        self.rate_limit_wait_s = rate_limit_wait_s
        self._clock = clock
        self._token: Optional[str] = None
        self._token_until = 0.0
        self._token_lock: Optional[asyncio.Lock] = None
        self._issued: list[str] = []      # every token held, for redaction (a few a day)
        self.tokens_fetched = 0

    def __repr__(self) -> str:  # never the secret or a token
        return f"WeComAPI(corp_id={self.corp_id!r}, base_url={self.base_url!r})"

    def redact(self, text: str) -> str:
        return redact_secrets(text, [self._secret, *self._issued])

    # -- the access token
    async def fetch_token(self) -> dict:
        """gettoken: the answer (``access_token``, ``expires_in``); the token is cached."""
        query = urlencode({"corpid": self.corp_id, "corpsecret": self._secret})
        body = await self._request("GET", f"/cgi-bin/gettoken?{query}", "gettoken")
        token, expires_in = body.get("access_token"), body.get("expires_in")
        if not isinstance(token, str) or not token:
            raise RetryableError("the answer holds no access_token", method="gettoken")
        lifetime = float(expires_in) if isinstance(expires_in, (int, float)) and expires_in > 0 else 7200.0
        self._token = token
        self._token_until = self._clock() + max(lifetime - min(REFRESH_MARGIN_S, lifetime / 10), 1.0)
        self._issued = (self._issued + [token])[-8:]
        self.tokens_fetched += 1
        return body

    async def access_token(self) -> str:
        if self._token_lock is None:
            self._token_lock = asyncio.Lock()
        async with self._token_lock:   # one gettoken at a time: the others wait for its token
            if self._token is None or self._clock() >= self._token_until:
                await self.fetch_token()
            return self._token

    def forget_token(self, token: str) -> None:
        if self._token == token:
            self._token = None

    # -- calls
    async def send_text(self, agent_id: int, user: str, text: str) -> str:
        """message/send of one text to one member; returns the msgid (what recall takes)."""
        body = await self.call("message/send", {"touser": user, "msgtype": "text", "agentid": agent_id,
                                                "text": {"content": text}, "safe": 0})
        invalid = str(body.get("invaliduser") or "")
        if invalid and user.lower() in invalid.lower().split("|"):
            raise PermanentError(f"member {user!r} cannot receive messages from this application (not in its "
                                 "visible range, or no such member)", method="message/send")
        msgid = body.get("msgid")
        if not isinstance(msgid, str) or not msgid:
            raise RetryableError("the answer names no msgid", method="message/send", maybe_done=True)
        return msgid

    async def recall(self, msgid: str) -> None:
        await self.call("message/recall", {"msgid": msgid})

    async def call(self, method: str, payload: dict) -> dict:
        """POST ``/cgi-bin/<method>`` with the token; a token refused as invalid or expired is fetched again and
        the call repeated once."""
        for attempt in (1, 2):
            token = await self.access_token()
            try:
                return await self._request("POST", f"/cgi-bin/{method}?access_token={token}", method,
                                           json=payload)
            except _TokenRefused:
                self.forget_token(token)
                if attempt == 2:
                    raise PermanentError("the access token was refused twice in a row", method=method) from None
        raise AssertionError("unreachable")

    async def media(self, media_id: str, cap: int) -> bytes:
        """media/get: the bytes of an inbound file, read in pieces and given up past ``cap`` (MediaTooLarge)."""
        for attempt in (1, 2):
            token = await self.access_token()
            url = f"{self.base_url}/cgi-bin/media/get?{urlencode({'access_token': token, 'media_id': media_id})}"
            try:
                return await self._download(url, cap)
            except _TokenRefused:
                self.forget_token(token)
                if attempt == 2:
                    raise PermanentError("the access token was refused twice in a row", method="media/get") from None
        raise AssertionError("unreachable")

    async def _download(self, url: str, cap: int) -> bytes:
        timeout = aiohttp.ClientTimeout(total=max(self.request_timeout, 60.0))
        try:
            async with self.session().get(url, timeout=timeout) as resp:
                if resp.status != 200:
                    raise classify("media/get", resp.status, None, self.rate_limit_wait_s)
                if (resp.content_type or "").startswith(("application/json", "text/")):
                    # An error comes as JSON (a file never does: WeCom serves it with its own type).
                    text = await resp.content.read(64 * 1024)
                    raise classify("media/get", 200, _json(text), self.rate_limit_wait_s)
                return await capped_body(resp, cap, MediaTooLarge)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise RetryableError(f"network error: {type(exc).__name__}: {self.redact(str(exc))}",
                                 method="media/get") from None

    async def _request(self, http_method: str, path: str, op: str, **kwargs) -> dict:
        status, _headers, body = await self.request_json(http_method, self.base_url + path, op=op,
                                                         redact=self.redact, **kwargs)
        if status == 200 and isinstance(body, dict) and body.get("errcode", 0) == 0:
            return body
        raise classify(op, status, body, self.rate_limit_wait_s)


class _TokenRefused(RetryableError):
    """40014 / 42001 / 41001: the call was refused for its token alone (fetch another and repeat it)."""


def classify(method: str, status: int, body: Any, rate_limit_wait_s: float = 10.0) -> PlatformError:
    """Map a failed answer to the exception class that tells the caller what to do."""
    if status != 200 or not isinstance(body, dict):
        if status >= 500 or status == 200:
            return RetryableError(f"HTTP {status}, no errcode", method=method, status=status)
        return PermanentError(f"HTTP {status}", method=method, status=status)
    code = body.get("errcode")
    errmsg = str(body.get("errmsg") or "")[:120]
    description = f"errcode {code}: {errmsg}"
    if code in TOKEN_ERRORS:
        return _TokenRefused(description, method=method)
    if code in RATE_LIMITS:
        return FloodError(rate_limit_wait_s, description, method=method, status=None)
    if code in TRANSIENT:
        return RetryableError(description, method=method, maybe_done=True)
    if code == 45002:
        return TooLongError(description, method=method)
    return PermanentError(description, method=method)


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (TypeError, ValueError, RecursionError):
        return None
