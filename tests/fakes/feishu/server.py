"""FakeFeishu: the open platform an app calls (tenant token, bot info, messages create / reply / update / recall,
message resources), the event callbacks it receives (callbacks.py), a control API and in-process inspection."""
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import secrets
import time
from typing import Optional

from aiohttp import web

from tests.fakes.feishu.callbacks import CallbackMethods
from tests.fakes.feishu.long_connection import LongConnectionMethods
from tests.fakes.harness import (FakeServer, FaultScript, FloodGate, control_route, drop_connection,
                                 json_object)

DEFAULT_APP_ID = "cli_fake0000000001"
DEFAULT_APP_SECRET = "fake-app-secret-0123456789abcdef"
DEFAULT_ENCRYPT_KEY = "fake-encrypt-key-0123456789"
DEFAULT_VERIFICATION_TOKEN = "fake-verification-token"
DEFAULT_BOT_OPEN_ID = "ou_" + "b0" * 16
DEFAULT_LIMITS = {"token_ttl": 7200, "content_limit": 150 * 1024, "edits_per_message": 20, "sends_per_s": 5,
                  "uuid_ttl": 3600.0, "answer_timeout": 3.0, "retries": 3, "retry_delays": [0.5, 1.0, 2.0],
                  "ack_timeout": 3.0, "ping_interval": 120, "reconnect_interval": 120, "reconnect_nonce": 30}
SEND_METHODS = ("create", "reply")
FREQUENCY_LIMIT = {"code": 99991400, "msg": "request trigger frequency limit"}
BAD_TOKEN = {"code": 99991663, "msg": "Invalid access token for authorization. Please make a request with token "
                                      "attached."}
# Codes of the fake's own refusals: those the platform documents where it names them (230011: the message was
# recalled; 230025: content too long; 99992402: field validation failed); 230072 for the edit cap is the fake's.
RECALLED = {"code": 230011, "msg": "The message was withdrawn."}
TOO_LONG = {"code": 230025, "msg": "The length of the message content reaches its limit."}
EDIT_CAP = {"code": 230072, "msg": "The message has reached the number of times it can be edited."}


def invalid(field: str) -> dict:
    return {"code": 99992402, "msg": f"field validation failed: {field}"}


def fake_id(prefix: str, name: str) -> str:
    """A chat (oc_), user (ou_) or message (om_) id as the platform writes them, made from a test's name."""
    return prefix + hashlib.md5(name.encode()).hexdigest()


def ok(data: Optional[dict] = None) -> web.Response:
    return web.json_response({"code": 0, "msg": "success", "data": data or {}})


