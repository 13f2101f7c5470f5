"""The fake QQ bot API (see __init__.py for what it speaks)."""
from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import secrets
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

import aiohttp
from aiohttp import WSMsgType, web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.fakes.harness import FakeServer, FaultScript, FloodGate, drop_connection, json_object

APP_ID = "102000001"
APP_SECRET = "qq-fake-app-secret-0123456789abcdef"
BOT_ID = "11869548352739028211"
SESSION_EVENTS = 500            # dispatches a session keeps for a Resume
SESSIONS_KEPT = 4
SEND_ROUTES = ("send",)
INTENT_OF = {"C2C_MESSAGE_CREATE": 1 << 25, "GROUP_AT_MESSAGE_CREATE": 1 << 25, "AT_MESSAGE_CREATE": 1 << 30,
             "DIRECT_MESSAGE_CREATE": 1 << 12, "MESSAGE_CREATE": 1 << 9}
CHINA = timezone(timedelta(hours=8))
DUPLICATE = 40054005
PASSIVE_LIMIT = 40034128         # 被动回复时间或次数超限
ACTIVE_LIMIT = 40034100          # 主动消息发送超过频控限制
REPLIES_PER_MESSAGE = 5          # QQ's docs: a user message takes 5 passive replies (C2C and groups)
MARKDOWN_NOT_ALLOWED = 50056     # 不允许发送 markdown content
FILE_TYPES = {1: "image", 2: "video", 3: "voice", 4: "file"}
SHOWN_INLINE = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")   # file_type 1 takes png and jpg


def openid(name: str) -> str:
    """A stable openid (32 upper-case hex digits, as QQ hands them per bot) for a test's user or group name."""
    return hashlib.sha256(name.encode()).hexdigest()[:32].upper()


def guild_number(name: str) -> str:
    return str(10 ** 17 + int(hashlib.sha256(name.encode()).hexdigest()[:12], 16))


def stamp() -> str:
    return datetime.now(CHINA).isoformat(timespec="seconds")


def error(status: int, code: int, message: str) -> web.Response:
    return web.json_response({"message": message, "code": code, "err_code": code,
                              "trace_id": secrets.token_hex(8)}, status=status)


