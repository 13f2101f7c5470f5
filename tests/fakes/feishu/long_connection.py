"""The long-connection side of the fake (使用长连接接收事件), in the wire format of the platform's SDKs (lark-oapi's
``ws`` client is the only description there is): the endpoint, the WebSocket, protobuf frames (the adapter's own
``frames`` module writes and reads them here: its bytes were checked against the SDK's protobuf classes), pings and
pongs, events (split into fragments on request), their answers, and redelivery of what is not answered.

* ``POST /callback/ws/endpoint`` ``{AppID, AppSecret}`` answers ``{"code": 0, "data": {"URL":
  "ws://127.0.0.1:P/ws?device_id=...&service_id=...&ticket=...", "ClientConfig": {"ReconnectCount": -1,
  "ReconnectInterval", "ReconnectNonce", "PingInterval"}}}`` (``reconnect_interval``, ``reconnect_nonce``,
  ``ping_interval`` seconds); a wrong app: HTTP 200 ``{"code": 403, "msg": "app secret invalid"}`` (the fake's
  code); ``endpoint_down``: ``{"code": 1, "msg": "system busy"}`` (the SDK's busy code). A URL opens one connection;
  a used or unknown one is refused at the handshake (HTTP 403 with ``handshake-status: 514``, as the SDK reads it).
* The client's ping (a control frame, header ``type: ping``, the URL's ``service_id``) is answered with a pong whose
  payload is the ClientConfig's JSON; each ping's time is kept (``pings``).
* An event (``queue_ws_event``) goes to an open connection in turn, as ``fragments`` data frames (headers ``type:
  event``, ``message_id`` new for each attempt, ``sum``, ``seq``, ``trace_id``), the event's JSON split evenly. An
  answer (the frame back, payload ``{"code": 200}``) with the attempt's message_id acknowledges it; one not
  acknowledged within ``ack_timeout`` goes again (the same event, a new message_id), and while no connection is open
  it waits: never dropped. A non-200 answer counts as ``bad_answers`` and the event goes again.
* Faults, run in the fake's loop (``run``): ``drop_ws`` cuts the TCP connections, ``close_ws`` closes them with a
  close frame (the platform ending a connection); ``endpoint_down`` keeps new ones from being opened.
"""
from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from aiohttp import WSMsgType, web

from actors.adapters.feishu import frames
from tests.fakes.harness import json_object

SERVICE_ID = 33554678     # the fake's service id, as the SDK's URLs carry one


class WsConn:
    def __init__(self, conn_id: int, ws: web.WebSocketResponse, transport):
        self.id, self.ws, self.transport = conn_id, ws, transport
        self.lock = asyncio.Lock()
        self.next_seq = 0


