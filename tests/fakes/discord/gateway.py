"""The gateway WebSocket: Hello, heartbeats and their ACKs, Identify and READY, sequence numbers, Resume with the
replay of missed dispatches, Reconnect (op 7) and Invalid Session (op 9), and the close codes.

Sessions live in the fake's state (so a standalone fake restarted from its state file can still be resumed);
connections live in memory. Every dispatch is rendered per session (intents decide which sessions get it and
whether they may read message content), numbered with that session's next ``s``, kept in its replay buffer and,
when a connection is attached, queued to that connection's writer, so the order on the wire is the order of ``s``.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
import uuid
import zlib
from collections import deque
from typing import Callable, Optional

from aiohttp import WSMsgType, web

from tests.fakes.discord import protocol as p
from tests.fakes.discord.objects import guild_object, message_object

GATEWAY_LOG_LIMIT = 2000


class Connection:
    """One gateway WebSocket. ``send`` and ``close`` may be called from any thread: frames go through a queue
    that one writer task drains, so they leave in the order they were queued."""

    def __init__(self, conn_id: int, ws: web.WebSocketResponse, request: web.Request, via: str, compress: bool):
        self.id, self.ws, self.request, self.via = conn_id, ws, request, via
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue = asyncio.Queue()
        self.compressor = zlib.compressobj() if compress else None
        self.session_id: Optional[str] = None
        self.last_heartbeat = self.loop.time()
        self.received: deque = deque()  # arrival times, for the 120-per-60-s send limit
        self.server_close_code: Optional[int] = None  # set once the fake decided to close
        self.closing = False

    def send(self, payload: dict) -> None:
        text = json.dumps(payload, separators=(",", ":"))
        self.loop.call_soon_threadsafe(self.queue.put_nowait, ("text", text))

    def close(self, code: Optional[int], reason: str = "") -> None:
        """Close with ``code``, or (code None) cut the TCP connection without a close frame."""
        if self.closing:
            return
        self.closing, self.server_close_code = True, code
        item = ("drop", None) if code is None else ("close", (code, reason or p.CLOSE_CODES.get(code, ("",))[0]))
        self.loop.call_soon_threadsafe(self.queue.put_nowait, item)

    async def write_loop(self) -> None:
        try:
            while True:
                kind, data = await self.queue.get()
                if kind == "text":
                    if self.compressor is not None:  # zlib-stream: one shared context, each frame sync-flushed
                        await self.ws.send_bytes(self.compressor.compress(data.encode())
                                                 + self.compressor.flush(zlib.Z_SYNC_FLUSH))
                    else:
                        await self.ws.send_str(data)
                elif kind == "stop":  # the client closed first
                    return
                elif kind == "close":
                    await self.ws.close(code=data[0], message=data[1].encode())
                    return
                else:
                    if self.request.transport is not None:
                        self.request.transport.close()
                    return
        except (ConnectionError, RuntimeError):  # the peer went away first
            return


class GatewayMethods:
    """Mixin for FakeDiscord: the WebSocket handler, sessions, dispatch fan-out and the gateway controls."""

    def init_gateway(self) -> None:
        self.connections: dict[int, Connection] = {}
        self.attached: dict[str, Connection] = {}  # session id -> its live connection
        self._conn_ids = itertools.count(1)

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    @property
    def resume_gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway/resume"

    def add_gateway_routes(self, app: web.Application) -> None:
        async def gateway(request: web.Request) -> web.StreamResponse:
            return await self._serve_gateway(request, "url")

        async def resume_gateway(request: web.Request) -> web.StreamResponse:
            return await self._serve_gateway(request, "resume_gateway_url")

        app.router.add_get("/gateway", gateway)
        app.router.add_get("/gateway/resume", resume_gateway)

    # -- the connection
    async def _serve_gateway(self, request: web.Request, via: str) -> web.StreamResponse:
        encoding, compress = request.query.get("encoding", "json"), request.query.get("compress")
        if encoding != "json" or compress not in (None, "zlib-stream"):
            return web.json_response({"message": "the fake speaks encoding=json with compress absent or "
                                                  "zlib-stream only", "code": 0}, status=400)
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        conn = Connection(next(self._conn_ids), ws, request, via, compress == "zlib-stream")
        with self.mutate() as state:
            self.connections[conn.id] = conn
            state["stats"]["connections"] += 1
            self._log(state, conn, "connect", via=via, query=dict(request.query))
        writer = asyncio.get_running_loop().create_task(conn.write_loop())
        watchdog = None
        try:
            version = request.query.get("v", "")
            if not version.isdigit() or int(version) not in p.API_VERSIONS:
                self._close(conn, 4012)
            else:
                conn.send(self._frame(p.HELLO, {"heartbeat_interval": int(self.limits["heartbeat_interval"]),
                                                "_trace": ["fake-discord-gateway"]}))
                watchdog = asyncio.get_running_loop().create_task(self._watch_heartbeats(conn))
                async for message in ws:
                    if message.type in (WSMsgType.TEXT, WSMsgType.BINARY):  # JSON comes in either kind
                        self._receive(conn, message.data)
                    if conn.closing:
                        break
            if not conn.closing:
                conn.queue.put_nowait(("stop", None))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(writer), timeout=5)
        finally:
            for task in (watchdog, writer):
                if task is not None and not task.done():
                    task.cancel()
            self._connection_ended(conn)
        return ws

    def _connection_ended(self, conn: Connection) -> None:
        client_code = None if conn.server_close_code is not None or conn.closing else conn.ws.close_code
        with self.mutate() as state:
            self.connections.pop(conn.id, None)
            session = state["sessions"].get(conn.session_id) if conn.session_id else None
            if session is not None and self.attached.get(conn.session_id) is conn:
                del self.attached[conn.session_id]
                session["connected"], session["disconnected_at"] = False, time.time()
                if client_code in p.SESSION_ENDING_CLIENT_CODES:
                    self._invalidate(session)
            self._log(state, conn, "closed", code=conn.server_close_code or client_code,
                      by="fake" if conn.server_close_code is not None or conn.closing else "client")

    async def _watch_heartbeats(self, conn: Connection) -> None:
        """A client that misses its heartbeat is closed with 4009; its session stays resumable."""
        while not conn.closing:
            interval = self.limits["heartbeat_interval"] / 1000.0
            delay = conn.last_heartbeat + interval * self.limits["heartbeat_timeout_factor"] - conn.loop.time()
            if delay <= 0:
                self._close(conn, 4009, "Session timed out: no heartbeat")
                return
            await asyncio.sleep(delay)  # the fake's own timer, not a test's synchronisation

    def _close(self, conn: Connection, code: Optional[int], reason: str = "") -> None:
        with self.mutate() as state:
            if not conn.closing:
                key = str(code) if code is not None else "dropped"
                state["stats"]["closes"][key] = state["stats"]["closes"].get(key, 0) + 1
                self._log(state, conn, "close" if code is not None else "drop", code=code, reason=reason)
            conn.close(code, reason)

    # -- what the client sends
    def _receive(self, conn: Connection, raw) -> None:
        if len(raw if isinstance(raw, bytes) else raw.encode()) > p.MAX_SEND_PAYLOAD:
            return self._close(conn, 4002, "payload over 4096 bytes")
        now, window = conn.loop.time(), self.limits["gateway_send_window"] * self.limits["time_scale"]
        conn.received.append(now)
        while conn.received and conn.received[0] < now - window:
            conn.received.popleft()
        if len(conn.received) > self.limits["gateway_send_limit"]:
            return self._close(conn, 4008)
        try:
            payload = json.loads(raw)
        except ValueError:
            return self._close(conn, 4002)
        if not isinstance(payload, dict) or not isinstance(payload.get("op"), int):
            return self._close(conn, 4002)
        op, data = payload["op"], payload.get("d")
        with self.mutate() as state:
            self._log(state, conn, "receive", op=op)
            if op == p.HEARTBEAT:
                return self._heartbeat(state, conn, data)
            if op == p.IDENTIFY:
                return self._identify(state, conn, data)
            if op == p.RESUME:
                return self._resume(state, conn, data)
        if op in p.IGNORED_SEND_OPS:
            return None if conn.session_id else self._close(conn, 4003)
        return self._close(conn, 4001)

    def _heartbeat(self, state: dict, conn: Connection, data) -> None:
        if data is not None and (isinstance(data, bool) or not isinstance(data, int)):
            return self._close(conn, 4001, "heartbeat d must be the last sequence number or null")
        conn.last_heartbeat = conn.loop.time()
        state["stats"]["heartbeats"] += 1
        if self.limits["ack_heartbeats"]:
            conn.send(self._frame(p.HEARTBEAT_ACK, None))

    def _identify(self, state: dict, conn: Connection, data) -> None:
        if conn.session_id:
            return self._close(conn, 4005)
        if not isinstance(data, dict) or not isinstance(data.get("properties", {}), dict):
            return self._close(conn, 4002)
        if data.get("token") != self.token:
            return self._close(conn, 4004)
        intents = data.get("intents")
        if isinstance(intents, bool) or not isinstance(intents, int) or intents < 0 or intents & ~p.KNOWN_INTENT_BITS:
            return self._close(conn, 4013)
        if intents & p.PRIVILEGED_INTENTS & ~self.limits["privileged_intents"]:
            return self._close(conn, 4014)
        shard = data.get("shard", [0, 1])
        if (not isinstance(shard, list) or len(shard) != 2 or not all(isinstance(n, int) for n in shard)
                or not 0 <= shard[0] < shard[1]):
            return self._close(conn, 4010)
        if self.limits["sharding_required"] and shard[1] < 2:
            return self._close(conn, 4011)
        now = time.time()
        if now - state["last_identify_at"] < self.limits["identify_interval"] * self.limits["time_scale"]:
            state["stats"]["identifies_refused"] += 1
            self._log(state, conn, "invalid_session", resumable=False, reason="identify concurrency")
            return conn.send(self._frame(p.INVALID_SESSION, False))
        state["last_identify_at"] = now
        state["stats"]["identifies"] += 1
        session_id = uuid.uuid4().hex
        session = {"session_id": session_id, "seq": 0, "intents": intents, "shard": shard, "events": [],
                   "created_at": now, "connected": True, "disconnected_at": None, "invalidated": False,
                   "resumes": 0, "properties": data.get("properties", {})}
        state["sessions"][session_id] = session
        conn.session_id, self.attached[session_id] = session_id, conn
        self._log(state, conn, "identify", session_id=session_id, intents=intents, shard=shard)
        guilds = [g for g in state["guilds"].values() if self._shard_of(int(g["id"]), shard[1]) == shard[0]]
        ready = {"v": 10, "user": dict(state["users"][str(state["bot_id"])]),
                 "guilds": [{"id": g["id"], "unavailable": True} for g in guilds], "session_id": session_id,
                 "resume_gateway_url": self.resume_gateway_url, "session_type": "normal",
                 "application": {"id": str(state["bot_id"]), "flags": self.application_flags()},
                 "private_channels": [], "presences": [], "relationships": [], "guild_join_requests": [],
                 "user_settings": {}, "geo_ordered_rtc_regions": ["fake"], "_trace": ["fake-discord-session"]}
        if "shard" in data:
            ready["shard"] = shard
        self._emit(state, session, "READY", ready)
        if intents & p.INTENTS["GUILDS"]:
            for guild in guilds:
                self._emit(state, session, "GUILD_CREATE", guild_object(state, guild))

    def _resume(self, state: dict, conn: Connection, data) -> None:
        if conn.session_id:
            return self._close(conn, 4005)
        if not isinstance(data, dict):
            return self._close(conn, 4002)
        if data.get("token") != self.token:
            return self._close(conn, 4004)
        self.expire_sessions(state)
        session = state["sessions"].get(str(data.get("session_id")))
        seq = data.get("seq")
        if session is None or session["invalidated"]:
            state["stats"]["resumes_refused"] += 1
            self._log(state, conn, "invalid_session", resumable=False, reason="unknown or ended session")
            return conn.send(self._frame(p.INVALID_SESSION, False))
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= session["seq"]:
            return self._close(conn, 4007)
        missed = [event for event in session["events"] if event["s"] > seq]
        if seq < session["seq"] and (not missed or missed[0]["s"] != seq + 1):  # trimmed from the replay buffer
            state["stats"]["resumes_refused"] += 1
            self._log(state, conn, "invalid_session", resumable=False, reason="events no longer buffered")
            return conn.send(self._frame(p.INVALID_SESSION, False))
        previous = self.attached.get(session["session_id"])
        if previous is not None and previous is not conn:
            self._close(previous, 4000, "session resumed on another connection")
        conn.session_id, self.attached[session["session_id"]] = session["session_id"], conn
        session.update(connected=True, disconnected_at=None, resumes=session["resumes"] + 1)
        state["stats"]["resumes"] += 1
        self._log(state, conn, "resume", session_id=session["session_id"], seq=seq, replayed=len(missed))
        for event in missed:
            conn.send(event)
        self._emit(state, session, "RESUMED", {"_trace": ["fake-discord-session"]})

    # -- dispatches
    @staticmethod
    def _frame(op: int, data) -> dict:
        return {"op": op, "d": data, "s": None, "t": None}

    @staticmethod
    def _shard_of(guild_id: Optional[int], shards: int) -> int:
        return 0 if guild_id is None else (guild_id >> 22) % shards

    def _emit(self, state: dict, session: dict, name: str, data: dict) -> None:
        session["seq"] += 1
        event = {"op": p.DISPATCH, "d": data, "s": session["seq"], "t": name}
        session["events"].append(event)
        del session["events"][:-int(self.limits["resume_buffer"])]
        state["stats"]["dispatches"][name] = state["stats"]["dispatches"].get(name, 0) + 1
        conn = self.attached.get(session["session_id"])
        if conn is not None and not conn.closing:
            conn.send(event)

    def dispatch_event(self, state: dict, name: str, render: Callable[[dict], dict], *, guild_id: Optional[int],
                       intent: Optional[int]) -> None:
        """Send ``render(session)`` to every live session whose shard and intents ask for it (``intent`` None: an
        event every session gets, as INTERACTION_CREATE)."""
        self.expire_sessions(state)
        for session in state["sessions"].values():
            if session["invalidated"] or (intent is not None and not session["intents"] & intent):
                continue
            if self._shard_of(guild_id, session["shard"][1]) != session["shard"][0]:
                continue
            self._emit(state, session, name, render(session))

    def dispatch_message(self, state: dict, name: str, record: dict) -> None:
        intent = p.INTENTS["GUILD_MESSAGES"] if record["guild_id"] is not None else p.INTENTS["DIRECT_MESSAGES"]
        self.dispatch_event(state, name, lambda session: message_object(
            state, record, has_content_intent=bool(session["intents"] & p.INTENTS["MESSAGE_CONTENT"]),
            gateway=True), guild_id=record["guild_id"], intent=intent)

    def dispatch_deletion(self, state: dict, record: dict) -> None:
        data = {"id": str(record["id"]), "channel_id": str(record["channel_id"])}
        if record["guild_id"] is not None:
            data["guild_id"] = str(record["guild_id"])
        intent = p.INTENTS["GUILD_MESSAGES"] if record["guild_id"] is not None else p.INTENTS["DIRECT_MESSAGES"]
        self.dispatch_event(state, "MESSAGE_DELETE", lambda _: dict(data), guild_id=record["guild_id"],
                            intent=intent)

    def expire_sessions(self, state: dict) -> None:
        """A session left disconnected longer than ``session_timeout`` can no longer be resumed."""
        limit = self.limits["session_timeout"] * self.limits["time_scale"]
        for session in state["sessions"].values():
            gone = session["disconnected_at"]
            if not session["invalidated"] and gone is not None and time.time() - gone > limit:
                self._invalidate(session)

    @staticmethod
    def _invalidate(session: dict) -> None:
        session.update(invalidated=True, events=[])

    def _log(self, state: dict, conn: Optional[Connection], event: str, **details) -> None:
        entry = {"at": time.time(), "connection": conn.id if conn else None, "event": event,
                 "session_id": conn.session_id if conn else None, **details}
        state["gateway_log"].append(entry)
        del state["gateway_log"][:-GATEWAY_LOG_LIMIT]

    # -- controls (any thread)
    def _targets(self, session_id: Optional[str]) -> list[Connection]:
        with self._lock:
            if session_id is None:
                return [c for c in self.connections.values() if not c.closing]
            conn = self.attached.get(session_id)
            return [conn] if conn is not None and not conn.closing else []

    def drop_gateway(self, session_id: Optional[str] = None, code: Optional[int] = None) -> int:
        """Cut the live connections (of one session, or all): no close frame when ``code`` is None, else that
        close code. Sessions stay resumable. Returns how many connections were closed."""
        targets = self._targets(session_id)
        for conn in targets:
            self._close(conn, None if code is None else int(code), "closed by the test")
        return len(targets)

    def send_reconnect(self, session_id: Optional[str] = None) -> int:
        """Op 7; a connection still open ``reconnect_grace`` seconds later is closed with 4000."""
        return self._send_then_close(session_id, self._frame(p.RECONNECT, None), "reconnect")

    def send_invalid_session(self, session_id: Optional[str] = None, resumable: bool = False) -> int:
        """Op 9 with ``d=resumable``; when not resumable the session ends (a later Resume gets op 9 again)."""
        targets = self._targets(session_id)
        with self.mutate() as state:
            ids = {conn.session_id for conn in targets} | ({session_id} if session_id else set())
            for sid in ids:
                if sid in state["sessions"] and not resumable:
                    self._invalidate(state["sessions"][sid])
        return self._send_then_close(session_id, self._frame(p.INVALID_SESSION, bool(resumable)),
                                     "invalid_session", targets)

    def request_heartbeat(self, session_id: Optional[str] = None) -> int:
        """Op 1 from the gateway: the client must heartbeat at once."""
        targets = self._targets(session_id)
        for conn in targets:
            conn.send(self._frame(p.HEARTBEAT, None))
        return len(targets)

    def _send_then_close(self, session_id, frame: dict, event: str, targets=None) -> int:
        targets = self._targets(session_id) if targets is None else targets
        grace = self.limits["reconnect_grace"] * self.limits["time_scale"]
        with self.mutate() as state:
            for conn in targets:
                self._log(state, conn, event, d=frame["d"])
                conn.send(frame)
                conn.loop.call_soon_threadsafe(conn.loop.call_later, grace, self._close, conn, 4000,
                                               "did not reconnect")
        return len(targets)
