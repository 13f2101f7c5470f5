"""Mattermost's WebSocket event stream (``/api/v4/websocket``), as the API reference describes it.

Opening: the client connects, then authenticates with the ``authentication_challenge`` action
``{"seq": 1, "action": "authentication_challenge", "data": {"token": ...}}``; the server answers
``{"status": "OK", "seq_reply": 1}`` (``"FAIL"`` with an ``error`` for a bad token) and sends the ``hello`` event.
The token goes in the first frame, never in the URL, so no proxy log holds it.

Frames from the server are events ``{"event", "data", "broadcast", "seq"}`` (``seq`` counts the events of this
connection from 0, the ``hello``) or replies ``{"status", "seq_reply"}`` to the client's actions. A ``seq`` that
skips a number means the server dropped events for this connection (its send queue overflowed): the caller is told,
and fetches what it missed through the REST API. Client actions (``user_typing``) carry the client's own ``seq``.

Liveness: Mattermost sends no heartbeat of its own at the application level; the link sends WebSocket pings every
``ping_interval_s`` (aiohttp's ``heartbeat``: no pong within half of it closes the connection) with ``autoping``
off, so that each pong and each ping of the server's is seen here and counted as the connection's proof of life
(``alive``, actors/adapters/liveness.py), as every event is.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Callable, Optional

import aiohttp

from actors.adapters.errors import PermanentError, RetryableError

HELLO_TIMEOUT_S = 15.0
MAX_FRAME_BYTES = 4 << 20      # a frame over this closes the connection (a post is at most ~64 KiB of runes)
CLOSED = (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR)


@dataclass(frozen=True)
class Event:
    name: str
    data: Any
    broadcast: Any
    seq: Optional[int]
    gap: bool          # events before this one were lost on the server's side (a ``seq`` skipped)


def socket_url(base_url: str) -> str:
    """``https://chat.example.com`` -> ``wss://chat.example.com/api/v4/websocket``."""
    base = base_url.rstrip("/")
    for plain, secure in (("http://", "ws://"), ("https://", "wss://")):
        if base.startswith(plain):
            base = secure + base[len(plain):]
    return base + "/api/v4/websocket"


class EventStream:
    """One authenticated connection. ``alive()`` is called on every frame, pongs included."""

    def __init__(self, base_url: str, token: str, ping_interval_s: float, alive: Callable[[], None]):
        self.url, self._token = socket_url(base_url), token
        self.ping_interval_s, self.alive = ping_interval_s, alive
        self._http: Optional[aiohttp.ClientSession] = None
        self._ws: Optional[aiohttp.ClientWebSocketResponse] = None
        self._action_seq = 0
        self._next_event_seq = 0
        self.connection_id = ""

    @property
    def open(self) -> bool:
        return self._ws is not None and not self._ws.closed

    async def connect(self) -> None:
        """Connect, authenticate, and wait for ``hello`` (RetryableError if it does not come)."""
        self._http = aiohttp.ClientSession()
        try:
            self._ws = await self._http.ws_connect(self.url, heartbeat=self.ping_interval_s, autoping=False,
                                                   max_msg_size=MAX_FRAME_BYTES)
        except aiohttp.WSServerHandshakeError as exc:
            await self.close()
            if exc.status in (401, 403):
                raise PermanentError(f"the WebSocket was refused: HTTP {exc.status}", method="websocket") from None
            raise RetryableError(f"the WebSocket was refused: HTTP {exc.status}", method="websocket") from None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            await self.close()
            raise RetryableError(f"WebSocket: {type(exc).__name__}", method="websocket") from None
        try:
            challenge = await self.act("authentication_challenge", {"token": self._token})
            await asyncio.wait_for(self._greeted(challenge), HELLO_TIMEOUT_S)
        except asyncio.TimeoutError:
            await self.close()
            raise RetryableError("no hello within the timeout", method="websocket") from None
        except BaseException:
            await self.close()
            raise

    async def _greeted(self, challenge: int) -> None:
        """The challenge's OK and the ``hello`` event, in either order."""
        authenticated = hello = False
        while not (authenticated and hello):
            frame = await self._frame()
            if frame is None:
                raise RetryableError("the connection closed before hello", method="websocket")
            if frame.get("seq_reply") == challenge:
                if frame.get("status") != "OK":
                    error = frame.get("error") if isinstance(frame.get("error"), dict) else {}
                    raise PermanentError(f"authentication refused: {error.get('id') or frame.get('status')}",
                                         method="websocket")
                authenticated = True
            elif frame.get("event") == "hello":
                hello = True
                data = frame.get("data") if isinstance(frame.get("data"), dict) else {}
                self.connection_id = str(data.get("connection_id") or "")
                self._next_event_seq = (frame["seq"] + 1) if isinstance(frame.get("seq"), int) else 1

    async def act(self, action: str, data: dict) -> int:
        """Send a client action; its ``seq`` (the server's reply names it)."""
        self._action_seq += 1
        if self._ws is None:
            raise RetryableError("not connected", method="websocket")
        try:
            await self._ws.send_str(json.dumps({"seq": self._action_seq, "action": action, "data": data}))
        except (ConnectionError, RuntimeError, aiohttp.ClientError) as exc:
            raise RetryableError(f"WebSocket send: {type(exc).__name__}", method="websocket") from None
        return self._action_seq

    async def next_event(self) -> Event:
        """The next event (action replies are read and passed over); raises RetryableError once the connection
        is gone."""
        while True:
            frame = await self._frame()
            if frame is None:
                code = self._ws.close_code if self._ws is not None else None
                raise RetryableError(f"the event stream closed (code {code})", method="websocket")
            if not isinstance(frame.get("event"), str):
                continue           # a reply to one of our actions (typing): nothing to do
            seq = frame.get("seq") if isinstance(frame.get("seq"), int) else None
            gap = seq is not None and seq > self._next_event_seq
            if seq is not None:
                self._next_event_seq = max(self._next_event_seq, seq + 1)
            return Event(frame["event"], frame.get("data"), frame.get("broadcast"), seq, gap)

    async def _frame(self) -> Optional[dict]:
        """The next JSON object from the server; None once the connection is closed. Pings and pongs are proof
        of life (a ping is answered here: autoping is off so that it is seen)."""
        ws = self._ws
        if ws is None:
            return None
        while True:
            message = await ws.receive()
            if message.type in CLOSED:
                return None
            self.alive()
            if message.type == aiohttp.WSMsgType.PING:
                await ws.pong(message.data)
                continue
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            try:
                frame = json.loads(message.data)
            except (ValueError, RecursionError):
                continue           # Mattermost sends only JSON; a garbled frame is skipped, the next decides
            if isinstance(frame, dict):
                return frame

    async def close(self) -> None:
        ws, self._ws = self._ws, None
        http, self._http = self._http, None
        if ws is not None:
            await ws.close()
        if http is not None:
            await http.close()
