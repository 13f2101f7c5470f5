"""The Stream-mode side of the fake: connections/open, the WebSocket, SYSTEM pings and disconnects, CALLBACK frames
for robot messages, their acknowledgements, and redelivery of what is not acknowledged.

* ``POST /v1.0/gateway/connections/open`` ``{clientId, clientSecret, subscriptions: [{type, topic}], ua}`` answers
  ``{"endpoint": "ws://127.0.0.1:P/connect", "ticket"}``; a wrong client is refused (HTTP 400 ``{"code":
  "invalidClientId"...}``, the fake's words). A ticket opens one connection (a used or unknown one: HTTP 401).
* Each robot message is a CALLBACK frame ``{"specVersion": "1.0", "type": "CALLBACK", "headers": {"appId",
  "connectionId", "contentType": "application/json", "messageId" (new per attempt), "time", "topic":
  "/v1.0/im/bot/messages/get"}, "data": JSON string}``, sent only on connections that subscribed to the topic. The
  app acknowledges with ``{"code": 200, "headers": {"messageId"}, "message": "OK", "data"}``; one not acknowledged
  within ``ack_timeout`` goes again (a new messageId, the same data and msgId), to an open connection in turn, while
  no connection is open it waits. A callback whose every attempt is unacknowledged is never dropped here.
* SYSTEM frames: ``ping`` every ``ping_interval`` seconds (``data`` ``{"opaque"}``, to be echoed), ``disconnect``
  (``disconnect_sockets``) closes the connection ``close_after`` seconds later; WebSocket pings are answered.
  ``drop_sockets`` cuts the TCP connections; ``silence_sockets`` makes them half-open (nothing sent or read);
  ``send_raw`` sends any text as a frame.
"""
from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from typing import Optional

from aiohttp import WSMsgType, web

from tests.fakes.harness import json_object

BOT_TOPIC = "/v1.0/im/bot/messages/get"


class Conn:
    def __init__(self, conn_id: int, ws: web.WebSocketResponse, transport, topics: list):
        self.id, self.ws, self.transport, self.topics = conn_id, ws, transport, topics
        self.silent = False
        self.draining = False
        self.lock = asyncio.Lock()


