"""Socket Mode: events over a WebSocket the app opens itself (no public URL needed).

``apps.connections.open`` (app-level ``xapp-`` token) gives a one-use ``wss://`` URL; Slack greets each connection
with ``hello``, then sends envelopes ``{"envelope_id", "type": "events_api", "payload", "retry_attempt",
"retry_reason"}`` (``"type": "interactive"`` for a button press: its payload is ``block_actions``). The app
acknowledges one by sending ``{"envelope_id": ...}`` back; Slack sends it again (with
``retry_attempt`` + 1) if no acknowledgement comes within 3 s. ``SocketModeLink`` hands each envelope to the
adapter's ``handle`` coroutine and acknowledges it only when that returns, which the adapter makes mean "its inbox
row is committed": an event whose commit a kill -9 cut short is never acknowledged, and Slack delivers it again.

``{"type": "disconnect"}``: Slack is about to close this connection (``warning``, ``refresh_requested``: it sends
nothing more on it and closes it a few seconds later). The link opens the next connection first, then closes the
old one, so no event waits for a reconnect. ``link_disabled`` (Socket Mode was turned off for the app) is
permanent. Half-open connections are found by WebSocket pings (``[adapters.NAME] ping_interval_s``, by default
``HEARTBEAT_S``; a ping goes after that long with nothing received): no pong within half of it, the socket is
closed, and the adapter's intake reconnects with backoff. Each pong (and each ping of Slack's) is the connection's
proof of life (``alive``, actors/adapters/liveness.py): pings are answered here, not by aiohttp, so that they are
seen.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Awaitable, Callable, Optional

import aiohttp

from actors.adapters.errors import PermanentError, RetryableError
from actors.adapters.slack.client import SlackAPI

HEARTBEAT_S = 20.0          # the default of ping_interval_s
HELLO_TIMEOUT_S = 10.0
CLOSED = (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR)


class SocketModeLink:
    """One Socket Mode stream of ``api`` (holding the app-level token). ``say(level, text)`` logs."""

    def __init__(self, api: SlackAPI, say: Callable[[int, str], None], alive: Callable[[], None] = lambda: None,
                 ping_interval_s: float = HEARTBEAT_S):
        self.api, self.say, self.alive = api, say, alive
        self.ping_interval_s = ping_interval_s
        self._ws: Optional[aiohttp.ClientWebSocketResponse] = None
        self.connections = 0            # opened by this link (a disconnect warning adds one)

    async def open(self) -> None:
        """Open a connection and wait for its ``hello``."""
        self._ws = await self._connect()

    async def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            await ws.close()

    async def _connect(self) -> aiohttp.ClientWebSocketResponse:
        url = await self.api.open_connection()
        try:
            ws = await self.api.session().ws_connect(url, heartbeat=self.ping_interval_s, autoping=False,
                                                     max_msg_size=0)
        except aiohttp.WSServerHandshakeError as exc:   # a ticket refused (used, expired): ask for another
            raise RetryableError(f"the WebSocket was refused: HTTP {exc.status}", method="socket") from None
        except aiohttp.ClientError as exc:
            raise RetryableError(f"WebSocket: {type(exc).__name__}", method="socket") from None
        try:
            msg = await ws.receive(timeout=HELLO_TIMEOUT_S)
            frame = _json(msg.data) if msg.type == aiohttp.WSMsgType.TEXT else None
            if not isinstance(frame, dict) or frame.get("type") != "hello":
                if isinstance(frame, dict) and frame.get("type") == "disconnect":
                    raise _disconnected(frame)
                raise RetryableError(f"no hello, got {msg.type.name}", method="socket")
        except BaseException:
            await ws.close()
            raise
        self.connections += 1
        return ws

    async def serve(self, handle: Callable[[Any], Awaitable[None]]) -> None:
        """Read envelopes until the connection fails (raised: the intake reconnects); ``handle(payload)`` for
        each ``events_api`` envelope, its acknowledgement after."""
        while True:
            ws = self._ws
            if ws is None:
                raise RetryableError("not connected", method="socket")
            msg = await ws.receive()
            if msg.type in CLOSED:
                raise RetryableError(f"the connection closed (code {ws.close_code})", method="socket")
            if msg.type in (aiohttp.WSMsgType.PING, aiohttp.WSMsgType.PONG):
                if msg.type == aiohttp.WSMsgType.PING:
                    await ws.pong(msg.data)
                self.alive()
                continue
            self.alive()
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            frame = _json(msg.data)
            if not isinstance(frame, dict):
                self.say(logging.WARNING, f"a Socket Mode frame that is no JSON object was ignored "
                                           f"({msg.data[:60]!r})")
                continue
            kind = frame.get("type")
            if kind == "disconnect":
                await self._replace(frame)
            elif frame.get("envelope_id"):
                if kind in ("events_api", "interactive"):   # an event; a button press (block_actions)
                    await handle(frame.get("payload"))   # committed (or skipped) when it returns
                await ws.send_str(json.dumps({"envelope_id": frame["envelope_id"]}))

    async def _replace(self, frame: dict) -> None:
        reason = frame.get("reason")
        if reason == "link_disabled":
            raise _disconnected(frame)
        old = self._ws
        self._ws = await self._connect()     # the new connection first: events flow on it from its hello
        self.say(logging.INFO, f"Slack announced a disconnect ({reason}); moved to a new connection")
        if old is not None:
            await old.close()


def _disconnected(frame: dict) -> Exception:
    reason = str(frame.get("reason"))
    if reason == "link_disabled":
        return PermanentError("Socket Mode is disabled for this app (link_disabled)", method="socket")
    return RetryableError(f"disconnect: {reason}", method="socket")


def _json(data: Any) -> Any:
    try:
        return json.loads(data)
    except (TypeError, ValueError, RecursionError):
        return None
