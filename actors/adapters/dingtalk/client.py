"""Async client for the DingTalk open platform (aiohttp): the few calls the adapter makes. Nothing here stores
anything but the access token it made.

    POST /v1.0/oauth2/accessToken {appKey, appSecret}                    -> {accessToken, expireIn}
    POST /v1.0/gateway/connections/open {clientId, clientSecret, subscriptions, ua}  -> {endpoint, ticket}
    POST /v1.0/robot/oToMessages/batchSend {robotCode, userIds, msgKey, msgParam}
                                                                          -> {processQueryKey, invalidStaffIdList,
                                                                              flowControlledStaffIdList}
    POST /v1.0/robot/groupMessages/send {robotCode, openConversationId, msgKey, msgParam}  -> {processQueryKey}
    POST <sessionWebhook> {msgtype: "text", text: {content}}             -> {errcode: 0, errmsg: "ok"}
    POST /v1.0/robot/messageFiles/download {downloadCode, robotCode}     -> {downloadUrl}, then GET it: the bytes
                                                                            of a user's picture or file
    POST /v1.0/card/instances/createAndDeliver {cardTemplateId, outTrackId, cardData, openSpaceId, …}
                                                                          -> {success, result: {deliverResults}}
    PUT /v1.0/card/streaming {outTrackId, guid, key, content, isFull, isFinalize, isError}  -> {success}

The OpenAPI calls carry the access token in ``x-acs-dingtalk-access-token``; a token lives ``expireIn`` seconds
(7,200) and is made once and again 5 minutes before it expires (or at once when an answer calls it invalid: HTTP
401), never per request. A failure of the OpenAPI is an HTTP status with ``{"code", "message", "requestid"}``; a
session webhook answers HTTP 200 with ``{"errcode", "errmsg"}``.

Failures, as actors.adapters.errors:

    HTTP 429, a 403 whose code names a QPS limit, a user
    in flowControlledStaffIdList, errcode 130101                FloodError(``rate_limit_wait_s``: no time is named)
    5xx, network errors, timeouts                               RetryableError (``maybe_done`` once a send may have
                                                                left)
    a session webhook's other errcode (expired, unknown)        WebhookRefused: nothing was sent, the API is used
    a create naming an outTrackId that exists                   none: the card an earlier attempt made (cards.py)
    a card made but not delivered (deliverResults)              PermanentError
    anything else (no permission, unknown user or group)        PermanentError, with the platform's code and words
"""
from __future__ import annotations

import json
import time
from typing import Any

from actors.adapters.app_tokens import AppToken
from actors.adapters.dingtalk.cards import already_made, delivery_refusal
from actors.adapters.errors import FloodError, PermanentError, PlatformError, RetryableError
from actors.adapters.http_session import HttpSession
from common.redact import redact as redact_secrets

WEBHOOK_FLOOD = 130101       # "send too fast, exceed 20 times per minute"
SEND_OPS = ("batch_send", "group_send", "session_send", "card_create")
BOT_MESSAGES_TOPIC = "/v1.0/im/bot/messages/get"
USER_AGENT = "agent-gateway-dingtalk/1"


class FileTooLarge(Exception):
    def __init__(self, size: int):
        super().__init__(f"{size} bytes")
        self.size = size


class WebhookRefused(Exception):
    """A session webhook answered that it takes nothing (expired, unknown): nothing was sent."""


