"""Socket Mode: apps.connections.open, the WebSocket, envelopes, acknowledgements, redelivery, disconnects, pings.

* ``apps.connections.open`` (app-level ``xapp-`` token) answers ``{"ok": true, "url": "ws://…/link/?ticket=…"}``;
  a ticket opens one connection (a used or unknown one is refused with HTTP 401). ``&debug_reconnects=true``
  makes hello announce 360 s instead of 3600 s, as Slack's does (the fake never closes a socket on its own).
* On connecting the fake sends ``{"type": "hello", "num_connections", "debug_info": {"host", "started",
  "build_number", "approximate_connection_time"}, "connection_info": {"app_id"}}``, then events as envelopes:
  ``{"envelope_id", "type": "events_api", "payload": <event_callback>, "accepts_response_payload": false,
  "retry_attempt", "retry_reason"}``. With several sockets open each envelope goes to one of them (in turn).
* The app acknowledges with ``{"envelope_id": …}`` (a ``payload`` may ride along, ignored). An envelope not
  acknowledged within ``ack_timeout`` (3 s) is sent again in a new envelope, ``retry_attempt`` + 1 and
  ``retry_reason: "timeout"``, following the schedule in delivery.py (the rules both transports share).
* While no socket is connected events wait (``offline_delivery: "queue"``); with ``"spend"`` a due delivery
  with no socket is used up, as Slack's are, so an app that was away sees only the later retries, or nothing.
* ``disconnect(reason)`` sends ``{"type": "disconnect", "reason": "warning"|"refresh_requested"|
  "link_disabled", "debug_info": {"host"}}`` and closes the socket ``close_after`` seconds later (by default 10
  after a warning, 5 after a refresh request, times ``time_scale``; at once for link_disabled); no envelope goes
  to a socket told to disconnect. An eleventh socket is told ``too_many_websockets`` and closed.
* Pings: the app's WebSocket pings are answered with a pong carrying the same data; the fake pings every
  ``ping_interval`` seconds. ``silence()`` turns open sockets into half-open ones: nothing sent, nothing heard.
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Optional

from aiohttp import WSMsgType, web

from tests.fakes.harness import ping_forever

HOST = "applink-fake-1"
CLOSE_AFTER = {"warning": 10.0, "refresh_requested": 5.0, "link_disabled": 0.0}


class SocketConn:
    """One open WebSocket (lives only in the server loop; the state holds its log entry)."""

    def __init__(self, conn_id: int, ws: web.WebSocketResponse, transport):
        self.id, self.ws, self.transport = conn_id, ws, transport
        self.draining = False  # told to disconnect: no more envelopes
        self.silent = False  # half-open: nothing sent, nothing read
        self.lock = asyncio.Lock()


class SocketModeMethods:
    """Mixin for FakeSlack: needs ``self.identity``, ``self.limits``, ``self.sockets``, ``mutate``, ``read``."""

    def method_apps_connections_open(self, state: dict, params: dict) -> dict:
        ticket = str(uuid.uuid4())
        state["tickets"][ticket] = {"issued_at": time.time(), "used": False}
        return {"url": f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}&app_id={self.identity['app_id']}"}

    # -- the WebSocket
    async def handle_link(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        with self.mutate() as state:
            info = state["tickets"].get(ticket)
            if info is None or info["used"]:
                state["stats"]["connections_refused"] += 1
                return web.Response(status=401, text="invalid or used ticket")
            info["used"] = True
        ws = web.WebSocketResponse(autoping=False, max_msg_size=0)
        await ws.prepare(request)
        if len(self.sockets) >= self.limits["max_connections"]:
            await ws.send_str(json.dumps({"type": "disconnect", "reason": "too_many_websockets",
                                          "debug_info": {"host": HOST}}))
            await ws.close()
            return ws
        with self.mutate() as state:
            state["next_connection"] += 1
            conn = SocketConn(state["next_connection"], ws, request.transport)
            state["connections"].append({"id": conn.id, "opened_at": time.time(), "closed_at": None,
                                         "ticket": ticket, "close_code": None})
            state["stats"]["connections_opened"] += 1
        connection_time = 360 if request.query.get("debug_reconnects") == "true" else 3600
        await self._send(conn, {"type": "hello", "num_connections": len(self.sockets) + 1,
                                "debug_info": {"host": HOST, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                                               "build_number": 1, "approximate_connection_time": connection_time},
                                "connection_info": {"app_id": self.identity["app_id"]}})
        self.sockets[conn.id] = conn
        self._wake()
        pinger = asyncio.get_running_loop().create_task(self._ping_forever(conn))
        try:
            await self._read_forever(conn)
        finally:
            pinger.cancel()
            self.sockets.pop(conn.id, None)
            with self.mutate() as state:
                entry = next((c for c in state["connections"] if c["id"] == conn.id), None)
                if entry is not None:
                    entry["closed_at"], entry["close_code"] = time.time(), ws.close_code
        return ws

    async def _read_forever(self, conn: SocketConn) -> None:
        while True:
            msg = await conn.ws.receive()
            if msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return
            if conn.silent:
                continue
            if msg.type == WSMsgType.PING:
                self._count("pings_received")
                await conn.ws.pong(msg.data)
            elif msg.type == WSMsgType.PONG:
                self._count("pongs_received")
            elif msg.type == WSMsgType.TEXT:
                self._on_text(conn, msg.data)

    async def _ping_forever(self, conn: SocketConn) -> None:
        await ping_forever(conn.ws, self.limits["ping_interval"] * self.limits["time_scale"], b"fake-slack-ping",
                           lambda: conn.silent)

    def _on_text(self, conn: SocketConn, data: str) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            message = None
        with self.mutate() as state:
            if not isinstance(message, dict) or not message.get("envelope_id"):
                state["stats"]["unknown_messages"] += 1
                return
            self._settle(state, conn, str(message["envelope_id"]))

    def _settle(self, state: dict, conn: SocketConn, envelope_id: str) -> None:
        found = next(((ev, at) for ev in reversed(state["events"]) for at in ev["attempts"]
                      if at["envelope_id"] == envelope_id), None)
        if found is None:
            state["stats"]["unknown_acks"] += 1
            return
        self.settle(state, *found, via=conn.id)

    async def _send(self, conn: SocketConn, message: dict) -> bool:
        if conn.silent or conn.ws.closed:
            return False
        try:
            async with conn.lock:
                await conn.ws.send_str(json.dumps(message))
            return True
        except (ConnectionError, RuntimeError):
            return False

    # -- disconnects and broken connections (run in the server loop)
    async def disconnect_sockets(self, reason: str, connection: Optional[int] = None,
                                 close_after: Optional[float] = None) -> list[int]:
        if reason not in CLOSE_AFTER:
            raise ValueError(f"reason must be one of {sorted(CLOSE_AFTER)}, not {reason!r}")
        targets = [c for c in list(self.sockets.values())
                   if (c.id == connection if connection is not None else not c.draining)]
        delay = CLOSE_AFTER[reason] * self.limits["time_scale"] if close_after is None else float(close_after)
        loop = asyncio.get_running_loop()
        for conn in targets:
            conn.draining = True
            await self._send(conn, {"type": "disconnect", "reason": reason, "debug_info": {"host": HOST}})
            self._count("disconnects_sent")
            loop.call_later(delay, lambda c=conn: loop.create_task(c.ws.close(code=1000)))
        return [c.id for c in targets]

    async def drop_sockets(self, connection: Optional[int] = None) -> list[int]:
        """Cut the TCP connection without a close frame: the app sees the socket die, as on a network failure."""
        targets = [c for c in list(self.sockets.values()) if connection is None or c.id == connection]
        for conn in targets:
            if conn.transport is not None:
                conn.transport.close()
        return [c.id for c in targets]

    async def silence_sockets(self, connection: Optional[int] = None) -> list[int]:
        targets = [c for c in self.sockets.values() if connection is None or c.id == connection]
        for conn in targets:
            conn.silent = True
        return [c.id for c in targets]

    async def close_all_sockets(self) -> None:
        for conn in list(self.sockets.values()):
            await conn.ws.close(code=1001)

    def _count(self, stat: str) -> None:
        with self._lock:
            self.state["stats"][stat] += 1

    def _wake(self) -> None:
        with self.mutate():
            pass
