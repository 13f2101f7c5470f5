"""The QQ OpenAPI client (aiohttp): the app access token, the gateway's address and the send endpoints, every
failure raised as one of actors.adapters.errors. It only fetches: no storage, no actor.

The access token. ``POST`` to the token endpoint (the table's ``auth_url``) with ``{"appId", "clientSecret"}``
answers ``{"access_token", "expires_in"}`` (seconds, a string on QQ's side; at most 7,200). It is cached and
fetched again shortly before it expires (``REFRESH_MARGIN_S``), never per request; concurrent requests that find it stale wait for one fetch. Every OpenAPI
call carries ``Authorization: QQBot <token>`` and ``X-Union-Appid``. A call answered 401 (code 11244: the token is
gone, QQ revoked it early) drops the cached token and is made once more with a fresh one.

Answers:

    2xx                                   the JSON body
    429, or code 22009 (msg limit exceed) FloodError: QQ names no wait, so ``FLOOD_WAIT_S`` unless Retry-After does
    code 40054005 (消息被去重)             DuplicateReply: a message with this msg_id and msg_seq exists already
    code 40034128 (被动回复时间或次数超限)   PassiveRefused: the user message takes no more passive replies
    code 40034100 (主动消息超过频控)         ActiveQuotaExhausted: QQ's ration of active messages is used up
    code 50056 (不允许发送 markdown content),
    304036 (没有 markdown 模板的权限)        MarkdownRefused: the bot may not send markdown here (plain text goes)
    5xx, network errors, timeouts         RetryableError (``maybe_done`` unless the connection was never made)
    any other 4xx                         PermanentError, with QQ's code and message

The secret and the token travel in the body and headers only, never in a URL, and are redacted from every text.

Files (``upload``, ``send`` with an image, ``fetch_file``). C2C users and groups take a file in two steps (QQ's
docs, api-v2 "富媒体消息", bot.q.qq.com/wiki/develop/api-v2/server-inter/message/send-receive/rich-media.html):
``POST /v2/users/{openid}/files`` or ``/v2/groups/{group_openid}/files`` with ``file_type`` (1 image, 2 video,
3 voice, 4 file), the bytes as ``file_data`` (base64; ``url`` instead would need a public address QQ fetches
from) and ``srv_send_msg: false`` (upload only: ``true`` would send it at once as an active message) answers
``{"file_uuid", "file_info", "ttl"}``; the message is then a send with ``msg_type`` 7 and ``media: {"file_info"}``
(api-v2 "发送消息"; its ``content`` must not be empty: a space stands in). Guild channels and DMs take an image in
the send itself, as ``multipart/form-data`` with the part ``file_image`` (api-v2 "发送消息" of 文字子频道, the
form-data parameters; object fields as JSON strings). A user's file is fetched from the URL its event names,
without our token (the URL is QQ's media server's, signed in itself; the token goes to the OpenAPI only).
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Callable, Optional

import aiohttp

from actors.adapters.errors import FloodError, PermanentError, PlatformError, RetryableError
from actors.adapters.http_session import HttpSession, retry_after_header
from common.redact import redact as redact_secrets

TOKEN_EXPIRED = 11244
MSG_LIMIT_EXCEED = 22009
DUPLICATE_MSG_SEQ = 40054005
PASSIVE_REPLY_LIMIT = 40034128   # 被动回复时间或次数超限: the message's window or its reply count is spent
ACTIVE_MSG_LIMIT = 40034100      # 主动消息发送超过频控限制: the active messages' ration (per month and chat) is spent
ACTIVE_MSG_FORBIDDEN = 40034105  # 主动消息无权限: the bot may not send active messages here
MARKDOWN_REFUSED = (50056, 304036)   # 不允许发送 markdown content; 没有 markdown 模板的权限
FLOOD_WAIT_S = 1.0
REFRESH_MARGIN_S = 60.0       # QQ hands a new token in the last 60 s of the old one's life; the old still works


class DuplicateReply(PermanentError):
    """QQ already holds a message with this msg_id and msg_seq: this send was made before (its answer lost)."""


class PassiveRefused(PermanentError):
    """QQ takes no more passive replies to this user message (its reply count or its window is spent)."""


class ActiveQuotaExhausted(PermanentError):
    """QQ refused an active message: its ration for the chat (a few a month) is used up."""


class MarkdownRefused(PermanentError):
    """QQ does not let this bot send markdown (native markdown is granted per bot, passive markdown apart)."""


class FileTooLarge(PermanentError):
    def __init__(self, size: int):
        super().__init__(f"the file is over the cap ({size} bytes read)", method="download")
        self.size = size


class AppToken:
    """The cached app access token. ``clock`` is monotonic seconds (the tests' own)."""

    def __init__(self, fetch: Callable[[], Any], clock: Callable[[], float] = time.monotonic):
        self._fetch, self._clock = fetch, clock
        self.value: Optional[str] = None
        self._refresh_at = 0.0
        self.fetches = 0                   # tokens fetched by this life (what `status` and the tests can count)
        self._lock: Optional[asyncio.Lock] = None

    async def get(self) -> str:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.value is None or self._clock() >= self._refresh_at:
                self.value, lifetime = await self._fetch()
                self.fetches += 1
                # Refreshed a little before it expires: a minute early, or half its life for a short-lived one.
                self._refresh_at = self._clock() + lifetime - min(REFRESH_MARGIN_S, lifetime / 2)
            return self.value

    def drop(self, value: Optional[str]) -> None:
        """QQ refused ``value``: the next ``get`` fetches a new one (unless another call did already)."""
        if value is not None and value == self.value:
            self.value = None


def token_answer(status: int, body: Any) -> tuple[str, float]:
    """The token endpoint's answer as (token, lifetime in seconds), or the error it is (pure)."""
    body = body if isinstance(body, dict) else {}
    token, lifetime = body.get("access_token"), body.get("expires_in")
    try:
        lifetime = float(lifetime)
    except (TypeError, ValueError):
        lifetime = 0.0
    if 200 <= status < 300 and isinstance(token, str) and token and lifetime > 0:
        return token, lifetime
    error = describe(status, body)
    if status >= 500 or status == 429:
        raise RetryableError(error, method="getAppAccessToken", status=status)
    raise PermanentError(f"{error} (check app_id and app_secret)", method="getAppAccessToken", status=status)


def describe(status: int, body: dict) -> str:
    code = body.get("code") if isinstance(body.get("code"), int) else body.get("err_code")
    message = str(body.get("message") or f"HTTP {status}")[:200]
    return message + (f" (code {code})" if code is not None else "")


def classify_error(route: str, status: int, body: Any, headers) -> PlatformError:
    """An OpenAPI error answer as the exception that tells the caller what to do (pure)."""
    body = body if isinstance(body, dict) else {}
    code = body.get("code") if isinstance(body.get("code"), int) else body.get("err_code")
    text = redact_secrets(describe(status, body))
    if status == 429 or code == MSG_LIMIT_EXCEED:
        wait = retry_after_header(headers) or FLOOD_WAIT_S
        return FloodError(wait, f"rate limited: {text}", method=route, status=status)
    if code == DUPLICATE_MSG_SEQ:
        return DuplicateReply(text, method=route, status=status)
    if code == PASSIVE_REPLY_LIMIT:
        return PassiveRefused(text, method=route, status=status)
    if code == ACTIVE_MSG_LIMIT:
        return ActiveQuotaExhausted(f"QQ's active-message quota is used up: {text}; nothing goes without a user "
                                    "message to answer until it renews", method=route, status=status)
    if code == ACTIVE_MSG_FORBIDDEN:
        return PermanentError(f"QQ allows this bot no active messages here: {text}; only answers to a user's "
                              "message go", method=route, status=status)
    if code in MARKDOWN_REFUSED:
        return MarkdownRefused(f"QQ refused markdown: {text}", method=route, status=status)
    if status >= 500:
        return RetryableError(text, method=route, status=status)
    return PermanentError(text, method=route, status=status)


class QQClient(HttpSession):
    """``QQClient(app_id, secret, api_base_url, token_url)`` (``token_url``: the table's ``auth_url``); owns its aiohttp session and the app's token."""

    def __init__(self, app_id: str, secret: str, api_base_url: str, token_url: str, request_timeout: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(request_timeout=request_timeout)
        self.app_id, self._secret = app_id, secret
        self.base_url, self.token_url = api_base_url.rstrip("/"), token_url
        self.token = AppToken(self._fetch_token, clock)

    def __repr__(self) -> str:   # never the secret
        return f"QQClient(app_id={self.app_id!r}, base_url={self.base_url!r})"

    def redact(self, text: str) -> str:
        return redact_secrets(text, [self._secret] + ([self.token.value] if self.token.value else []))

    async def _fetch_token(self) -> tuple[str, float]:
        status, _headers, body = await self.request_json(
            "POST", self.token_url, op="getAppAccessToken", json={"appId": self.app_id, "clientSecret": self._secret},
            redact=self.redact)
        return token_answer(status, body)

    async def bearer(self) -> str:
        """The gateway's Identify and Resume carry the token as ``QQBot <token>``."""
        return f"QQBot {await self.token.get()}"

    # -- calls
    async def gateway_url(self) -> str:
        answer = await self.call("GET", "/gateway", "get_gateway")
        url = answer.get("url") if isinstance(answer, dict) else None
        if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
            raise RetryableError("GET /gateway named no WebSocket URL", method="get_gateway")
        return url

    async def me(self) -> dict:
        """``GET /users/@me``: the bot as a guild user (its ``id`` is what guild messages mention)."""
        answer = await self.call("GET", "/users/@me", "get_me")
        if not isinstance(answer, dict) or not isinstance(answer.get("id"), str):
            raise RetryableError("GET /users/@me named no bot", method="get_me")
        return answer

    async def send(self, route: str, path: str, body: dict, image: Optional[tuple] = None) -> dict:
        """A message; with ``image`` (bytes, file name, MIME type) as ``multipart/form-data`` with ``file_image``
        (guild channels and DMs)."""
        form = (lambda: image_form(body, *image)) if image is not None else None
        answer = await self.call("POST", path, route, None if image is not None else body, form=form)
        if not isinstance(answer, dict) or not isinstance(answer.get("id"), str):
            raise RetryableError("the send's answer names no message id", method=route, maybe_done=True)
        return answer

    async def upload(self, route: str, path: str, body: dict) -> str:
        """A rich-media upload (``srv_send_msg`` false: nothing is sent) -> the ``file_info`` a send names."""
        answer = await self.call("POST", path, route, body)
        info = answer.get("file_info") if isinstance(answer, dict) else None
        if not isinstance(info, str) or not info:
            raise RetryableError("the upload's answer names no file_info", method=route)
        return info

    async def fetch_file(self, url: str, cap: int) -> bytes:
        """A user's file from the URL its message names, read within ``cap`` (FileTooLarge past it); no token
        goes with it. 403, 404 and 410 are PermanentError (gone: QQ's media URLs expire); 429 and 5xx retried."""
        def refused(status: int, _body: Any, _headers) -> Exception:
            if status == 429 or status >= 500:
                return RetryableError(f"HTTP {status}", method="download", status=status)
            return PermanentError(f"HTTP {status}", method="download", status=status)
        return await self.download(url, cap, FileTooLarge, op="download", refused=refused, redact=self.redact)

    # -- transport
    async def call(self, method: str, path: str, route: str, body: Optional[dict] = None,
                   form: Optional[Callable[[], aiohttp.FormData]] = None) -> Any:
        """One OpenAPI call; ``form`` makes a multipart body (made anew for each attempt: a form is read once)."""
        for attempt in range(2):
            token = await self.token.get()
            headers = {"Authorization": f"QQBot {token}", "X-Union-Appid": self.app_id}
            sent = {"data": form()} if form is not None else {"json": body}
            status, answer_headers, payload = await self.request_json(method, self.base_url + path, op=route,
                                                                      headers=headers, redact=self.redact, **sent)
            if 200 <= status < 300:
                return payload
            code = payload.get("code") if isinstance(payload, dict) else None
            if (status == 401 or code == TOKEN_EXPIRED) and attempt == 0:
                self.token.drop(token)      # revoked before its time: once more with a fresh one
                continue
            raise classify_error(route, status, payload, answer_headers)
        raise AssertionError("unreachable")


def image_form(body: dict, data: bytes, name: str, mime: str) -> aiohttp.FormData:
    """A send's fields and an image as ``multipart/form-data``: objects as JSON strings, as QQ's docs ask (pure)."""
    form = aiohttp.FormData()
    for key, value in body.items():
        form.add_field(key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    form.add_field("file_image", data, filename=name or "image", content_type=mime)
    return form
