"""FakeDingTalk: the open platform a robot app calls (access token, Stream mode, robot sends), the session webhooks
of its messages, a control API and in-process inspection."""
from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
import time
import uuid
from typing import Optional

import aiohttp
from aiohttp import web

from tests.fakes.dingtalk.cards import CARD_METHODS, QPS_LIMIT, CardMethods
from tests.fakes.dingtalk.stream import StreamMethods
from tests.fakes.harness import FakeServer, FaultScript, FloodGate, control_route, drop_connection, json_object

DEFAULT_CLIENT_ID = "dingfake0000000001"
DEFAULT_CLIENT_SECRET = "fake-client-secret-0123456789abcdef"
DEFAULT_CORP_ID = "dingcorpfake000001"
DEFAULT_LIMITS = {"token_ttl": 7200, "content_limit": 5000, "ack_timeout": 5.0, "ping_interval": 10.0,
                  "session_ttl": 5400.0, "card_qps": 20}
SEND_METHODS = ("session", "batch_send", "group_send")
WEBHOOK_FLOOD = {"errcode": 130101, "errmsg": "send too fast, exceed 20 times per minute"}
# The fake's own numbers where the documentation names none: a session webhook past its expiry or unknown.
SESSION_EXPIRED = {"errcode": 300001, "errmsg": "session webhook is expired or unknown"}
BAD_TOKEN = {"code": "InvalidAuthentication", "message": "access token is invalid or expired"}


def fake_id(prefix: str, name: str, length: int = 24) -> str:
    return prefix + hashlib.md5(name.encode()).hexdigest()[:length]


def api_error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"code": code, "message": message, "requestid": uuid.uuid4().hex}, status=status)