class DingTalkAPI(HttpSession):
    def __init__(self, base_url: str, client_id: str, client_secret: str, robot_code: str = "",
                 request_timeout: float = 30.0, rate_limit_wait_s: float = 2.0, clock=time.monotonic):
        super().__init__(request_timeout=request_timeout)
        self.base_url = base_url.rstrip("/")
        self.client_id, self._secret = client_id, client_secret
        self.robot_code = robot_code or client_id
        self.rate_limit_wait_s = rate_limit_wait_s
        self._token = AppToken(self._make_token, clock)

    def __repr__(self) -> str:   # never the secret or the token
        return f"DingTalkAPI(base_url={self.base_url!r}, client_id={self.client_id!r})"

    def redact(self, text: str) -> str:
        return redact_secrets(text, [self._secret] + ([self._token.value] if self._token.value else []))

    @property
    def tokens_made(self) -> int:
        return self._token.made

    async def token(self) -> str:
        """The access token, made again only near its expiry (app_tokens.py)."""
        return await self._token.get()

    async def _make_token(self) -> tuple[str, float]:
        status, _, body = await self.request_json(
            "POST", self.base_url + "/v1.0/oauth2/accessToken", op="token", redact=self.redact,
            json={"appKey": self.client_id, "appSecret": self._secret})
        if status != 200 or not isinstance(body, dict):
            raise classify("token", status, body, self.rate_limit_wait_s)
        token, expire = body.get("accessToken"), body.get("expireIn")
        if not isinstance(token, str) or not token or not isinstance(expire, int):
            raise RetryableError("the token answer names no token", method="token")
        return token, expire

    async def open_connection(self) -> tuple[str, str]:
        """A Stream-mode ticket for the robot's messages: (endpoint, ticket). A ticket opens one connection."""
        status, _, body = await self.request_json(
            "POST", self.base_url + "/v1.0/gateway/connections/open", op="open_connection", redact=self.redact,
            json={"clientId": self.client_id, "clientSecret": self._secret, "ua": USER_AGENT, "localIp": "",
                  "subscriptions": [{"type": "CALLBACK", "topic": BOT_MESSAGES_TOPIC}]})
        if status != 200 or not isinstance(body, dict):
            raise classify("open_connection", status, body, self.rate_limit_wait_s)
        endpoint, ticket = body.get("endpoint"), body.get("ticket")
        if not isinstance(endpoint, str) or not endpoint.startswith(("ws://", "wss://")) or not isinstance(
                ticket, str) or not ticket:
            raise RetryableError("the connection answer names no endpoint or ticket", method="open_connection")
        return endpoint, ticket

    async def call(self, path: str, op: str, body: dict, http_method: str = "POST") -> dict:
        """One OpenAPI request; its answer (any other status raises, classified)."""
        status, answer = await self.exchange(path, op, body, http_method)
        if status == 200 and isinstance(answer, dict):
            return answer
        raise classify(op, status, answer, self.rate_limit_wait_s)

    async def exchange(self, path: str, op: str, body: dict, http_method: str = "POST") -> tuple[int, Any]:
        """One OpenAPI request: its status and JSON answer. An answer calling the token invalid makes a new one,
        and the request goes once more (it was refused before it took effect)."""
        for attempt in range(2):
            headers = {"x-acs-dingtalk-access-token": await self.token()}
            status, _, answer = await self.request_json(http_method, self.base_url + path, op=op,
                                                        redact=self.redact, headers=headers, json=body)
            if attempt == 0 and status == 401:
                self._token.forget()
                continue
            return status, answer
        raise AssertionError("unreachable")

    async def create_card(self, body: dict) -> None:
        """``createAndDeliver`` one AI card (cards.create_body). A card that exists already under its outTrackId
        is the one an earlier attempt made: taken as made (cards.already_made)."""
        status, answer = await self.exchange("/v1.0/card/instances/createAndDeliver", "card_create", body)
        if already_made(status, answer):
            return
        if status != 200 or not isinstance(answer, dict):
            raise classify("card_create", status, answer, self.rate_limit_wait_s)
        refused = delivery_refusal(answer)
        if refused is not None:
            raise PermanentError(f"the card was made but not delivered: {refused}", method="card_create")

    async def stream_card(self, body: dict) -> None:
        """One streaming update of a card's content (cards.stream_body)."""
        await self.call("/v1.0/card/streaming", "card_stream", body, http_method="PUT")

    async def send_to_user(self, user_id: str, text: str) -> str:
        answer = await self.call("/v1.0/robot/oToMessages/batchSend", "batch_send", {
            "robotCode": self.robot_code, "userIds": [user_id], "msgKey": "sampleText",
            "msgParam": json.dumps({"content": text}, ensure_ascii=False)})
        if user_id in (answer.get("flowControlledStaffIdList") or ()):
            raise FloodError(self.rate_limit_wait_s, "the user is flow-controlled", method="batch_send")
        if user_id in (answer.get("invalidStaffIdList") or ()):
            raise PermanentError(f"no such user in the organisation: {user_id[:40]}", method="batch_send")
        return _query_key(answer, "batch_send")

    async def send_to_group(self, conversation_id: str, text: str) -> str:
        answer = await self.call("/v1.0/robot/groupMessages/send", "group_send", {
            "robotCode": self.robot_code, "openConversationId": conversation_id, "msgKey": "sampleText",
            "msgParam": json.dumps({"content": text}, ensure_ascii=False)})
        return _query_key(answer, "group_send")

    async def send_by_session(self, webhook: str, text: str) -> None:
        """A text through a message's session webhook (no token: the URL is the credential)."""
        status, _, answer = await self.request_json(
            "POST", webhook, op="session_send", redact=lambda t: self.redact(t).replace(webhook, "<sessionWebhook>"),
            json={"msgtype": "text", "text": {"content": text}})
        if status == 200 and isinstance(answer, dict) and answer.get("errcode") == 0:
            return
        if status == 200 and isinstance(answer, dict) and answer.get("errcode") == WEBHOOK_FLOOD:
            raise FloodError(self.rate_limit_wait_s, "send too fast (errcode 130101)", method="session_send")
        if status == 200 and isinstance(answer, dict) and isinstance(answer.get("errcode"), int):
            raise WebhookRefused(f"{str(answer.get('errmsg'))[:120]} (errcode {answer['errcode']})")
        raise classify("session_send", status, answer, self.rate_limit_wait_s)

    async def download_file(self, download_code: str, cap: int) -> bytes:
        """A user's picture or file by its ``downloadCode``: a short-lived URL from the API, then its bytes, read
        within ``cap`` (FileTooLarge past it)."""
        answer = await self.call("/v1.0/robot/messageFiles/download", "download",
                                 {"downloadCode": download_code, "robotCode": self.robot_code})
        url = answer.get("downloadUrl")
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise RetryableError("the answer names no downloadUrl", method="download")
        return await self.download(url, cap, FileTooLarge, op="download", redact=self.redact,
                                   refused=lambda status, body, headers: classify("download", status, body,
                                                                                  self.rate_limit_wait_s))


def _query_key(answer: dict, op: str) -> str:
    value = answer.get("processQueryKey")
    if not isinstance(value, str) or not value:
        raise RetryableError("the answer names no processQueryKey", method=op, maybe_done=True)
    return value


def classify(op: str, status: int, body: Any, rate_limit_wait_s: float = 2.0) -> PlatformError:
    """Map a failed answer to the exception class that tells the caller what to do (the module docstring)."""
    code = str(body.get("code") or "") if isinstance(body, dict) else ""
    words = str(body.get("message") or "")[:200] if isinstance(body, dict) else ""
    description = (words or f"HTTP {status}") + (f" (code {code[:80]})" if code else "") + f" [HTTP {status}]"
    if status == 429 or "QpsLimit" in code or "Throttling" in code:
        return FloodError(rate_limit_wait_s, description, method=op)
    if status >= 500:
        return RetryableError(description, method=op, status=status, maybe_done=op in SEND_OPS)
    return PermanentError(description, method=op, status=status)