class FakeQQ(FakeServer):
    def __init__(self, *, port: int = 0, state_file: Optional[str] = None, app_id: str = APP_ID,
                 app_secret: str = APP_SECRET, token_lifetime_s: float = 7200.0, heartbeat_interval_ms: int = 41250,
                 max_text: int = 4000):
        super().__init__(port=port, state_file=state_file)
        self.app_id, self.app_secret = app_id, app_secret
        self.token_lifetime_s, self.heartbeat_interval_ms, self.max_text = token_lifetime_s, heartbeat_interval_ms, \
            max_text
        self.public_port: Optional[int] = None    # the port the gateway URL names (a relay in front), if not ours
        self.faults = FaultScript(SEND_ROUTES)
        self.gate = FloodGate()
        self._sockets: dict[web.WebSocketResponse, Optional[str]] = {}   # socket -> its session once READY/RESUMED
        self.refusing = False                     # gateway connections answered 503 (QQ's gateway away)
        self.refused = 0
        self.callback_url: Optional[str] = None   # the webhook: every dispatch is POSTed there too, signed
        self.callback_answers: list[tuple[int, Any]] = []   # (status, JSON body or None) of each callback
        self.replies_per_message = REPLIES_PER_MESSAGE
        self.active_quota_used_up = False         # active messages (no msg_id) refused with 40034100
        self.markdown_allowed = True              # False: markdown refused with 50056 (the bot was not granted it)
        self.media_files: dict[str, tuple[bytes, str]] = {}   # token -> (bytes, MIME type) served under /media/
        self.media_fetches = 0
        self.lose_answer_in: set[str] = set()     # chats whose next send takes effect and loses its answer, once

    def initial_state(self) -> dict:
        return {"next": 1, "tokens": {}, "token_fetches": 0, "sessions": {}, "identifies": 0, "resumes": 0,
                "messages": [], "events": {}, "deliveries": {}, "ops": [], "retry_after_violations": 0,
                "api_calls": 0, "uploads": {}}

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/app/getAppAccessToken", self._token)
        app.router.add_get("/gateway", self._gateway_url)
        app.router.add_get("/gateway/bot", self._gateway_url)
        app.router.add_get("/websocket", self._websocket)
        app.router.add_get("/users/@me", self._me)
        app.router.add_post("/v2/users/{target}/messages", self._for_kind(self._send, "c2c"))
        app.router.add_post("/v2/groups/{target}/messages", self._for_kind(self._send, "group"))
        app.router.add_post("/channels/{target}/messages", self._for_kind(self._send, "channel"))
        app.router.add_post("/dms/{target}/messages", self._for_kind(self._send, "dms"))
        app.router.add_post("/v2/users/{target}/files", self._for_kind(self._upload, "c2c"))
        app.router.add_post("/v2/groups/{target}/files", self._for_kind(self._upload, "group"))
        app.router.add_get("/media/{token}", self._media)

    @property
    def api_url(self) -> str:
        return self.base_url

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/app/getAppAccessToken"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.public_port or self.port}/websocket"

    # -- the access token
    async def _token(self, request: web.Request) -> web.Response:
        body = await json_object(request)
        if body.get("appId") != self.app_id or body.get("clientSecret") != self.app_secret:
            return error(400, 100016, "invalid appid or secret")
        token = secrets.token_urlsafe(24)
        with self.mutate() as state:
            state["tokens"] = {t: exp for t, exp in state["tokens"].items() if exp > time.time()}
            state["tokens"][token] = time.time() + self.token_lifetime_s
            state["token_fetches"] += 1
        return web.json_response({"access_token": token, "expires_in": str(int(self.token_lifetime_s))})

    def _valid(self, token: Any) -> bool:
        if not isinstance(token, str) or not token.startswith("QQBot "):
            return False
        with self._lock:
            return self.state["tokens"].get(token[6:], 0.0) > time.time()

    def expire_tokens(self) -> None:
        """Every token handed out is revoked at once (QQ's answer to a reset secret, or an early expiry)."""
        with self.mutate() as state:
            state["tokens"] = {}

    async def _gateway_url(self, request: web.Request) -> web.Response:
        if not self._valid(request.headers.get("Authorization")):
            return error(401, 11244, "token not exist or expire")
        return web.json_response({"url": self.gateway_url})

    async def _me(self, request: web.Request) -> web.Response:
        if not self._valid(request.headers.get("Authorization")):
            return error(401, 11244, "token not exist or expire")
        return web.json_response({"id": BOT_ID, "username": "gateway-bot", "avatar": "", "union_openid": "",
                                  "union_user_account": ""})

    # -- the gateway
    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        if self.refusing:
            with self.mutate():
                self.refused += 1
            return web.Response(status=503, text="the gateway is away")
        ws = web.WebSocketResponse(max_msg_size=1 << 20, autoping=True)
        await ws.prepare(request)
        self._sockets[ws] = None
        try:
            await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval_ms}}))
            async for frame in ws:
                if frame.type != WSMsgType.TEXT:
                    continue
                try:
                    payload = json.loads(frame.data)
                except ValueError:
                    await ws.close(code=4002, message=b"invalid payload")
                    break
                await self._gateway_op(ws, payload if isinstance(payload, dict) else {})
        finally:
            self._sockets.pop(ws, None)
            with self.mutate():
                pass       # wakes waiters on ``established``
        return ws

    async def _gateway_op(self, ws: web.WebSocketResponse, payload: dict) -> None:
        op, data = payload.get("op"), payload.get("d")
        if op == 1:
            await ws.send_str(json.dumps({"op": 11}))
        elif op == 2:
            data = data if isinstance(data, dict) else {}
            if not self._valid(data.get("token")):
                await ws.close(code=4004, message=b"invalid token")
                return
            if not isinstance(data.get("intents"), int):
                await ws.close(code=4013, message=b"invalid intent")
                return
            session_id = secrets.token_hex(16)
            with self.mutate() as state:
                state["identifies"] += 1
                state["sessions"][session_id] = {"seq": 0, "events": [], "intents": data["intents"]}
                for old in list(state["sessions"])[:-SESSIONS_KEPT]:
                    del state["sessions"][old]
                ready = self._numbered(state, session_id, "READY", {
                    "version": 1, "session_id": session_id, "shard": [0, 1],
                    "user": {"id": BOT_ID, "username": "gateway-bot", "bot": True}})
            self._sockets[ws] = session_id
            await ws.send_str(json.dumps(ready))
        elif op == 6:
            data = data if isinstance(data, dict) else {}
            if not self._valid(data.get("token")):
                await ws.close(code=4004, message=b"invalid token")
                return
            with self.mutate() as state:
                session = state["sessions"].get(data.get("session_id"))
                if session is not None:
                    state["resumes"] += 1
                    after = data.get("seq") if isinstance(data.get("seq"), int) else 0
                    missed = [e for e in session["events"] if e["s"] > after]
            if session is None:
                await ws.send_str(json.dumps({"op": 9, "d": False}))
                return
            for frame in missed:
                await ws.send_str(json.dumps(frame))
            self._sockets[ws] = data["session_id"]
            await ws.send_str(json.dumps({"op": 0, "t": "RESUMED", "d": ""}))
            with self.mutate():
                pass
        else:
            await ws.close(code=4001, message=b"invalid opcode")

    @staticmethod
    def _numbered(state: dict, session_id: str, name: str, data: Any) -> dict:
        session = state["sessions"][session_id]
        session["seq"] += 1
        frame = {"op": 0, "s": session["seq"], "t": name, "id": f"{name}:{secrets.token_hex(6)}", "d": data}
        session["events"] = (session["events"] + [frame])[-SESSION_EVENTS:]
        return frame

    def _dispatch(self, name: str, data: dict) -> None:
        """``data`` numbered in every session whose intents cover it, and sent where that session is connected."""
        with self.mutate() as state:
            frames = {sid: self._numbered(state, sid, name, data) for sid, s in state["sessions"].items()
                      if s["intents"] & INTENT_OF[name]}
            state["next"] += 1
            callback = {"op": 0, "id": f"{name}:{secrets.token_hex(6)}", "s": state["next"], "t": name, "d": data}
        self._on_loop(self._send_frames, frames)
        if self.callback_url:
            self.post_callback(json.dumps(callback).encode())

    async def _send_frames(self, frames: dict) -> None:
        for ws, session_id in list(self._sockets.items()):
            if session_id in frames and not ws.closed:
                try:
                    await ws.send_str(json.dumps(frames[session_id]))
                except (ConnectionError, RuntimeError):
                    pass

    def _on_loop(self, fn, *args, timeout: float = 10.0) -> Any:
        if self._loop is None:
            raise RuntimeError("the fake is not running")
        return asyncio.run_coroutine_threadsafe(fn(*args), self._loop).result(timeout=timeout)

    def established(self) -> int:
        """Connections that got READY or RESUMED (0 while the adapter is between connections)."""
        return sum(1 for ws, sid in list(self._sockets.items()) if sid is not None and not ws.closed)

    def close_sessions(self, code: int = 4009) -> None:
        """Every gateway connection closed by the server with ``code`` (4009: timed out, resumable)."""
        async def close_all():
            for ws in list(self._sockets):
                await ws.close(code=code, message=b"closed by the fake")
        self._on_loop(close_all)

    def request_heartbeat(self) -> None:
        """The gateway asks every established connection for a heartbeat now (op 1), as QQ's may."""
        async def ask():
            for ws, sid in list(self._sockets.items()):
                if sid is not None and not ws.closed:
                    try:
                        await ws.send_str(json.dumps({"op": 1, "d": None}))
                    except (ConnectionError, RuntimeError):
                        pass
        if self._loop is not None:
            self._on_loop(ask)

    def send_garbled(self, text: str = "{not json") -> None:
        """A frame that is no JSON to every established connection."""
        async def garble():
            for ws, sid in list(self._sockets.items()):
                if sid is not None and not ws.closed:
                    await ws.send_str(text)
        self._on_loop(garble)

    async def on_stopping(self) -> None:
        for ws in list(self._sockets):
            await ws.close(code=4009, message=b"the gateway restarts")

    # -- events
    def _message(self, name: str, chat: str, data: dict) -> dict:
        with self.mutate() as state:
            message_id = f"ROBOT1.0_{state['next']:08d}{secrets.token_hex(4)}"
            state["next"] += 1
            data = dict(data, id=message_id, timestamp=stamp())
            state["events"][message_id] = {"t": name, "d": data}
            state["deliveries"][message_id] = 1
            state["messages"].append({"id": message_id, "chat": chat, "text": data.get("content", ""),
                                      "from_bot": False, "at": time.time()})
        self._dispatch(name, data)
        return data

    def inject_c2c(self, user: str, text: str, attachments: Optional[list] = None) -> dict:
        return self._message("C2C_MESSAGE_CREATE", f"c2c:{openid(user)}",
                             {"author": {"user_openid": openid(user)}, "content": text,
                              **({"attachments": attachments} if attachments else {})})

    def attachment(self, data: bytes, content_type: str, filename: str = "", size: Optional[int] = None) -> dict:
        """A file a user sent, served by the fake under /media/, as an event's ``attachments`` entry names it
        (``size``: the one QQ claims, if not the bytes' own)."""
        token = secrets.token_hex(12)
        self.media_files[token] = (data, content_type)
        return {"content_type": content_type, "filename": filename or f"{token}.bin",
                "size": len(data) if size is None else size, "height": 0, "width": 0,
                "url": f"http://127.0.0.1:{self.public_port or self.port}/media/{token}"}

    async def _media(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization"):
            return web.Response(status=400, text="QQ's media server takes no bot token")
        self.media_fetches += 1
        found = self.media_files.get(request.match_info["token"])
        if found is None:
            return web.Response(status=404, text="no such file")
        return web.Response(body=found[0], content_type=found[1] if "/" in found[1] else "application/octet-stream")

    def inject_group(self, group: str, user: str, text: str, attachments: Optional[list] = None) -> dict:
        return self._message("GROUP_AT_MESSAGE_CREATE", f"group:{openid(group)}",
                             {"author": {"member_openid": openid(f"{group}/{user}")}, "content": f" {text}",
                              "group_openid": openid(group), **({"attachments": attachments} if attachments else {})})

    def inject_channel(self, channel: str, user: str, text: str) -> dict:
        return self._message("AT_MESSAGE_CREATE", f"channel:{guild_number(channel)}",
                             {"author": {"id": guild_number(user), "username": user, "bot": False},
                              "channel_id": guild_number(channel), "guild_id": guild_number("guild"),
                              "content": f"<@!{BOT_ID}> {text}", "mentions": [{"id": BOT_ID, "bot": True}]})

    def inject_dm(self, user: str, text: str) -> dict:
        return self._message("DIRECT_MESSAGE_CREATE", f"dms:{guild_number('dm/' + user)}",
                             {"author": {"id": guild_number(user), "username": user, "bot": False},
                              "channel_id": guild_number("dm-channel/" + user),
                              "guild_id": guild_number("dm/" + user), "src_guild_id": guild_number("guild"),
                              "content": text})

    def inject_raw(self, name: str, data: dict) -> None:
        """Any dispatch, as given (a malformed one)."""
        self._dispatch(name, data)

    def replay(self, message_id: str) -> int:
        """The message's event dispatched again; which delivery of it this is."""
        with self.mutate() as state:
            event = state["events"][message_id]
            state["deliveries"][message_id] += 1
            delivery = state["deliveries"][message_id]
        self._dispatch(event["t"], event["d"])
        return delivery

    # -- the webhook (HTTP callback)
    def signing_key(self) -> Ed25519PrivateKey:
        """The bot's Ed25519 key: the AppSecret repeated to 32 bytes or more, its first 32 the seed."""
        seed = self.app_secret.encode()
        while len(seed) < 32:
            seed += seed
        return Ed25519PrivateKey.from_private_bytes(seed[:32])

    def post_callback(self, body: bytes, signature: Optional[str] = None, timestamp: Optional[str] = None,
                      signed: bool = True) -> tuple[int, Any]:
        """POST ``body`` to ``callback_url`` as QQ does (``signed``: with X-Signature-Timestamp and
        X-Signature-Ed25519 over the timestamp and the body, unless ``signature`` says otherwise); the answer's
        status and JSON, also kept in ``callback_answers`` (status 0: unreachable)."""
        timestamp = timestamp or str(int(time.time()))
        headers = {"Content-Type": "application/json", "User-Agent": "QQBot-Callback", "X-Bot-Appid": self.app_id}
        if signed:
            headers["X-Signature-Timestamp"] = timestamp
            headers["X-Signature-Method"] = "Ed25519"
            headers["X-Signature-Ed25519"] = signature or \
                self.signing_key().sign(timestamp.encode() + body).hex()

        async def post() -> tuple[int, Any]:
            try:
                async with aiohttp.ClientSession() as http:
                    async with http.post(self.callback_url, data=body, headers=headers) as resp:
                        try:
                            answer = await resp.json(content_type=None)
                        except ValueError:
                            answer = None
                        return resp.status, answer
            except (aiohttp.ClientError, OSError):
                return 0, None
        outcome = self._on_loop(post, timeout=90.0)    # the answer waits for the gateway's commit
        self.callback_answers.append(outcome)
        return outcome

    def validate_callback(self, plain_token: str, event_ts: str, signed: bool = True) -> tuple[int, Any]:
        """The op 13 validation QQ sends when the callback URL is configured."""
        body = json.dumps({"op": 13, "d": {"plain_token": plain_token, "event_ts": event_ts}}).encode()
        return self.post_callback(body, signed=signed)

    # -- rich media (api-v2 富媒体消息)
    async def _upload(self, request: web.Request, kind: str, target: str) -> web.StreamResponse:
        chat = f"{kind}:{target}"
        if not self._valid(request.headers.get("Authorization")):
            return error(401, 11244, "token not exist or expire")
        body = await json_object(request)
        file_type, data = body.get("file_type"), body.get("file_data")
        if file_type not in FILE_TYPES or not isinstance(body.get("srv_send_msg"), bool):
            return error(400, 400, "file_type or srv_send_msg is missing or wrong")
        try:
            content = base64.b64decode(data, validate=True) if isinstance(data, str) else b""
        except (binascii.Error, ValueError):
            content = b""
        if not content:
            return error(400, 400, "file_data is no base64 of a file (url is not served by this fake)")
        if file_type == 1 and not content.startswith(SHOWN_INLINE):
            return error(400, 400, "an image must be png or jpg")
        file_info = base64.b64encode(secrets.token_bytes(24)).decode()
        with self.mutate() as state:
            state["uploads"][file_info] = {"kind": kind, "file_type": FILE_TYPES[file_type],
                                           "sha256": hashlib.sha256(content).hexdigest(),
                                           "name": body.get("file_name") if isinstance(body.get("file_name"), str)
                                           else "", "srv_send_msg": body["srv_send_msg"]}
            if body["srv_send_msg"]:    # sent at once, as an active message: what the adapter must never ask for
                state["messages"].append({"id": f"BOT{state['next']:08d}", "chat": chat, "text": "",
                                          "from_bot": True, "msg_id": None, "msg_seq": None, "at": time.time(),
                                          "file": dict(state["uploads"][file_info])})
                state["next"] += 1
        return web.json_response({"file_uuid": secrets.token_hex(16), "file_info": file_info, "ttl": 3600})

    async def _body(self, request: web.Request, kind: str) -> tuple[dict, Optional[bytes]]:
        """A send's fields and, for a guild channel's or DM's ``multipart/form-data``, its ``file_image``."""
        if kind in ("channel", "dms") and request.content_type == "multipart/form-data":
            form = await request.post()
            fields: dict[str, Any] = {}
            image = None
            for key, value in form.items():
                if key == "file_image" and isinstance(value, web.FileField):
                    image = value.file.read()
                elif isinstance(value, str):
                    try:
                        fields[key] = json.loads(value) if key in ("markdown", "embed", "ark",
                                                                   "message_reference") else value
                    except ValueError:
                        fields[key] = None
            return fields, image
        return await json_object(request), None

    def _content(self, state: dict, kind: str, body: dict, image: Optional[bytes]) -> tuple[Optional[dict], Any]:
        """What the send shows ({"text", "markdown", "file"}) or the error answer that refuses it."""
        msg_type, content = body.get("msg_type", 0), body.get("content")
        markdown = body.get("markdown")
        if kind in ("channel", "dms"):
            msg_type = 2 if markdown is not None else 0
        if msg_type == 2:
            if not isinstance(markdown, dict) or not isinstance(markdown.get("content"), str) or \
                    not markdown["content"].strip() or len(markdown["content"]) > self.max_text:
                return None, error(400, 50055, "无效的 markdown content")
            if not self.markdown_allowed:
                return None, error(400, MARKDOWN_NOT_ALLOWED, "不允许发送 markdown content")
            return {"text": markdown["content"], "markdown": True}, None
        if msg_type == 7 and kind in ("c2c", "group"):
            media = body.get("media")
            upload = state["uploads"].get(media.get("file_info")) if isinstance(media, dict) else None
            if upload is None or upload["kind"] != kind:
                return None, error(400, 304083, "convert media info fail")
            if not isinstance(content, str) or not content:
                return None, error(400, 400, "content must be given with msg_type 7 (a space will do)")
            return {"text": content.strip(), "file": dict(upload)}, None
        if image is not None:
            if not image.startswith(SHOWN_INLINE):
                return None, error(400, 304017, "图片上传错误")
            return {"text": content if isinstance(content, str) else "",
                    "file": {"file_type": "image", "sha256": hashlib.sha256(image).hexdigest(), "name": ""}}, None
        if msg_type != 0 or not isinstance(content, str) or not content.strip() or len(content) > self.max_text:
            return None, error(400, 400, "content is empty or too long")
        return {"text": content}, None

    # -- sends
    @staticmethod
    def _for_kind(handler, kind: str):
        """A route's handler: ``handler(request, kind, target)`` for the chat kind the path names."""
        async def handle(request: web.Request) -> web.StreamResponse:
            return await handler(request, kind, request.match_info["target"])
        return handle

    async def _send(self, request: web.Request, kind: str, target: str) -> web.StreamResponse:
        chat = f"{kind}:{target}"
        if not self._valid(request.headers.get("Authorization")) or \
                request.headers.get("X-Union-Appid") != self.app_id:
            self._op(chat, 401)
            return error(401, 11244, "token not exist or expire")
        body, image = await self._body(request, kind)
        now = time.monotonic()
        if self.gate.ban_remaining([chat], now) > 0:
            with self.mutate() as state:
                state["retry_after_violations"] += 1
        fault = self.faults.draw("send")
        if fault == "flood":
            self.gate.ban(chat, now, self.faults.flood_retry_after)
            self._op(chat, 429)
            return error(429, 22009, "msg limit exceed")
        if fault == "error":
            self._op(chat, 500)
            return error(500, 500, "internal error")
        if fault == "drop":
            return drop_connection(request)
        msg_id, seq = body.get("msg_id"), body.get("msg_seq", 1)
        with self.mutate() as state:
            shown, refusal = self._content(state, kind, body, image)
            if refusal is not None:
                state["ops"].append({"at": time.time(), "chat": chat, "status": 400})
                return refusal
            if msg_id is not None:
                if not any(m["id"] == msg_id and m["chat"] == chat for m in state["messages"]):
                    state["ops"].append({"at": time.time(), "chat": chat, "status": 400})
                    return error(400, 400, "msg_id is no message of this chat")
                if kind in ("c2c", "group") and any(m.get("msg_id") == msg_id and m.get("msg_seq") == seq and
                                                    m["chat"] == chat for m in state["messages"]):
                    state["ops"].append({"at": time.time(), "chat": chat, "status": 400})
                    return error(400, DUPLICATE, "消息被去重，请检查请求msgseq")
                if sum(1 for m in state["messages"] if m["from_bot"] and m.get("msg_id") == msg_id) >= \
                        self.replies_per_message:
                    state["ops"].append({"at": time.time(), "chat": chat, "status": 400})
                    return error(400, PASSIVE_LIMIT, "被动回复时间或次数超限")
            elif self.active_quota_used_up:
                state["ops"].append({"at": time.time(), "chat": chat, "status": 400})
                return error(400, ACTIVE_LIMIT, "主动消息发送超过频控限制")
            message_id = f"BOT{state['next']:08d}{secrets.token_hex(4)}"
            state["next"] += 1
            state["messages"].append({"id": message_id, "chat": chat, "from_bot": True, "msg_id": msg_id,
                                      "msg_seq": seq if kind in ("c2c", "group") else None, "at": time.time(),
                                      **shown})
            state["ops"].append({"at": time.time(), "chat": chat, "status": 200})
        await self.hold_if_asked("send", chat, True)
        if fault == "drop_after" or chat in self.lose_answer_in:
            self.lose_answer_in.discard(chat)
            return drop_connection(request)
        if kind in ("c2c", "group"):
            return web.json_response({"id": message_id, "timestamp": int(time.time())})
        return web.json_response({"id": message_id, "channel_id": target, "content": shown["text"],
                                  "timestamp": stamp(),
                                  "author": {"id": BOT_ID, "bot": True}})

    def _op(self, chat: str, status: int) -> None:
        with self.mutate() as state:
            state["ops"].append({"at": time.time(), "chat": chat, "status": status})

    # -- what the bot did
    def sent(self, chat: str) -> list[dict]:
        return self.read(lambda s: [m for m in s["messages"] if m["from_bot"] and m["chat"] == chat])

    def ops(self, chat: str) -> list[dict]:
        return self.read(lambda s: [o for o in s["ops"] if o["chat"] == chat])

    def sessions(self) -> dict:
        return self.read(lambda s: s["sessions"])

    def stats(self) -> dict:
        return self.read(lambda s: {k: s[k] for k in ("identifies", "resumes", "token_fetches",
                                                      "retry_after_violations")})

    def set_faults(self, **settings) -> None:
        self.faults.configure(**settings)
