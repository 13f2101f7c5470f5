"""A gateway WebSocket of the protocol Discord defined (v10, JSON) and QQ's bot gateway follows: one bot's presence
across connections, kept by ``GatewayLink.serve``. Discord uses it as it is (its close codes and URL query are this
module's defaults); QQ subclasses it for its token, URL and close codes (actors/adapters/qq/gateway.py).

    connect -> Hello (op 10: heartbeat_interval) -> Identify (op 2: token, intents), or Resume (op 6: session id
    and the last sequence number handled) when a session is known -> dispatches (op 0, numbered ``s``)

Heartbeats (op 1 with the last ``s``) go every ``heartbeat_interval``, the first after a random fraction of it (so
a fleet reconnecting at once does not beat in step). A heartbeat due while the previous one is unacknowledged (no
op 11) means a zombie connection: it is closed with 4000 (any code but 1000/1001 keeps the session) and resumed. The
gateway's own op 1 is answered at once.

After a connection ends: op 7 Reconnect, a drop, a zombie, or any close code Discord allows to retry -> connect
again (to READY's ``resume_gateway_url``) and Resume, which replays what was missed; op 9 Invalid Session with
``d: false`` (or a refused Resume) -> forget the session, wait 1-5 s as Discord asks, and Identify afresh; with
``d: true`` -> Resume. Close codes that no retry can cure (4004 authentication failed, 4010-4014: shard, sharding,
API version, invalid or disallowed intents) raise ``PermanentError``: the adapter reports the refused configuration.

``position()`` / ``restore()`` carry (session id, seq, resume URL) through the adapter's committed offset, so a
restarted adapter resumes the session its previous life had and Discord replays what came while it was dead.
The seq advances only after ``deliver`` returned for a dispatch: what is resumed from was handled.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from typing import Any, Awaitable, Callable, Optional

import aiohttp
from yarl import URL

from actors.adapters.errors import PermanentError, RetryableError
from common.backoff import backoff_s

DISPATCH, HEARTBEAT, IDENTIFY, RESUME, RECONNECT, INVALID_SESSION, HELLO, HEARTBEAT_ACK = 0, 1, 2, 6, 7, 9, 10, 11
NOT_RETRYABLE = {4004: "authentication failed (the bot token is wrong or was reset)",
                 4010: "invalid shard", 4011: "sharding required",
                 4012: "invalid API version",
                 4013: "invalid intents", 4014: "disallowed intents (enable them in the Developer Portal: "
                                                "Bot > Privileged Gateway Intents)"}
INVALID_SEQ = 4007
KEEP_SESSION_CODE = 4000         # the close code this client uses: the session stays resumable
INVALID_SESSION_WAIT_S = (1.0, 5.0)
HELLO_TIMEOUT_S = 20.0
API_QUERY = {"v": "10", "encoding": "json"}

Deliver = Callable[[str, Any, int], Awaitable[None]]
Say = Callable[..., None]
Report = Callable[..., None]     # report(up, error="", attempt=0)


def gateway_address(base: str) -> str:
    """The URL to open: Discord's (``wss://gateway.discord.gg``) with the version and encoding asked for."""
    url = URL(base)
    return str((url if url.path else url.with_path("/")).update_query(API_QUERY))


def heartbeat_interval_s(hello: dict) -> Optional[float]:
    """The interval an op 10 Hello gives, in seconds; None if the payload is no Hello with a positive one."""
    data = hello.get("d") if hello.get("op") == HELLO else None
    interval = data.get("heartbeat_interval") if isinstance(data, dict) else None
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
        return None
    return interval / 1000.0


class _Zombie(Exception):
    """A heartbeat went unacknowledged for a whole interval."""


