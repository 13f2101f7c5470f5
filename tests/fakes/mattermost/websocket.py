"""The fake's WebSocket event stream (``/api/v4/websocket``), as Mattermost serves it.

Authentication: an ``Authorization: Bearer`` header on the upgrade, or (the usual way for a bot) the first frame
``{"seq", "action": "authentication_challenge", "data": {"token"}}``, answered ``{"status": "OK", "seq_reply"}``
(``"FAIL"`` with an ``error``, then closed, for a wrong token). Then ``hello`` (``seq`` 0, ``data.server_version``,
``data.connection_id``), then every event of the channels the user is a member of: ``posted`` (``data.post`` a JSON
string, ``channel_type``, ``channel_name``, ``sender_name``, ``team_id``, ``mentions`` a JSON string of user ids
when the post mentions anyone), ``post_edited``, ``post_deleted``, ``typing``; ``seq`` counts them per connection.
An action before authentication is refused; ``user_typing`` is answered OK and sent to the channel's other members
as ``typing``; an unknown action is answered FAIL. The server pings every connection every ``ping_interval``
seconds (the real one about once a minute; 0, the default here: never) and answers the client's pings.

Faults (the server's, not the client's): ``drop_websockets`` cuts every connection without a close frame;
``skip_events(n)`` loses the next n events of each connection while their ``seq`` numbers are spent (what a
server's overflowing send queue does); ``refuse_websockets`` answers the upgrade 503 (the server behind a proxy
that is down); ``freeze_websockets`` stops sending anything, pongs included (a half-open connection).
"""
from __future__ import annotations

import asyncio
import json
from typing import Optional

from aiohttp import WSMsgType, web

from tests.fakes.harness import ping_forever
from tests.fakes.mattermost.world import new_id

SERVER_VERSION = "9.11.0.fake"


class Connection:
    def __init__(self, request: web.Request, ws: web.WebSocketResponse, connection_id: str):
        self.request, self.ws, self.connection_id = request, ws, connection_id
        self.user_id: Optional[str] = None
        self.seq = 0
        self.queue: asyncio.Queue = asyncio.Queue()
        self.skip = 0