class StreamMethods:
    """Mixin for FakeDingTalk: needs ``client_id``, ``client_secret``, ``limits``, ``sockets``, ``mutate``."""

    def frame(self, kind: str, topic: str, data, message_id: Optional[str] = None) -> dict:
        """A frame of the platform's; ``data`` an object (sent as its JSON string) or a string sent as it is."""
        return {"specVersion": "1.0", "type": kind,
                "headers": {"appId": self.client_id, "connectionId": "", "contentType": "application/json",
                            "messageId": message_id or str(uuid.uuid4()), "time": str(int(time.time() * 1000)),
                            "topic": topic},
                "data": data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}

    async def open_connection(self, request: web.Request) -> web.Response:
        params = await json_object(request)
        if params.get("clientId") != self.client_id or params.get("clientSecret") != self.client_secret:
            return web.json_response({"code": "invalidClientId", "message": "client id or secret is wrong",
                                      "requestid": uuid.uuid4().hex}, status=400)
        topics = [s.get("topic") for s in params.get("subscriptions") or () if isinstance(s, dict)]
        ticket = secrets.token_hex(16)
        with self.mutate() as state:
            state["tickets"][ticket] = {"used": False, "topics": topics, "at": time.time()}
            state["stats"]["tickets_issued"] += 1
        return web.json_response({"endpoint": f"ws://127.0.0.1:{self.endpoint_port or self.port}/connect",
                                  "ticket": ticket})

    async def handle_connect(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        with self.mutate() as state:
            info = state["tickets"].get(ticket)
            if info is None or info["used"]:
                state["stats"]["connections_refused"] += 1
                return web.Response(status=401, text="invalid or used ticket")
            info["used"] = True
            state["next_connection"] += 1
            conn_id = state["next_connection"]
            state["connections"].append({"id": conn_id, "ticket": ticket, "opened_at": time.time(),
                                         "closed_at": None})
        ws = web.WebSocketResponse(autoping=False, max_msg_size=0)
        await ws.prepare(request)
        conn = Conn(conn_id, ws, request.transport, info["topics"])
        self.sockets[conn.id] = conn
        self._wake()
        pinger = asyncio.get_running_loop().create_task(self._system_pings(conn))
        try:
            while True:
                msg = await ws.receive()
                if msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                    return ws
                if conn.silent:
                    continue
                if msg.type == WSMsgType.PING:
                    await ws.pong(msg.data)
                elif msg.type == WSMsgType.TEXT:
                    self._on_answer(conn, msg.data)
        finally:
            pinger.cancel()
            self.sockets.pop(conn.id, None)
            with self.mutate() as state:
                entry = next((c for c in state["connections"] if c["id"] == conn.id), None)
                if entry is not None:
                    entry["closed_at"] = time.time()

    def _on_answer(self, conn: Conn, data: str) -> None:
        try:
            answer = json.loads(data)
        except ValueError:
            answer = None
        headers = answer.get("headers") if isinstance(answer, dict) else None
        message_id = headers.get("messageId") if isinstance(headers, dict) else None
        with self.mutate() as state:
            if not isinstance(message_id, str) or answer.get("code") != 200:
                state["stats"]["bad_answers"] += 1
                return
            if message_id.startswith("ping-"):
                state["stats"]["pings_answered"] += 1
                return
            found = next((cb for cb in reversed(state["callbacks"]) for at in cb["attempts"]
                          if at["message_id"] == message_id), None)
            if found is None:
                state["stats"]["unknown_answers"] += 1
            elif found["status"] == "acked":
                state["stats"]["duplicate_answers"] += 1
            else:
                found["status"], found["acked_at"], found["acked_on"] = "acked", time.time(), conn.id
                state["stats"]["callbacks_acked"] += 1

    async def _system_pings(self, conn: Conn) -> None:
        while self.limits["ping_interval"] > 0 and not conn.ws.closed:
            await asyncio.sleep(self.limits["ping_interval"])   # the platform's own ping period
            await self._send(conn, self.frame("SYSTEM", "ping", {"opaque": secrets.token_hex(4)},
                                              message_id=f"ping-{uuid.uuid4()}"))

    async def _send(self, conn: Conn, frame: dict) -> bool:
        if conn.silent or conn.ws.closed:
            return False
        try:
            async with conn.lock:
                await conn.ws.send_str(json.dumps(frame, ensure_ascii=False))
            return True
        except (ConnectionError, RuntimeError):
            return False

    async def deliver_forever(self) -> None:
        """Send each due callback to an open connection subscribed to its topic, in turn."""
        turn = 0
        while True:
            now = time.time()
            with self._lock:
                due = [cb for cb in self.state["callbacks"] if cb["status"] == "pending" and cb["due"] <= now]
                open_conns = [c for c in self.sockets.values() if BOT_TOPIC in c.topics and not c.draining]
            for cb in due:
                if not open_conns:
                    break
                conn = open_conns[turn % len(open_conns)]
                turn += 1
                message_id = str(uuid.uuid4())
                with self.mutate() as state:
                    live = next(c for c in state["callbacks"] if c["id"] == cb["id"])
                    live["attempts"].append({"message_id": message_id, "connection": conn.id, "at": now})
                    live["due"] = now + self.limits["ack_timeout"]
                    state["stats"]["callbacks_sent"] += 1
                await self._send(conn, self.frame("CALLBACK", BOT_TOPIC, cb["data"], message_id=message_id))
            await self.wait_for_change(0.1)

    # -- faults (run in the server loop)
    async def disconnect_sockets(self, close_after: float = 0.5) -> list[int]:
        loop = asyncio.get_running_loop()
        targets = [c for c in list(self.sockets.values()) if not c.draining]
        for conn in targets:
            conn.draining = True
            await self._send(conn, self.frame("SYSTEM", "disconnect", {"reason": "server restarting"}))
            loop.call_later(close_after, lambda c=conn: loop.create_task(c.ws.close(code=1000)))
        return [c.id for c in targets]

    async def send_raw(self, text: str) -> list[int]:
        """``text`` as it is, as a frame on every open connection (a frame no app can answer, in a test)."""
        targets = list(self.sockets.values())
        for conn in targets:
            async with conn.lock:
                await conn.ws.send_str(text)
        return [c.id for c in targets]

    async def drop_sockets(self) -> list[int]:
        targets = list(self.sockets.values())
        for conn in targets:
            if conn.transport is not None:
                conn.transport.close()
        return [c.id for c in targets]

    async def silence_sockets(self) -> list[int]:
        for conn in self.sockets.values():
            conn.silent = True
        return list(self.sockets)

    def _wake(self) -> None:
        with self.mutate():
            pass