class GatewayLink:
    """``GatewayLink(token, intents, url, say)``; ``await serve(http, deliver)`` runs until cancelled or until a
    close code says the configuration is refused (PermanentError). ``deliver(name, data, seq)`` is awaited for each
    dispatch in order."""

    def __init__(self, token: str, intents: int, url: str, say: Say, name: str = "discord",
                 reidentify_wait_s: tuple[float, float] = INVALID_SESSION_WAIT_S,
                 report: Report = lambda up, error="", attempt=0: None, alive: Callable[[], None] = lambda: None):
        self._token, self.intents, self.url, self.say, self.name = token, intents, url, say, name
        self.reidentify_wait_s = reidentify_wait_s
        self._alive = alive           # each frame received: the connection's proof of life (liveness.py)
        self._report = report         # down: a connection that never got READY or RESUMED; up: the next that did
        self._reported_down = False
        self.session_id: Optional[str] = None
        self.seq: Optional[int] = None
        self.resume_url: Optional[str] = None
        self.identifies = self.resumes = 0        # sent by this life (what the tests and `status` can count)
        self.established = False                  # the current connection got READY or RESUMED
        self._acked = True

    # -- the resumable position
    def position(self) -> Optional[dict]:
        if self.session_id is None:
            return None
        return {"session_id": self.session_id, "seq": self.seq, "resume_url": self.resume_url}

    def restore(self, offset: Any) -> None:
        if isinstance(offset, dict) and isinstance(offset.get("session_id"), str) and \
                isinstance(offset.get("seq"), int):
            self.session_id, self.seq = offset["session_id"], offset["seq"]
            self.resume_url = offset.get("resume_url") if isinstance(offset.get("resume_url"), str) else None

    def forget(self) -> None:
        self.session_id = self.seq = self.resume_url = None

    def address(self, base: str) -> str:
        """The URL a connection opens (a gateway of the same protocol elsewhere, QQ's, names its own)."""
        return gateway_address(base)

    # -- the connections
    async def serve(self, http: aiohttp.ClientSession, deliver: Deliver) -> None:
        failures = 0
        while True:
            try:
                outcome, established = await self._connection(http, deliver)
            except RetryableError as exc:
                outcome, established = f"failed ({exc})", False
            failures = 0 if established else failures + 1
            if not established:   # a reconnect that resumes at once (op 7, a drop) is no outage worth showing
                self._reported_down = True
                self._report(False, f"gateway: {outcome}", failures)
            if outcome == "identify":
                delay = random.uniform(*self.reidentify_wait_s)
            else:
                delay = 0.0 if established else backoff_s(failures, 0.5, 30.0)
            self.say(logging.INFO if established else logging.WARNING,
                      "%s: gateway connection ended (%s); %s in %.2fs", self.name, outcome,
                      "resuming" if self.session_id else "identifying", delay)
            await asyncio.sleep(delay)

    async def _connection(self, http: aiohttp.ClientSession, deliver: Deliver) -> tuple[str, bool]:
        """One WebSocket from connect to close: (how it ended, whether it got as far as READY or RESUMED)."""
        base = self.resume_url if self.session_id and self.resume_url else self.url
        try:
            ws = await http.ws_connect(self.address(base), autoclose=False, autoping=True, max_msg_size=0)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise RetryableError(f"gateway connect failed: {type(exc).__name__}: {exc}") from None
        self.established = False
        reader = beat = None
        try:
            hello = await self._receive(ws, HELLO_TIMEOUT_S)
            if hello is None:   # closed before Hello: an API version refused (4012) is no reason to retry
                return self._closed(ws.close_code), False
            interval = heartbeat_interval_s(hello)
            if interval is None:
                return f"no Hello but op {hello.get('op')!r}", False
            await self._open_session(ws)
            self._acked = True
            reader = asyncio.ensure_future(self._read(ws, deliver))
            beat = asyncio.ensure_future(self._heartbeat(ws, interval))
            await asyncio.wait({reader, beat}, return_when=asyncio.FIRST_COMPLETED)
            if reader.done():
                return reader.result(), self.established
            error = beat.exception()
            why = "zombie: a heartbeat was not acknowledged" if isinstance(error, _Zombie) else \
                f"heartbeat failed: {error!r}"
            return why, self.established
        finally:
            for task in (reader, beat):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(code=KEEP_SESSION_CODE), 2.0)

    async def _open_session(self, ws) -> None:
        if self.session_id is not None:
            self.resumes += 1
            await self._send(ws, RESUME, {"token": self._token, "session_id": self.session_id, "seq": self.seq})
            return
        self.identifies += 1
        await self._send(ws, IDENTIFY, {"token": self._token, "intents": self.intents,
                                        "properties": {"os": "linux", "browser": "agent-gateway",
                                                       "device": "agent-gateway"}})

    async def _read(self, ws, deliver: Deliver) -> str:
        while True:
            payload = await self._receive(ws, None)
            if payload is None:
                return self._closed(ws.close_code)
            self._alive()   # a dispatch, a heartbeat's ACK (every heartbeat_interval), any frame
            op, data = payload.get("op"), payload.get("d")
            if op == DISPATCH:
                name, seq = payload.get("t"), payload.get("s")
                if name == "READY" and isinstance(data, dict):
                    self.session_id, self.resume_url = data.get("session_id"), data.get("resume_gateway_url")
                if name in ("READY", "RESUMED"):
                    self.established = True
                    if self._reported_down:
                        self._reported_down = False
                        self._report(True)
                await deliver(name, data, seq)
                if isinstance(seq, int):
                    self.seq = seq
            elif op == HEARTBEAT:
                await self._send(ws, HEARTBEAT, self.seq)
            elif op == HEARTBEAT_ACK:
                self._acked = True
            elif op == RECONNECT:
                return "op 7 reconnect"
            elif op == INVALID_SESSION:
                if data is True and self.session_id is not None:
                    return "op 9 invalid session (resumable)"
                self.forget()
                return "identify"

    def _closed(self, code: Optional[int]) -> str:
        if code in NOT_RETRYABLE:
            raise PermanentError(f"the gateway closed the connection with {code}: {NOT_RETRYABLE[code]}",
                                 method="gateway", status=code)
        if code == INVALID_SEQ:
            self.forget()
        return f"closed with {code}" if code is not None else "dropped"

    async def _heartbeat(self, ws, interval: float) -> None:
        await asyncio.sleep(interval * random.random())
        while True:
            if not self._acked:
                raise _Zombie()
            self._acked = False
            await self._send(ws, HEARTBEAT, self.seq)
            await asyncio.sleep(interval)

    async def _send(self, ws, op: int, data: Any) -> None:
        try:
            await ws.send_str(json.dumps({"op": op, "d": data}, separators=(",", ":")))
        except (ConnectionError, RuntimeError, aiohttp.ClientError):
            pass   # the connection is going; the reader sees its end

    async def _receive(self, ws, timeout: Optional[float]) -> Optional[dict]:
        """The next JSON payload, or None once the connection is closed."""
        while True:
            try:
                message = await ws.receive(timeout=timeout)
            except asyncio.TimeoutError:
                return None
            if message.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                try:
                    payload = json.loads(message.data)
                except ValueError:
                    payload = None
                if isinstance(payload, dict):
                    return payload
                # A garbled frame: the gateway sends none. Nothing of it can be read, so it is said and skipped;
                # the frames after it are taken as usual.
                self.say(logging.WARNING, "%s: the gateway sent a frame that is no JSON object (%d bytes); skipped",
                         self.name, len(message.data or ""))
            elif message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED,
                                  aiohttp.WSMsgType.ERROR):
                return None
