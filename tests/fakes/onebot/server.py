"""The fake OneBot v11 implementation (see __init__.py for what it speaks)."""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from typing import Any, Optional

import aiohttp
from aiohttp import WSMsgType, web

from tests.fakes.harness import FakeServer, FaultScript

DEFAULT_TOKEN = "onebot-test-token"
BOT_QQ = 10001
FAULT_METHODS = ("send_private_msg", "send_group_msg", "delete_msg")
SEND_ACTIONS = ("send_private_msg", "send_group_msg", "send_msg")
PACED_ACTIONS = SEND_ACTIONS + ("delete_msg",)


def qq_of(name: str) -> int:
    """A stable QQ number for a name (a test's user or group)."""
    return 20000 + int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 900_000_000


def ok(data: Any, echo: Any) -> dict:
    return {"status": "ok", "retcode": 0, "data": data, "echo": echo}


def failed(retcode: int, wording: str, echo: Any) -> dict:
    return {"status": "failed", "retcode": retcode, "data": None, "message": wording, "wording": wording, "echo": echo}


def cq_text(segments: list) -> str:
    """The CQ-code form of segments (``raw_message``)."""
    out = []
    for seg in segments:
        data = seg.get("data") or {}
        if seg.get("type") == "text":
            out.append(str(data.get("text", "")).replace("&", "&amp;").replace("[", "&#91;").replace("]", "&#93;"))
        else:
            params = "".join(f",{k}={v}" for k, v in data.items())
            out.append(f"[CQ:{seg.get('type')}{params}]")
    return "".join(out)