class FakeDingTalk(CardMethods, StreamMethods, FakeServer):
    """``limits`` (DEFAULT_LIMITS keys) as keyword arguments; faults through ``set_faults`` (kinds flood: the
    method's rate-limit answer, error: 500, drop, drop_after) for the three send methods and the two card methods
    (cards.py)."""

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None, client_id: str = DEFAULT_CLIENT_ID,
                 client_secret: str = DEFAULT_CLIENT_SECRET, **limits):
        self.client_id, self.client_secret = client_id, client_secret
        super().__init__(port=port, state_file=state_file)
        self.limits = dict(DEFAULT_LIMITS)
        self.configure(**limits)
        self.faults = FaultScript(SEND_METHODS + CARD_METHODS)
        self.gates = FloodGate()
        self.sockets: dict = {}
        self.endpoint_port = 0      # the port the stream endpoint names (a relay's, in the frozen case)
        self.webhook_port = 0       # the port session webhooks name (likewise)
        self._delivery: Optional[asyncio.Task] = None

    def initial_state(self) -> dict:
        stats = dict.fromkeys((
            "tokens_issued", "token_refusals", "tickets_issued", "connections_refused", "callbacks_sent",
            "callbacks_acked", "duplicate_answers", "unknown_answers", "bad_answers", "pings_answered", "sends",
            "session_refusals", "retry_after_violations", "flood_served", "files_served", "cards_made",
            "card_creates_refused", "card_updates", "card_updates_repeated", "card_guids_reused",
            "card_qps_violations"), 0)
        return {"tokens": {}, "tickets": {}, "connections": [], "callbacks": [], "sessions": {}, "chats": {}, "http_callbacks": [], "files": {}, "cards": {},
                "card_calls": [], "ops": [], "next_connection": 0, "next_callback": 0, "next_message": 0, "stats": stats}

    def configure(self, **limits) -> None:
        unknown = set(limits) - set(DEFAULT_LIMITS)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}")
        with self._lock:
            self.limits.update(limits)

    def set_faults(self, **settings) -> None:
        with self._lock:
            self.faults.configure(**settings)

    async def on_started(self) -> None:
        self._delivery = asyncio.get_running_loop().create_task(self.deliver_forever())

    async def on_stopping(self) -> None:
        if self._delivery is not None:
            self._delivery.cancel()
        for conn in list(self.sockets.values()):
            await conn.ws.close(code=1001)

    def run(self, coro):
        """Run a coroutine of the fake's loop from a test thread; its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    # -- identities
    @staticmethod
    def staff(name: str) -> str:
        """The staff id (userId) of the user the test calls ``name``."""
        return fake_id("staff", name, 12)

    @staticmethod
    def conversation(name: str, group: bool = False) -> str:
        return "cid" + fake_id("", ("group:" if group else "p2p:") + name, 22) + "=="

    # -- injected input
    def message_data(self, user: str, text, *, group: str = "", msgtype: str = "text", session_ttl=None,
                     bot_name: str = "Gateway", session_dead: bool = False) -> dict:
        """One robot message from the user ``user`` (a test's name), one-to-one or in the group ``group``.
        ``session_dead``: its session webhook is refused from the start, whatever its expiry says."""
        staff = self.staff(user)
        cid = self.conversation(group or user, bool(group))
        now = time.time()
        ttl = self.limits["session_ttl"] if session_ttl is None else session_ttl
        session = secrets.token_hex(12)
        with self.mutate() as state:
            state["next_message"] += 1
            msg_id = f"msg{state['next_message']:08d}{secrets.token_hex(4)}"
            state["sessions"][session] = {"chat": cid if group else staff,
                                          "expires_at": 0 if session_dead else now + ttl}
        data = {"conversationId": cid, "chatbotCorpId": DEFAULT_CORP_ID, "chatbotUserId": "$:LWCP_v1:$botfake",
                "msgId": msg_id, "senderNick": user, "isAdmin": False, "senderStaffId": staff,
                "sessionWebhookExpiredTime": int((now + ttl) * 1000), "createAt": int(now * 1000),
                "senderCorpId": DEFAULT_CORP_ID, "conversationType": "2" if group else "1",
                "senderId": "$:LWCP_v1:$" + fake_id("", user, 16), "robotCode": self.client_id,
                "sessionWebhook": f"http://127.0.0.1:{self.webhook_port or self.port}/robot/sendBySession?"
                                  f"session={session}",
                "msgtype": msgtype, "isInAtList": True}
        if msgtype == "text":
            data["text"] = {"content": f"@{bot_name} {text}" if group else text}
        else:
            data["content"] = text
        if group:
            data["conversationTitle"] = group
            data["atUsers"] = [{"dingtalkId": "$:LWCP_v1:$botfake"}]
        return data

    def inject_picture(self, user: str, data: bytes) -> str:
        """A picture message whose bytes the download API serves under its downloadCode."""
        code = "dc" + secrets.token_hex(24)
        with self.mutate() as state:
            state["files"][code] = base64.b64encode(data).decode()
        return self.queue(self.message_data(user, {"downloadCode": code, "pictureDownloadCode": code},
                                            msgtype="picture"))

    def queue(self, data) -> str:
        """A callback carrying ``data`` (a message, or any string), delivered as soon as a connection is open;
        returns its handle."""
        with self.mutate() as state:
            state["next_callback"] += 1
            handle = f"cb{state['next_callback']}"
            state["callbacks"].append({"id": handle, "data": data, "status": "pending", "attempts": [], "due": 0.0,
                                       "queued_at": time.time()})
        return handle

    def inject_text(self, user: str, text: str, **kwargs) -> str:
        return self.queue(self.message_data(user, text, **kwargs))

    def redeliver(self, handle: str) -> str:
        """The same message (the same msgId) in a new callback, as the platform redelivers one."""
        return self.queue(self.callback(handle)["data"])

    def post_callback(self, url: str, data, *, timestamp=None, sign=None, secret=None) -> int:
        """HTTP mode: POST one robot message to the robot's message URL as the platform does, signed with the app
        secret (``timestamp``, ``sign`` or ``secret`` given: forged); the answer's status."""
        stamp = str(int(time.time() * 1000)) if timestamp is None else str(timestamp)
        digest = hmac.new((secret or self.client_secret).encode(),
                          f"{stamp}\n{secret or self.client_secret}".encode(), hashlib.sha256).digest()
        headers = {"Content-Type": "application/json", "timestamp": stamp,
                   "sign": base64.b64encode(digest).decode() if sign is None else sign}

        async def post() -> int:
            async with aiohttp.ClientSession() as session:
                async with session.post(url, data=json.dumps(data, ensure_ascii=False).encode(),
                                        headers=headers) as resp:
                    return resp.status
        status = self.run(post())
        with self.mutate() as state:
            state["http_callbacks"].append({"msgId": data.get("msgId") if isinstance(data, dict) else None,
                                            "status": status, "at": time.time()})
        return status

    def expire_tokens(self) -> None:
        with self.mutate() as state:
            for token in state["tokens"]:
                state["tokens"][token] = 0

    def expire_sessions(self) -> None:
        """Every session webhook ends now, whatever its message said."""
        with self.mutate() as state:
            for session in state["sessions"].values():
                session["expires_at"] = 0

    # -- inspection
    def callback(self, handle: str) -> dict:
        return self.read(lambda s: next(cb for cb in s["callbacks"] if cb["id"] == handle))

    def messages(self, chat: str) -> list[dict]:
        """What the chat (a staff id, or a group's conversation id) shows from the bot: {"id", "text", "via",
        "at", "deleted"}."""
        return self.read(lambda s: s["chats"].get(chat, []))

    def ops(self, chat: str, method: str) -> list[dict]:
        return self.read(lambda s: [o for o in s["ops"] if o["chat"] == chat and o["method"] == method])

    def stats(self) -> dict:
        return self.read(lambda s: s["stats"])

    def connections(self) -> list[dict]:
        return self.read(lambda s: s["connections"])

    # -- routes
    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1.0/oauth2/accessToken", self.access_token)
        app.router.add_post("/v1.0/gateway/connections/open", self.open_connection)
        app.router.add_get("/connect", self.handle_connect)
        app.router.add_post("/v1.0/robot/oToMessages/batchSend", self.sender("batch_send"))
        app.router.add_post("/v1.0/robot/groupMessages/send", self.sender("group_send"))
        app.router.add_post("/robot/sendBySession", self.sender("session"))
        app.router.add_post("/v1.0/robot/messageFiles/download", self.download_url)
        app.router.add_get("/_files/{code}", self.file_bytes)
        self.add_card_routes(app)
        control_route(app, "GET", "/_control/stats", lambda body: self.stats())
        control_route(app, "POST", "/_control/inject", lambda body: {"callback": self.inject_text(
            str(body["user"]), str(body["text"]))})
        control_route(app, "GET", "/_control/messages/{chat}", lambda body, chat: {"messages": self.messages(chat)})

    async def access_token(self, request: web.Request) -> web.Response:
        params = await json_object(request)
        if params.get("appKey") != self.client_id or params.get("appSecret") != self.client_secret:
            return api_error(400, "invalidClientSecret", "appKey or appSecret is wrong")
        token = secrets.token_hex(16)
        with self.mutate() as state:
            state["tokens"][token] = time.time() + self.limits["token_ttl"]
            state["stats"]["tokens_issued"] += 1
        return web.json_response({"accessToken": token, "expireIn": int(self.limits["token_ttl"])})

    def authorised(self, request: web.Request) -> bool:
        token = request.headers.get("x-acs-dingtalk-access-token", "")
        with self.mutate() as state:
            if state["tokens"].get(token, 0) > time.time():
                return True
            state["stats"]["token_refusals"] += 1
        return False

    async def download_url(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return web.json_response(BAD_TOKEN, status=401)
        params = await json_object(request)
        code = params.get("downloadCode")
        if params.get("robotCode") != self.client_id or code not in self.read(lambda s: s["files"]):
            return api_error(400, "resource.notFound", "the downloadCode names no file of this robot")
        return web.json_response({"downloadUrl": f"http://127.0.0.1:{self.webhook_port or self.port}/_files/{code}"})

    async def file_bytes(self, request: web.Request) -> web.Response:
        data = self.read(lambda s: s["files"].get(request.match_info["code"]))
        if data is None:
            return web.Response(status=404)
        with self.mutate() as state:
            state["stats"]["files_served"] += 1
        return web.Response(body=base64.b64decode(data), content_type="application/octet-stream")

    def _target(self, method: str, request: web.Request, params: dict) -> tuple[Optional[str], Optional[dict]]:
        """The chat a send goes to, or the refusal (status, body) of one that names none it may reach."""
        if method == "session":
            session = self.read(lambda s: s["sessions"].get(request.query.get("session", "")))
            if session is None or session["expires_at"] <= time.time():
                return None, {"status": 200, "body": SESSION_EXPIRED}
            return session["chat"], None
        if params.get("robotCode") != self.client_id:
            return None, {"status": 400, "body": {"code": "robot.notExist", "message": "robotCode is wrong"}}
        if method == "batch_send":
            users = params.get("userIds")
            if not isinstance(users, list) or len(users) != 1 or not isinstance(users[0], str):
                return None, {"status": 400, "body": {"code": "param.invalid", "message": "userIds (the fake takes "
                                                                                         "one)"}}
            return users[0], None
        chat = params.get("openConversationId")
        if not isinstance(chat, str) or not chat.startswith("cid"):
            return None, {"status": 400, "body": {"code": "param.invalid", "message": "openConversationId"}}
        return chat, None

    @staticmethod
    def _text(method: str, params: dict) -> Optional[str]:
        if method == "session":
            text = params.get("text")
            ok = params.get("msgtype") == "text" and isinstance(text, dict) and isinstance(text.get("content"), str)
            return text["content"] if ok else None
        if params.get("msgKey") != "sampleText":
            return None
        try:
            content = json.loads(params.get("msgParam") or "").get("content")
        except (TypeError, ValueError, AttributeError):
            return None
        return content if isinstance(content, str) else None

    def sender(self, method: str):
        async def handler(request: web.Request) -> web.Response:
            if method != "session" and not self.authorised(request):
                return web.json_response(BAD_TOKEN, status=401)
            params, now = await json_object(request), time.time()
            chat, refusal = self._target(method, request, params)
            if refusal is not None:
                with self.mutate() as state:
                    state["stats"]["session_refusals" if method == "session" else "bad_answers"] += 1
                return web.json_response(refusal["body"], status=refusal["status"])
            text = self._text(method, params)
            with self.mutate() as state:
                fault, answer = self.faulted(state, method, chat, now, request)
                if answer is not None:
                    return answer
                if text is None or not text:
                    self._log_op(state, method, chat, 400)
                    return api_error(400, "param.invalid", "msgParam content (the fake takes sampleText)")
                if len(text) > self.limits["content_limit"]:
                    self._log_op(state, method, chat, 400)
                    return api_error(400, "param.invalid", "content is too long")
                message_id = uuid.uuid4().hex
                state["chats"].setdefault(chat, []).append({"id": message_id, "text": text, "via": method,
                                                            "at": now, "deleted": False})
                state["stats"]["sends"] += 1
                self._log_op(state, method, chat, 200)
            await self.hold_if_asked(method, chat, fault is None)
            if fault == "drop_after":
                return drop_connection(request)
            if method == "session":
                return web.json_response({"errcode": 0, "errmsg": "ok"})
            answer = {"processQueryKey": message_id}
            if method == "batch_send":
                answer.update(invalidStaffIdList=[], flowControlledStaffIdList=[])
            return web.json_response(answer)
        return handler

    def faulted(self, state: dict, method: str, chat: str, now: float, request: web.Request):
        """(the scripted fault drawn for this call, its answer or None: the call goes on). A call into a chat's
        flood ban is refused again and counted as a violation."""
        fault = self.faults.draw(method)
        if fault == "drop":
            self._log_op(state, method, chat, 599)
            return fault, drop_connection(request)
        if fault == "flood" or (fault is None and self.gates.ban_remaining([chat], now) > 0):
            if fault is None:
                state["stats"]["retry_after_violations"] += 1
            else:
                self.gates.ban(chat, now, self.faults.flood_retry_after)
            state["stats"]["flood_served"] += 1
            self._log_op(state, method, chat, 429)
            if method == "session":
                return fault, web.json_response(WEBHOOK_FLOOD)
            return fault, web.json_response(QPS_LIMIT, status=403)
        if fault == "error":
            self._log_op(state, method, chat, 500)
            return fault, api_error(500, "ServiceUnavailable", "internal error")
        return fault, None

    @staticmethod
    def _log_op(state: dict, method: str, chat: str, status: int) -> None:
        state["ops"].append({"method": method, "chat": chat, "at": time.time(), "status": status})