class WebSocketMethods:
    """Mixin for FakeMattermost: needs ``mutate``, ``read``, ``token``, ``_loop``, ``state``."""

    def init_websockets(self) -> None:
        self.connections: list[Connection] = []
        self.ws_log: list[dict] = []
        self.refusing_websockets = False
        self.frozen = False

    def add_websocket_route(self, app: web.Application) -> None:
        app.router.add_get("/api/v4/websocket", self._ws_handler)

    async def _ws_handler(self, request: web.Request):
        if self.refusing_websockets:
            with self.mutate() as state:
                state["stats"]["refused_upgrades"] += 1
            return web.json_response({"id": "fake.unavailable", "message": "Service Unavailable",
                                      "status_code": 503}, status=503)
        # autoping off: a frozen connection must not answer pings either
        ws = web.WebSocketResponse(autoping=False, max_msg_size=1 << 20)
        await ws.prepare(request)
        conn = Connection(request, ws, new_id())
        with self.mutate() as state:
            state["stats"]["connections"] += 1
        self.ws_log.append({"event": "connected", "connection_id": conn.connection_id})
        if request.headers.get("Authorization") in (f"Bearer {self.token}", f"Token {self.token}"):
            self._authenticated(conn)
        writer = asyncio.get_running_loop().create_task(self._writer(conn))
        pinger = asyncio.get_running_loop().create_task(self._ping_forever(conn))
        try:
            async for message in ws:
                if self.frozen:
                    continue
                if message.type == WSMsgType.PING:
                    await ws.pong(message.data)
                    continue
                if message.type != WSMsgType.TEXT:
                    continue
                await self._action(conn, message.data)
        finally:
            writer.cancel()
            pinger.cancel()
            if conn in self.connections:
                self.connections.remove(conn)
            self.ws_log.append({"event": "closed", "connection_id": conn.connection_id})
        return ws

    def _authenticated(self, conn: Connection) -> None:
        conn.user_id = self.state["bot_id"]
        self.connections.append(conn)
        with self.mutate() as state:
            state["stats"]["authenticated"] += 1
        self._enqueue(conn, "hello", {"server_version": SERVER_VERSION, "connection_id": conn.connection_id},
                      {"user_id": conn.user_id})

    async def _action(self, conn: Connection, text: str) -> None:
        try:
            frame = json.loads(text)
        except ValueError:
            return
        if not isinstance(frame, dict):
            return
        seq, action, data = frame.get("seq"), frame.get("action"), frame.get("data")
        data = data if isinstance(data, dict) else {}
        self.ws_log.append({"event": "action", "action": action, "connection_id": conn.connection_id})
        if action == "authentication_challenge":
            if data.get("token") != self.token:
                await conn.ws.send_json({"status": "FAIL", "seq_reply": seq, "error": {
                    "id": "api.web_socket_router.bad_token.app_error", "message": "invalid token"}})
                await conn.ws.close()
                return
            await conn.ws.send_json({"status": "OK", "seq_reply": seq})
            if conn.user_id is None:
                self._authenticated(conn)
            return
        if conn.user_id is None:
            await conn.ws.send_json({"status": "FAIL", "seq_reply": seq, "error": {
                "id": "api.web_socket_router.not_authenticated.app_error", "message": "not authenticated"}})
            return
        if action == "user_typing":
            channel_id = data.get("channel_id")
            with self.mutate() as state:
                state["stats"]["typing_actions"] += 1
                entry = state["channels"].get(channel_id)
                if entry is not None and conn.user_id in entry["members"]:
                    self.log_op(state, channel_id, "typing", 200)
                    self.broadcast(state, channel_id, "typing", {"parent_id": data.get("parent_id") or "",
                                                                 "user_id": conn.user_id}, exclude=conn.user_id)
            await conn.ws.send_json({"status": "OK", "seq_reply": seq})
            return
        await conn.ws.send_json({"status": "FAIL", "seq_reply": seq, "error": {
            "id": "api.web_socket_router.bad_action.app_error", "message": f"unknown action {action!r}"}})

    # -- events
    def broadcast(self, state: dict, channel_id: str, event: str, data: dict, exclude: str = "") -> None:
        """``event`` to every connection of a member of the channel (called under ``mutate``, from any thread)."""
        members = set(state["channels"][channel_id]["members"])
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        broadcast = {"omit_users": None, "user_id": "", "channel_id": channel_id, "team_id": ""}

        def deliver():
            for conn in list(self.connections):
                if conn.user_id in members and conn.user_id != exclude:
                    self._enqueue(conn, event, data, broadcast)
        loop.call_soon_threadsafe(deliver)

    def _enqueue(self, conn: Connection, event: str, data: dict, broadcast: dict) -> None:
        """On the server loop: the event takes the connection's next ``seq`` (even when a fault loses it)."""
        seq, conn.seq = conn.seq, conn.seq + 1
        if conn.skip > 0 and event != "hello":
            conn.skip -= 1
            with self.mutate() as state:
                state["stats"]["events_skipped"] += 1
            return
        conn.queue.put_nowait({"event": event, "data": data, "broadcast": broadcast, "seq": seq})

    async def _writer(self, conn: Connection) -> None:
        while True:
            frame = await conn.queue.get()
            while self.frozen:
                await asyncio.sleep(0.05)
            try:
                await conn.ws.send_str(json.dumps(frame))
            except (ConnectionError, RuntimeError):
                return
            with self.mutate() as state:
                state["stats"]["events_sent"] += 1
                if frame["event"] == "posted":
                    post_id = _post_id(frame["data"])
                    state["deliveries"][post_id] = state["deliveries"].get(post_id, 0) + 1

    async def _ping_forever(self, conn: Connection) -> None:
        await ping_forever(conn.ws, self.limits["ping_interval"], b"fake-mattermost-ping", lambda: self.frozen)

    # -- controls (any thread)
    def _on_loop(self, fn):
        loop = self._loop
        if loop is None or loop.is_closed():
            return None
        async def run():
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout=10)

    def drop_websockets(self) -> int:
        """Cut every connection without a close frame; how many there were."""
        def drop():
            dropped = list(self.connections)
            self.connections.clear()
            for conn in dropped:
                if conn.request.transport is not None:
                    conn.request.transport.close()
            return len(dropped)
        return self._on_loop(drop) or 0

    def skip_events(self, count: int) -> None:
        """Each open connection loses its next ``count`` events (their seq numbers are spent)."""
        def skip():
            for conn in self.connections:
                conn.skip = int(count)
        self._on_loop(skip)

    def refuse_websockets(self, refused: bool = True) -> None:
        self.refusing_websockets = bool(refused)

    def freeze_websockets(self, frozen: bool = True) -> None:
        self.frozen = bool(frozen)

    def deliveries(self, post_id: str) -> int:
        """How many ``posted`` events of the post were sent to a connection."""
        return self.read(lambda s: s["deliveries"].get(post_id, 0))

    def open_connections(self) -> int:
        return self._on_loop(lambda: len(self.connections)) or 0


def _post_id(data: dict) -> str:
    try:
        return str(json.loads(data["post"])["id"])
    except (KeyError, TypeError, ValueError):
        return ""