class FakeOneBot(FakeServer):
    def __init__(self, *, port: int = 0, state_file: Optional[str] = None, access_token: str = DEFAULT_TOKEN,
                 self_id: int = BOT_QQ, heartbeat_interval: float = 5.0, max_text: int = 5000,
                 pace_per_minute: float = 10.0, pace_min_gap_s: float = 1.5):
        super().__init__(port=port, state_file=state_file)
        self.access_token, self.self_id = access_token, self_id
        self.heartbeat_interval, self.max_text = heartbeat_interval, max_text
        self.pace_per_minute, self.pace_min_gap_s = pace_per_minute, pace_min_gap_s
        self.faults = FaultScript(FAULT_METHODS)
        self._sockets: set[web.WebSocketResponse] = set()
        self._tasks: set[asyncio.Task] = set()
        self.refused: list[int] = []          # HTTP statuses of refused handshakes
        self._pongs: dict[web.WebSocketResponse, asyncio.Event] = {}
        self.files: dict[str, bytes] = {}     # what image segments' URLs serve (in memory)
        self.reverse_attempts: list[int] = []
        self.accepted = 0                     # connections served since the start
        self._post_to: Optional[tuple[str, Optional[str]]] = None
        self._post_beats = None
        self.post_statuses: list[int] = []
        self._reverse = None

    def initial_state(self) -> dict:
        return {"next_id": 1, "events": {}, "messages": {}, "ops": [], "paced": [], "pace_violations": 0,
                "deliveries": {}}

    def add_routes(self, app: web.Application) -> None:
        for path in ("/", "/api", "/event", "/api/", "/event/"):
            app.router.add_get(path, self._forward)
        app.router.add_get("/files/{name}", self._file)
        app.router.add_post("/{action}", self._http_action)

    # -- the HTTP API and HTTP POST events
    async def _http_action(self, request: web.Request) -> web.Response:
        """``POST /{action}`` with the params as JSON (the HTTP API): the token as on the WebSocket."""
        if self.access_token and self._token_of(request) != self.access_token:
            status = 401 if self._token_of(request) is None else 403
            self.refused.append(status)
            return web.Response(status=status)
        try:
            params = await request.json() if request.can_read_body else {}
        except ValueError:
            return web.json_response(failed(1400, "the body is no JSON", None), status=400)
        answer, chat = self._perform(request.match_info["action"], params if isinstance(params, dict) else {}, None)
        if answer.get("retcode") == 1404:
            return web.Response(status=404)
        answer.pop("echo", None)
        if answer.get("retcode") == 0 and request.match_info["action"] in SEND_ACTIONS:
            await self.hold_if_asked(request.match_info["action"], chat, True)
        return web.json_response(answer)

    def post_events_to(self, url: str, secret: Optional[str]) -> None:
        """From now on every event (and a heartbeat every ``heartbeat_interval``) is POSTed to ``url`` as well,
        with ``X-Self-ID`` and, with a ``secret``, ``X-Signature: sha1=`` HMAC-SHA1 of the body. Each answer's
        status is in ``post_statuses`` (0: unreachable). Nothing is POSTed again after a failure."""
        self._post_to = (url, secret)
        if self._post_beats is not None:
            self._post_beats.cancel()

        async def beats():
            while self._post_to is not None and self.heartbeat_interval > 0:
                await self._post(self._meta("heartbeat", status={"online": True, "good": True},
                                            interval=int(self.heartbeat_interval * 1000)))
                await asyncio.sleep(self.heartbeat_interval)    # the implementation's own period
        self._post_beats = asyncio.run_coroutine_threadsafe(beats(), self._loop)

    async def _post(self, event: dict) -> None:
        if self._post_to is None:
            return
        url, secret = self._post_to
        body = json.dumps(event).encode()
        headers = {"Content-Type": "application/json", "X-Self-ID": str(event.get("self_id", self.self_id))}
        if secret:
            headers["X-Signature"] = "sha1=" + hmac.new(secret.encode(), body, hashlib.sha1).hexdigest()
        try:
            async with aiohttp.ClientSession() as http:
                async with http.post(url, data=body, headers=headers) as resp:
                    self.post_statuses.append(resp.status)
        except (aiohttp.ClientError, OSError):
            self.post_statuses.append(0)

    async def _file(self, request: web.Request) -> web.Response:
        data = self.files.get(request.match_info["name"])
        return web.Response(status=404) if data is None else web.Response(body=data)

    def file_url(self, data: bytes) -> str:
        """A URL the fake serves ``data`` at, as an implementation serves a user's image (its own file server, or
        QQ's multimedia host)."""
        name = hashlib.sha256(data).hexdigest()[:16]
        self.files[name] = data
        return f"{self.base_url}/files/{name}"

    # -- the forward WebSocket
    def _token_of(self, request: web.Request) -> Optional[str]:
        header = request.headers.get("Authorization", "")
        if header.startswith(("Bearer ", "Token ")):
            return header.split(" ", 1)[1].strip()
        return request.query.get("access_token")

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        if self.access_token:
            given = self._token_of(request)
            if given != self.access_token:
                status = 401 if given is None else 403
                self.refused.append(status)
                return web.Response(status=status, text="access token missing" if status == 401 else "forbidden")
        ws = web.WebSocketResponse(max_msg_size=4 << 20, autoping=False)
        await ws.prepare(request)
        await self._serve_socket(ws)
        return ws

    async def _serve_socket(self, ws) -> None:
        """One universal connection, either way it was opened: events out, actions in."""
        self._pongs[ws] = asyncio.Event()
        self._sockets.add(ws)
        self.accepted += 1
        await ws.send_str(json.dumps(self._meta("lifecycle", sub_type="connect")))
        beat = asyncio.create_task(self._heartbeats(ws))
        try:
            async for frame in ws:
                if frame.type == WSMsgType.PING:
                    await ws.pong(frame.data)
                    continue
                if frame.type == WSMsgType.PONG:
                    self._pongs[ws].set()
                    continue
                if frame.type != WSMsgType.TEXT:
                    continue
                task = asyncio.create_task(self._act(ws, frame.data))   # answers may wait (a held send)
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            beat.cancel()
            self._sockets.discard(ws)
            self._pongs.pop(ws, None)
            with self.mutate():
                pass          # wakes waiters on ``connected``

    # -- the reverse WebSocket: the fake connects to the bot's server, and again after every drop
    def connect_reverse(self, url: str, token: Optional[str], reconnect_interval: float = 0.5,
                        self_id: Optional[int] = None) -> None:
        """Keep a reverse connection to ``url`` (``token`` None: no Authorization header), reconnecting every
        ``reconnect_interval`` seconds after a drop or a refusal, as an implementation's WebSocket client does.
        Each attempt's outcome (101, or the HTTP status of a refusal, or 0: unreachable) is in
        ``reverse_attempts``."""
        async def forever():
            headers = {"X-Self-ID": str(self.self_id if self_id is None else self_id), "X-Client-Role": "Universal",
                       "User-Agent": "OneBot/11"}
            if token is not None:
                headers["Authorization"] = f"Bearer {token}"
            async with aiohttp.ClientSession() as http:
                while True:
                    try:
                        ws = await http.ws_connect(url, headers=headers, autoping=False, max_msg_size=4 << 20)
                    except aiohttp.WSServerHandshakeError as exc:
                        self.reverse_attempts.append(exc.status)
                    except (aiohttp.ClientError, OSError):
                        self.reverse_attempts.append(0)
                    else:
                        self.reverse_attempts.append(101)
                        await self._serve_socket(ws)
                    with self.mutate():
                        pass
                    await asyncio.sleep(reconnect_interval)   # the implementation's reconnect interval
        self._reverse = asyncio.run_coroutine_threadsafe(forever(), self._loop)

    async def _heartbeats(self, ws) -> None:
        while not ws.closed and self.heartbeat_interval > 0:
            await asyncio.sleep(self.heartbeat_interval)    # the implementation's own period
            if not ws.closed:
                try:
                    await ws.send_str(json.dumps(self._meta("heartbeat", status={"online": True, "good": True},
                                                            interval=int(self.heartbeat_interval * 1000))))
                except (ConnectionError, RuntimeError):
                    return

    def _meta(self, kind: str, **fields) -> dict:
        return {"time": int(time.time()), "self_id": self.self_id, "post_type": "meta_event",
                "meta_event_type": kind, **fields}

    async def on_started(self) -> None:
        with self.mutate():
            pass

    async def on_stopping(self) -> None:
        self._post_to = None
        for task in (self._reverse, self._post_beats):
            if task is not None:
                task.cancel()
        for ws in list(self._sockets):
            await ws.close()

    def connected(self) -> int:
        return len(self._sockets)

    def alive_connections(self, timeout: float = 2.0) -> int:
        """The connections whose client answers a WebSocket ping within ``timeout`` (one whose client died, as
        after a kill -9, stays listed until the server notices, and takes events into the void); one that does not
        answer is closed."""
        async def probe(ws) -> bool:
            pong = self._pongs.get(ws)
            if pong is None or ws.closed:
                return False
            pong.clear()
            try:
                await ws.ping(b"fake")
                await asyncio.wait_for(pong.wait(), timeout)
                return True
            except (asyncio.TimeoutError, ConnectionError, RuntimeError):
                await ws.close()
                return False

        async def probe_all() -> int:
            return sum(await asyncio.gather(*(probe(ws) for ws in list(self._sockets))))
        return asyncio.run_coroutine_threadsafe(probe_all(), self._loop).result(timeout=timeout + 10)

    # -- actions
    async def _act(self, ws, text: str) -> None:
        try:
            request = json.loads(text)
        except ValueError:
            return
        if not isinstance(request, dict):
            return
        echo, action = request.get("echo"), request.get("action")
        params = request.get("params") if isinstance(request.get("params"), dict) else {}
        fault = self.faults.draw(action) if isinstance(action, str) else None
        if fault == "drop":
            await ws.close()
            return
        answer, chat = self._perform(action, params, echo)
        if fault == "drop_after":
            await ws.close()
            return
        if fault == "error":
            answer = failed(100, "the send failed (a fault)", echo)
        if answer.get("retcode") == 0 and action in SEND_ACTIONS:
            await self.hold_if_asked(action, chat, True)
        if not ws.closed:
            try:
                await ws.send_str(json.dumps(answer))
            except (ConnectionError, RuntimeError):
                pass

    def _perform(self, action: Any, params: dict, echo: Any) -> tuple[dict, str]:
        if action == "get_login_info":
            return ok({"user_id": self.self_id, "nickname": "gateway bot"}, echo), ""
        if action in SEND_ACTIONS:
            return self._send(action, params, echo)
        if action == "delete_msg":
            return self._delete(params, echo), ""
        if action == "get_msg":
            with self._lock:
                found = self.state["messages"].get(str(params.get("message_id")))
            return (ok(found, echo) if found else failed(100, "no such message", echo)), ""
        return failed(1404, f"no action {action!r}", echo), ""

    def _send(self, action: str, params: dict, echo: Any) -> tuple[dict, str]:
        kind = {"send_private_msg": "private", "send_group_msg": "group"}.get(action, params.get("message_type"))
        target = params.get("user_id" if kind == "private" else "group_id")
        chat = f"{kind}:{target}"
        if kind not in ("private", "group") or not isinstance(target, int):
            return failed(1400, "user_id / group_id must be a number", echo), chat
        message = params.get("message")
        segments = message if isinstance(message, list) else [{"type": "text", "data": {"text": str(message)}}]
        text = "".join(str((s.get("data") or {}).get("text", "")) for s in segments
                       if isinstance(s, dict) and s.get("type") == "text")
        with self.mutate() as state:
            self._pace(state, action)
            if len(text) > self.max_text:
                state["ops"].append({"at": time.time(), "chat": chat, "action": action, "status": 100})
                return failed(100, f"message over {self.max_text} characters", echo), chat
            message_id = state["next_id"]
            state["next_id"] += 1
            reply = next((str((s.get("data") or {}).get("id")) for s in segments
                          if isinstance(s, dict) and s.get("type") == "reply"), None)
            state["messages"][str(message_id)] = {"message_id": message_id, "chat": chat, "text": text,
                                                  "reply": reply, "deleted": False, "from_bot": True,
                                                  "at": time.time()}
            state["ops"].append({"at": time.time(), "chat": chat, "action": action, "status": 0})
        return ok({"message_id": message_id}, echo), chat

    def _delete(self, params: dict, echo: Any) -> dict:
        with self.mutate() as state:
            self._pace(state, "delete_msg")
            found = state["messages"].get(str(params.get("message_id")))
            if not found or not found["from_bot"]:
                return failed(100, "no such message of the account", echo)
            found["deleted"] = True
            state["ops"].append({"at": time.time(), "chat": found["chat"], "action": "delete_msg", "status": 0})
        return ok(None, echo)

    def _pace(self, state: dict, action: str) -> None:
        """Time the account's message and count a gap or a minute broken."""
        now = time.monotonic()
        paced = state["paced"]
        if paced and now - paced[-1] < self.pace_min_gap_s:
            state["pace_violations"] += 1
        recent = [t for t in paced if t > now - 60.0]
        if len(recent) >= self.pace_per_minute:
            state["pace_violations"] += 1
        paced.append(now)
        del paced[:-1000]

    # -- events
    def qq(self, name: str) -> int:
        return qq_of(name)

    def _push(self, event: dict) -> None:
        frame = json.dumps(event)
        loop = self._loop
        if loop is None:
            raise RuntimeError("the fake is not running")

        async def send_all():
            for ws in list(self._sockets):
                if not ws.closed:
                    await ws.send_str(frame)
            await self._post(event)
        asyncio.run_coroutine_threadsafe(send_all(), loop).result(timeout=10)

    def _event(self, kind: str, user: str, message: Any, group: Optional[str], self_id: Optional[int]) -> dict:
        with self.mutate() as state:
            message_id = state["next_id"]
            state["next_id"] += 1
            event = {"time": int(time.time()), "self_id": self.self_id if self_id is None else self_id,
                     "post_type": "message", "message_type": kind,
                     "sub_type": "friend" if kind == "private" else "normal", "message_id": message_id,
                     "user_id": qq_of(user), "message": message,
                     "raw_message": cq_text(message) if isinstance(message, list) else str(message), "font": 0,
                     "sender": {"user_id": qq_of(user), "nickname": user, "sex": "unknown", "age": 0}}
            if group is not None:
                event["group_id"] = qq_of(group)
                event["sender"]["card"] = ""
            state["events"][str(message_id)] = event
            state["deliveries"][str(message_id)] = 1
            if isinstance(message, list):
                state["messages"][str(message_id)] = {"message_id": message_id, "from_bot": False,
                                                      "chat": f"{kind}:{event.get('group_id', qq_of(user))}",
                                                      "text": cq_text(message), "deleted": False, "reply": None}
        self._push(event)
        return event

    def inject_private(self, user: str, text: str, *, segments: Optional[list] = None,
                       self_id: Optional[int] = None) -> dict:
        return self._event("private", user, segments or [{"type": "text", "data": {"text": text}}], None, self_id)

    def inject_group(self, group: str, user: str, text: str, *, mention: bool = True,
                     segments: Optional[list] = None) -> dict:
        message = segments or ([{"type": "at", "data": {"qq": str(self.self_id)}}] if mention else []) + \
            [{"type": "text", "data": {"text": (" " if mention else "") + text}}]
        return self._event("group", user, message, group, None)

    def inject_raw_message(self, user: str, message: Any) -> dict:
        """A private message whose ``message`` is whatever is given (a malformed one, CQ code)."""
        return self._event("private", user, message, None, None)

    def replay(self, message_id: int) -> None:
        with self.mutate() as state:
            event = state["events"][str(message_id)]
            state["deliveries"][str(message_id)] += 1
        self._push(event)

    def drop_connections(self) -> None:
        async def close_all():
            for ws in list(self._sockets):
                await ws.close()
        asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(timeout=10)

    # -- what the bot did
    def sent(self, chat: str) -> list[dict]:
        return self.read(lambda s: [m for m in s["messages"].values() if m["from_bot"] and m["chat"] == chat])

    def ops(self, chat: str, action: str) -> list[dict]:
        return self.read(lambda s: [o for o in s["ops"] if o["chat"] == chat and o["action"] == action])

    def gaps(self) -> list[float]:
        paced = self.read(lambda s: list(s["paced"]))
        return [b - a for a, b in zip(paced, paced[1:])]

    def stats(self) -> dict:
        return self.read(lambda s: {"pace_violations": s["pace_violations"], "paced": len(s["paced"]),
                                    "refused": list(self.refused)})

    def set_faults(self, **settings) -> None:
        self.faults.configure(**settings)