class LongConnectionMethods:
    """Mixin for FakeFeishu: needs ``app_id``, ``app_secret``, ``limits``, ``mutate``, ``read``, ``_lock``."""

    endpoint_down = False

    def client_config(self) -> dict:
        return {"ReconnectCount": -1, "ReconnectInterval": self.limits["reconnect_interval"],
                "ReconnectNonce": self.limits["reconnect_nonce"], "PingInterval": self.limits["ping_interval"]}

    # -- the endpoint and the socket
    async def ws_endpoint(self, request: web.Request) -> web.Response:
        params = await json_object(request)
        with self.mutate() as state:
            state["stats"]["endpoint_calls"] += 1
            if params.get("AppID") != self.app_id or params.get("AppSecret") != self.app_secret:
                state["stats"]["endpoint_refusals"] += 1
                return web.json_response({"code": 403, "msg": "app secret invalid"})
            if self.endpoint_down:
                return web.json_response({"code": 1, "msg": "system busy"})
            ticket = secrets.token_hex(12)
            state["ws_tickets"][ticket] = False
        device = uuid.uuid4().hex
        url = (f"ws://127.0.0.1:{self.port}/ws?device_id={device}&access_key={secrets.token_hex(8)}"
               f"&service_id={SERVICE_ID}&ticket={ticket}")
        return web.json_response({"code": 0, "msg": "ok", "data": {"URL": url, "ClientConfig": self.client_config()}})

    async def ws_connect(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        with self.mutate() as state:
            if state["ws_tickets"].get(ticket) is not False:
                state["stats"]["ws_refused"] += 1
                return web.Response(status=403, headers={"handshake-status": "514",
                                                         "handshake-msg": "the connection URL is used or unknown"})
            state["ws_tickets"][ticket] = True
            state["next_ws"] += 1
            conn_id = state["next_ws"]
            state["ws_connections"].append({"id": conn_id, "opened_at": time.time(), "closed_at": None})
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        conn = WsConn(conn_id, ws, request.transport)
        self.ws_sockets[conn.id] = conn
        self._touch()
        try:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    await self._ws_frame(conn, msg.data)
                elif msg.type == WSMsgType.ERROR:
                    break
        finally:
            self.ws_sockets.pop(conn.id, None)
            with self.mutate() as state:
                entry = next(c for c in state["ws_connections"] if c["id"] == conn.id)
                entry["closed_at"] = time.time()
        return ws

    async def _ws_frame(self, conn: WsConn, data: bytes) -> None:
        try:
            frame = frames.decode(data)
        except frames.BadFrame:
            self._count("bad_frames")
            return
        if frame.method == frames.CONTROL:
            if frame.header("type") == "ping" and frame.service == SERVICE_ID:
                with self.mutate() as state:
                    state["pings"].append({"at": time.time(), "connection": conn.id})
                await self._ws_send(conn, frames.Frame(service=SERVICE_ID, method=frames.CONTROL,
                                                       headers=(("type", "pong"),),
                                                       payload=json.dumps(self.client_config()).encode()))
            else:
                self._count("bad_frames")
            return
        self._on_ws_answer(conn, frame)

    def _on_ws_answer(self, conn: WsConn, frame: frames.Frame) -> None:
        message_id = frame.header("message_id")
        try:
            code = json.loads(frame.payload).get("code")
        except (ValueError, AttributeError):
            code = None
        with self.mutate() as state:
            found = next((e for e in state["ws_events"] for at in e["attempts"] if at["message_id"] == message_id),
                         None)
            if found is None:
                state["stats"]["unknown_answers"] += 1
            elif code != 200 or not frame.header("biz_rt").isdigit():
                state["stats"]["bad_answers"] += 1
            elif found["status"] == "acked":
                state["stats"]["duplicate_answers"] += 1
            else:
                found.update(status="acked", acked_at=time.time(), acked_on=conn.id)

    async def _ws_send(self, conn: WsConn, frame: frames.Frame) -> bool:
        if conn.ws.closed:
            return False
        try:
            async with conn.lock:
                await conn.ws.send_bytes(frames.encode(frame))
            return True
        except (ConnectionError, RuntimeError):
            return False

    def _count(self, stat: str) -> None:
        with self.mutate() as state:
            state["stats"][stat] += 1

    def _touch(self) -> None:
        with self.mutate():
            pass

    # -- events
    def queue_ws_event(self, event: dict, fragments: int = 1) -> str:
        """Deliver ``event`` over the long connection, in ``fragments`` frames; returns its handle."""
        with self.mutate() as state:
            state["next_ws_event"] += 1
            handle = f"ws{state['next_ws_event']}"
            state["ws_events"].append({"id": handle, "event": event, "fragments": int(fragments),
                                       "status": "pending", "due": 0.0, "attempts": []})
        return handle

    def ws_event(self, handle: str) -> dict:
        return self.read(lambda s: next(e for e in s["ws_events"] if e["id"] == handle))

    def ws_connections(self) -> list[dict]:
        return self.read(lambda s: list(s["ws_connections"]))

    def pings(self) -> list[dict]:
        return self.read(lambda s: list(s["pings"]))

    async def deliver_ws_forever(self) -> None:
        """Send each due event to an open connection, in turn."""
        turn = 0
        while True:
            now = time.time()
            with self._lock:
                due = [e for e in self.state["ws_events"] if e["status"] == "pending" and e["due"] <= now]
                open_conns = [c for c in self.ws_sockets.values() if not c.ws.closed]
            for event in due:
                if not open_conns:
                    break
                conn = open_conns[turn % len(open_conns)]
                turn += 1
                message_id = uuid.uuid4().hex
                with self.mutate() as state:
                    live = next(e for e in state["ws_events"] if e["id"] == event["id"])
                    live["attempts"].append({"message_id": message_id, "connection": conn.id, "at": now})
                    live["due"] = now + self.limits["ack_timeout"]
                    state["stats"]["ws_events_sent"] += 1
                for frame in self.event_frames(conn, event["event"], event["fragments"], message_id):
                    await self._ws_send(conn, frame)
            await self.wait_for_change(0.1)

    def event_frames(self, conn: WsConn, event: dict, count: int, message_id: str) -> list[frames.Frame]:
        data = json.dumps(event, ensure_ascii=False).encode()
        size = -(-len(data) // count)
        trace = uuid.uuid4().hex
        out = []
        for seq in range(count):
            conn.next_seq += 1
            out.append(frames.Frame(seq_id=conn.next_seq, log_id=conn.next_seq, service=SERVICE_ID,
                                    method=frames.DATA, payload=data[seq * size:(seq + 1) * size],
                                    headers=(("type", "event"), ("message_id", message_id), ("sum", str(count)),
                                             ("seq", str(seq)), ("trace_id", trace))))
        return out

    # -- faults (run in the fake's loop)
    async def drop_ws(self) -> list[int]:
        """Cut every long connection's TCP connection (no close frame)."""
        targets = list(self.ws_sockets.values())
        for conn in targets:
            if conn.transport is not None:
                conn.transport.close()
        return [c.id for c in targets]

    async def close_ws(self) -> list[int]:
        """Close every long connection with a close frame, as the platform ends one."""
        targets = list(self.ws_sockets.values())
        for conn in targets:
            await conn.ws.close(code=1000, message=b"server closing")
        return [c.id for c in targets]

    async def close_all_ws(self) -> None:
        for conn in list(self.ws_sockets.values()):
            await conn.ws.close(code=1001)

    def run(self, coro, timeout: float = 10.0):
        """Run a coroutine of the fake's loop from a test thread; its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=timeout)

    def fresh_ws_state(self) -> dict:
        return {"ws_tickets": {}, "ws_connections": [], "ws_events": [], "pings": [], "next_ws": 0,
                "next_ws_event": 0}