class FakeFeishu(LongConnectionMethods, CallbackMethods, FakeServer):
    """``limits`` (DEFAULT_LIMITS keys) as keyword arguments; faults through ``set_faults`` (kinds flood: 429
    99991400, error: 500, drop, drop_after) for ``create`` and ``reply``."""

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None, app_id: str = DEFAULT_APP_ID,
                 app_secret: str = DEFAULT_APP_SECRET, encrypt_key: str = DEFAULT_ENCRYPT_KEY,
                 verification_token: str = DEFAULT_VERIFICATION_TOKEN, bot_open_id: str = DEFAULT_BOT_OPEN_ID,
                 callback_url: Optional[str] = None, **limits):
        self.app_id, self.app_secret, self.bot_open_id = app_id, app_secret, bot_open_id
        self.encrypt_key, self.verification_token = encrypt_key, verification_token
        super().__init__(port=port, state_file=state_file)
        self.limits = dict(DEFAULT_LIMITS)
        self.configure(**limits)
        self.callback_url = callback_url
        self.faults = FaultScript(SEND_METHODS)
        self.gates = FloodGate()
        self._http = None
        self._tasks: set = set()
        self._recent_sends: dict = {}   # chat -> times of its recent sends (the 5-a-second limit)
        self.bot_info_down = False      # True: /bot/v3/info answers 500 (an outage of the API, not of callbacks)
        self.ws_sockets: dict = {}      # the open long connections (long_connection.py)
        self._ws_delivery = None

    def initial_state(self) -> dict:
        stats = dict.fromkeys(("tokens_issued", "token_refusals", "sends", "uuid_repeats", "edits", "edit_cap_refusals",
                               "recalls", "resources_served", "retry_after_violations", "pacing_violations",
                               "flood_served", "callback_attempts", "endpoint_calls", "endpoint_refusals",
                               "ws_refused", "ws_events_sent", "unknown_answers", "bad_answers", "duplicate_answers",
                               "bad_frames"), 0)
        # messages: the bot's; received: the users' (what a reply may answer)
        return {"tokens": {}, "chats": {}, "messages": {}, "received": {}, "uuids": {}, "ops": [], "callbacks": [],
                "resources": {}, "reactions": {}, "reaction_history": {}, "uploads": {},
                "next_message": 1, "next_event": 1, "next_callback": 1, "stats": stats, **self.fresh_ws_state()}

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
        self._ws_delivery = asyncio.get_running_loop().create_task(self.deliver_ws_forever())

    async def on_stopping(self) -> None:
        if self._ws_delivery is not None:
            self._ws_delivery.cancel()
        await self.close_all_ws()
        await self.close_deliveries()

    # -- injected input
    @staticmethod
    def user(name: str) -> str:
        return fake_id("ou_", name)

    @staticmethod
    def p2p_chat(name: str) -> str:
        """The one-to-one chat of the user ``name`` with the bot."""
        return fake_id("oc_", "p2p:" + name)

    @staticmethod
    def group(name: str) -> str:
        return fake_id("oc_", "group:" + name)

    def new_message_id(self, state: dict) -> str:
        value = state["next_message"]
        state["next_message"] += 1
        return f"om_{value:032x}"

    def message_event(self, chat: str, user: str, message_type: str, content: dict, *, chat_type: str = "p2p",
                      mentions: tuple = (), thread_id: str = "") -> dict:
        """One ``im.message.receive_v1`` event, with a fresh event id and message id."""
        with self.mutate() as state:
            event_id = f"{state['next_event']:032x}"
            state["next_event"] += 1
            message_id = self.new_message_id(state)
            state["received"][message_id] = {"id": message_id, "chat": chat, "root_id": "", "deleted": False}
        now_ms = str(int(time.time() * 1000))
        message = {"message_id": message_id, "root_id": "", "parent_id": "", "create_time": now_ms,
                   "update_time": now_ms, "chat_id": chat, "chat_type": chat_type, "message_type": message_type,
                   "content": json.dumps(content, ensure_ascii=False), "mentions": list(mentions)}
        if thread_id:
            message["thread_id"] = thread_id
        return {"schema": "2.0",
                "header": {"event_id": event_id, "event_type": "im.message.receive_v1", "create_time": now_ms,
                           "token": self.verification_token, "app_id": self.app_id, "tenant_key": "fake-tenant"},
                "event": {"sender": {"sender_id": {"open_id": user, "union_id": "on_" + user[3:],
                                                   "user_id": user[3:11]},
                                     "sender_type": "user", "tenant_key": "fake-tenant"},
                          "message": message}}

    def bot_mention(self, key: str = "@_user_1") -> dict:
        return {"key": key, "id": {"open_id": self.bot_open_id, "union_id": "on_bot", "user_id": ""},
                "name": "Fake bot", "tenant_key": "fake-tenant"}

    def inject_text(self, chat: str, user: str, text: str, **kwargs) -> str:
        """A user writes ``text`` in ``chat``: its callback is delivered; returns the delivery id."""
        return self.deliver(self.message_event(chat, user, "text", {"text": text}, **kwargs))

    def inject_image(self, chat: str, user: str, data: bytes) -> str:
        """An image message whose bytes the resource endpoint serves, delivered by callback."""
        return self.deliver(self.image_event(chat, user, data))

    def image_event(self, chat: str, user: str, data: bytes) -> dict:
        """The event of an image message whose bytes the resource endpoint serves."""
        image_key = "img_v3_" + secrets.token_hex(8)
        event = self.message_event(chat, user, "image", {"image_key": image_key})
        with self.mutate() as state:
            state["resources"][f"{event['event']['message']['message_id']}/{image_key}"] = (
                base64.b64encode(data).decode())
        return event

    # -- inspection
    def messages(self, chat: str) -> list[dict]:
        """What the chat shows from the bot, in order: {"id", "text", "deleted", "edits", "via", "at", ...}."""
        return self.read(lambda s: [s["messages"][i] for i in s["chats"].get(chat, {"messages": []})["messages"]])

    def ops(self, chat: str, method: str) -> list[dict]:
        return self.read(lambda s: [o for o in s["ops"] if o["chat"] == chat and o["method"] == method])

    def stats(self) -> dict:
        return self.read(lambda s: s["stats"])

    def expire_tokens(self) -> None:
        with self.mutate() as state:
            for token in state["tokens"]:
                state["tokens"][token] = 0

    # -- routes
    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/open-apis/auth/v3/tenant_access_token/internal", self.tenant_token)
        app.router.add_get("/open-apis/bot/v3/info", self.bot_info)
        app.router.add_post("/callback/ws/endpoint", self.ws_endpoint)
        app.router.add_get("/ws", self.ws_connect)
        app.router.add_post("/open-apis/im/v1/messages", self.sender("create"))
        app.router.add_post("/open-apis/im/v1/messages/{message_id}/reply", self.sender("reply"))
        app.router.add_put("/open-apis/im/v1/messages/{message_id}", self.update)
        app.router.add_delete("/open-apis/im/v1/messages/{message_id}", self.recall)
        app.router.add_get("/open-apis/im/v1/messages/{message_id}/resources/{key}", self.resource)
        app.router.add_post("/open-apis/im/v1/images", self.upload)
        app.router.add_post("/open-apis/im/v1/files", self.upload)
        app.router.add_post("/open-apis/im/v1/messages/{message_id}/reactions", self.add_reaction)
        app.router.add_get("/open-apis/im/v1/messages/{message_id}/reactions", self.list_reactions)
        app.router.add_delete("/open-apis/im/v1/messages/{message_id}/reactions/{reaction_id}", self.remove_reaction)
        control_route(app, "GET", "/_control/stats", lambda body: self.stats())
        control_route(app, "POST", "/_control/inject", lambda body: {"callback": self.inject_text(
            self.p2p_chat(str(body["user"])), self.user(str(body["user"])), str(body["text"]))})
        control_route(app, "GET", "/_control/messages/{chat}", lambda body, chat: {"messages": self.messages(chat)})
        control_route(app, "POST", "/_control/callback_url", lambda body: setattr(self, "callback_url",
                                                                               body.get("url")))

    async def tenant_token(self, request: web.Request) -> web.Response:
        params = await json_object(request)
        if params.get("app_id") != self.app_id or params.get("app_secret") != self.app_secret:
            return web.json_response({"code": 10014, "msg": "app secret invalid"}, status=400)
        token = "t-" + secrets.token_hex(16)
        with self.mutate() as state:
            state["tokens"][token] = time.time() + self.limits["token_ttl"]
            state["stats"]["tokens_issued"] += 1
        return web.json_response({"code": 0, "msg": "ok", "tenant_access_token": token,
                                  "expire": int(self.limits["token_ttl"])})

    def authorised(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        token = header[len("Bearer "):] if header.startswith("Bearer ") else ""
        with self.mutate() as state:
            if state["tokens"].get(token, 0) > time.time():
                return True
            state["stats"]["token_refusals"] += 1
        return False

    async def bot_info(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return web.json_response(BAD_TOKEN, status=400)
        if self.bot_info_down:
            return web.json_response({"code": 1000, "msg": "internal error"}, status=500)
        return web.json_response({"code": 0, "msg": "ok", "bot": {
            "activate_status": 2, "app_name": "Fake bot", "avatar_url": "", "ip_white_list": [],
            "open_id": self.bot_open_id}})

    def content_problem(self, params: dict) -> Optional[dict]:
        kind = params.get("msg_type")
        if kind not in ("text", "image", "file", "post"):
            return invalid("msg_type (the fake takes text, image, file and post)")
        try:
            content = json.loads(params.get("content") or "")
        except (TypeError, ValueError):
            return invalid("content")
        if not isinstance(content, dict):
            return invalid("content")
        if len(params["content"].encode()) > self.limits["content_limit"]:
            return TOO_LONG
        if kind == "text" and (not isinstance(content.get("text"), str) or not content["text"]):
            return invalid("content.text")
        key = self.shown_file(content)
        if kind != "text" and (key is None or key not in self.read(lambda s: s["uploads"])):
            return {"code": 230055, "msg": "the image or file key is not one of this app's uploads"}
        return None

    @staticmethod
    def shown_file(content: dict) -> Optional[str]:
        """The upload a message shows: its image_key or file_key, or a post's first image."""
        for field in ("image_key", "file_key"):
            if isinstance(content.get(field), str):
                return content[field]
        for paragraph in (content.get("zh_cn") or {}).get("content") or ():
            for element in paragraph:
                if isinstance(element, dict) and element.get("tag") == "img":
                    return element.get("image_key")
        return None

    @staticmethod
    def shown_text(msg_type: str, content: dict) -> str:
        if msg_type == "text":
            return content["text"]
        if msg_type == "post":
            return "\n".join(e.get("text", "") for paragraph in content["zh_cn"]["content"] for e in paragraph
                             if e.get("tag") == "text")
        return ""

    async def upload(self, request: web.Request) -> web.Response:
        """POST /im/v1/images (``image_type`` message, ``image``) or /im/v1/files (``file_type``, ``file_name``,
        ``file``): the bytes kept under a new key."""
        if not self.authorised(request):
            return web.json_response(BAD_TOKEN, status=400)
        form = await request.post()
        image = request.path.endswith("/images")
        field = form.get("image" if image else "file")
        if not hasattr(field, "file") or (image and form.get("image_type") != "message") or (
                not image and form.get("file_type") not in ("opus", "mp4", "pdf", "doc", "xls", "ppt", "stream")):
            return web.json_response(invalid("the upload's fields"), status=400)
        data = field.file.read()
        key = ("img_v3_" if image else "file_v3_") + secrets.token_hex(8)
        with self.mutate() as state:
            state["uploads"][key] = {"sha256": hashlib.sha256(data).hexdigest(), "kind": "image" if image else "file",
                                     "name": "" if image else str(form.get("file_name") or "")}
        return ok({"image_key" if image else "file_key": key})

    def sender(self, method: str):
        async def handler(request: web.Request) -> web.Response:
            if not self.authorised(request):
                return web.json_response(BAD_TOKEN, status=400)
            params, now = await json_object(request), time.time()
            with self.mutate() as state:
                if method == "create":
                    chat, parent = str(params.get("receive_id", "")), None
                    if request.query.get("receive_id_type") != "chat_id":
                        return web.json_response(invalid("receive_id_type (the fake takes chat_id)"), status=400)
                else:
                    parent_id = request.match_info["message_id"]
                    parent = state["messages"].get(parent_id) or state["received"].get(parent_id)
                    chat = parent["chat"] if parent else ""
                    if parent is None or parent.get("deleted"):
                        return web.json_response(RECALLED, status=400)
                fault = self.faults.draw(method)
                if fault == "drop":
                    self._log_op(state, method, chat, 599)
                    return drop_connection(request)
                if fault == "flood" or (fault is None and self.gates.ban_remaining([chat], now) > 0):
                    if fault is None:
                        state["stats"]["retry_after_violations"] += 1
                    else:
                        self.gates.ban(chat, now, self.faults.flood_retry_after)
                    return self._flooded(state, method, chat, self.faults.flood_retry_after)
                if fault == "error":
                    self._log_op(state, method, chat, 500)
                    return web.json_response({"code": 1000, "msg": "internal error"}, status=500)
                status, answer = self._send(state, method, chat, params, parent, now)
                if status == 429:
                    return self._flooded(state, method, chat, 1.0)
                self._log_op(state, method, chat, status)
            await self.hold_if_asked(method, chat, fault is None and status == 200)
            if fault == "drop_after":
                return drop_connection(request)
            return web.json_response(answer, status=status)
        return handler

    def _flooded(self, state: dict, method: str, chat: str, retry_after: float) -> web.Response:
        state["stats"]["flood_served"] += 1
        self._log_op(state, method, chat, 429)
        reset = max(1, math.ceil(retry_after))   # the platform names whole seconds
        return web.json_response(FREQUENCY_LIMIT, status=429, headers={
            "x-ogw-ratelimit-limit": str(self.limits["sends_per_s"]), "x-ogw-ratelimit-reset": str(reset)})

    def _send(self, state: dict, method: str, chat: str, params: dict, parent: Optional[dict], now: float) -> tuple:
        key = params.get("uuid")
        if key is not None and (not isinstance(key, str) or not 0 < len(key) <= 50):
            return 400, invalid("uuid")
        earlier = state["uuids"].get(key) if key else None
        if earlier is not None and now - earlier["at"] < self.limits["uuid_ttl"]:
            state["stats"]["uuid_repeats"] += 1   # the first send's message, and nothing sent
            return 200, {"code": 0, "msg": "success", "data": self._data(state["messages"][earlier["message"]])}
        if (problem := self.content_problem(params)) is not None:
            return 400, problem
        recent = [t for t in self._recent_sends.get(chat, []) if now - t < 1.0]
        if len(recent) >= self.limits["sends_per_s"]:
            state["stats"]["pacing_violations"] += 1
            return 429, FREQUENCY_LIMIT
        self._recent_sends[chat] = recent + [now]
        message_id = self.new_message_id(state)
        content = json.loads(params["content"])
        message = {"id": message_id, "chat": chat, "text": self.shown_text(params["msg_type"], content),
                   "msg_type": params["msg_type"], "file": self.shown_file(content), "deleted": False,
                   "edits": 0, "via": method, "at": now, "uuid": key,
                   "root_id": (parent.get("root_id") or parent["id"]) if parent else "",
                   "in_thread": bool(params.get("reply_in_thread")) if parent else False}
        state["messages"][message_id] = message
        state["chats"].setdefault(chat, {"messages": []})["messages"].append(message_id)
        state["stats"]["sends"] += 1
        if key:
            state["uuids"][key] = {"message": message_id, "at": now}
        return 200, {"code": 0, "msg": "success", "data": self._data(message)}

    @staticmethod
    def _data(message: dict) -> dict:
        return {"message_id": message["id"], "root_id": message["root_id"], "parent_id": message["root_id"],
                "msg_type": message.get("msg_type", "text"), "create_time": str(int(message["at"] * 1000)),
                "chat_id": message["chat"],
                "sender": {"id": "cli_fake", "id_type": "app_id", "sender_type": "app"},
                "body": {"content": json.dumps({"text": message["text"]}, ensure_ascii=False)}}

    def _log_op(self, state: dict, method: str, chat: str, status: int) -> None:
        state["ops"].append({"method": method, "chat": chat, "at": time.time(), "status": status})

    async def update(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return web.json_response(BAD_TOKEN, status=400)
        params = await json_object(request)
        with self.mutate() as state:
            message = state["messages"].get(request.match_info["message_id"])
            chat = message["chat"] if message else ""
            status, answer = 200, {"code": 0, "msg": "success", "data": {}}
            if message is None or message["deleted"]:
                status, answer = 400, RECALLED
            elif params.get("msg_type") != "text" or message.get("msg_type", "text") not in ("text", "post"):
                status, answer = 400, invalid("msg_type (an edit changes a text or post message, to text)")
            elif (problem := self.content_problem(params)) is not None:
                status, answer = 400, problem
            elif message["edits"] >= self.limits["edits_per_message"]:
                state["stats"]["edit_cap_refusals"] += 1
                status, answer = 400, EDIT_CAP
            else:
                message["text"] = json.loads(params["content"])["text"]
                message["edits"] += 1
                state["stats"]["edits"] += 1
            self._log_op(state, "update", chat, status)
        return web.json_response(answer, status=status)

    async def recall(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return web.json_response(BAD_TOKEN, status=400)
        with self.mutate() as state:
            message = state["messages"].get(request.match_info["message_id"])
            if message is None or message["deleted"]:
                return web.json_response(RECALLED, status=400)
            message["deleted"] = True
            state["stats"]["recalls"] += 1
            self._log_op(state, "recall", message["chat"], 200)
        return ok()

    async def resource(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return web.json_response(BAD_TOKEN, status=400)
        if request.query.get("type") not in ("image", "file"):
            return web.json_response(invalid("type"), status=400)
        ref = f"{request.match_info['message_id']}/{request.match_info['key']}"
        with self.mutate() as state:
            data = state["resources"].get(ref)
            if data is not None:
                state["stats"]["resources_served"] += 1
            chat = (state["received"].get(request.match_info["message_id"]) or {}).get("chat", "")
        if data is None:
            return web.json_response({"code": 234003, "msg": "File not in msg."}, status=400)
        await self.hold_if_asked("resource", chat, True)   # a test's window while a download is under way
        return web.Response(body=base64.b64decode(data), content_type="application/octet-stream")

    # -- reactions (the app's: the fake's only operator)
    def _known(self, state: dict, message_id: str) -> bool:
        known = state["messages"].get(message_id) or state["received"].get(message_id)
        return bool(known) and not known.get("deleted")

    def _log_reactions(self, state: dict, message_id: str) -> None:
        shown = [r["reaction_type"]["emoji_type"] for r in state["reactions"].get(message_id, [])]
        state["reaction_history"].setdefault(message_id, []).append(shown)

    def reaction_history(self, message_id: str) -> list[list[str]]:
        """The emoji types the app's reactions on the message showed after each change, oldest first."""
        return self.read(lambda s: s["reaction_history"].get(message_id, []))

    async def add_reaction(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return web.json_response(BAD_TOKEN, status=400)
        params, message_id = await json_object(request), request.match_info["message_id"]
        kind = (params.get("reaction_type") or {}).get("emoji_type") if isinstance(params, dict) else None
        with self.mutate() as state:
            if not self._known(state, message_id):
                return web.json_response(RECALLED, status=400)
            if not isinstance(kind, str) or not kind:
                return web.json_response(invalid("reaction_type.emoji_type"), status=400)
            reaction = {"reaction_id": "r_" + secrets.token_hex(8), "action_time": str(int(time.time() * 1000)),
                        "operator": {"operator_id": self.app_id, "operator_type": "app"},
                        "reaction_type": {"emoji_type": kind}}
            state["reactions"].setdefault(message_id, []).append(reaction)
            self._log_reactions(state, message_id)
        return ok(reaction)

    async def list_reactions(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return web.json_response(BAD_TOKEN, status=400)
        items = self.read(lambda s: s["reactions"].get(request.match_info["message_id"], []))
        return ok({"items": items, "has_more": False, "page_token": ""})

    async def remove_reaction(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return web.json_response(BAD_TOKEN, status=400)
        message_id, reaction_id = request.match_info["message_id"], request.match_info["reaction_id"]
        with self.mutate() as state:
            reactions = state["reactions"].get(message_id, [])
            kept = [r for r in reactions if r["reaction_id"] != reaction_id]
            if len(kept) == len(reactions):
                return web.json_response({"code": 231012, "msg": "reaction not found"}, status=400)
            state["reactions"][message_id] = kept
            self._log_reactions(state, message_id)
        return ok({"reaction_id": reaction_id})

    def __repr__(self) -> str:
        return f"FakeFeishu(port={self.port})"
