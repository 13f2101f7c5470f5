"""The long connection (使用长连接接收事件): the app's events over a WebSocket the app opens itself, no public URL.

``POST {host}/callback/ws/endpoint`` with the app id and secret (client.py) answers a WebSocket URL, whose query
names the connection (``device_id``) and the ``service_id`` pings must carry, and a ``ClientConfig``: the ping
interval and how to reconnect (seconds). Every frame either way is a binary protobuf ``Frame`` (frames.py):

- the client pings (a control frame, header ``type: ping``) every PingInterval, capped at ``max_ping_interval_s``
  so the kit's silence bound, fixed when the adapter starts, holds; the platform's ``pong`` may carry a new
  ClientConfig, taken at once. Every frame received is the connection's proof of life (``alive``);
- a data frame of ``type: event`` carries one event's JSON (the 2.0 schema, as a callback's body, in plain text:
  the connection was authenticated when it opened), or one fragment of it (``sum`` fragments, ``seq`` from 0,
  under one ``message_id``): fragments are kept (bounded: frames.Fragments) until the event is whole.
  ``handle(payload)`` is awaited, then the frame is answered (its own headers plus ``biz_rt``, payload
  ``{"code": 200}``): the adapter makes "returned" mean "its inbox row is committed", so an event whose commit a
  kill -9 cut short is never answered, and the platform delivers it again. A fragment is never answered by itself:
  only the event, once whole and committed;
- a ``card`` frame (a card's button: none are sent) and any other data frame are answered and skipped with a log
  line; a frame that is no protobuf Frame is logged and skipped (the platform delivers again what it wants
  answered).

The connection ends (raised: the kit reconnects with its backoff, after a random share of ReconnectNonce the first
time, as the platform asks, so many clients do not come back at one instant) on a close from either side, a
network failure, or a handshake the platform refuses (its ``handshake-status`` header; 403 refuses the app).
"""
from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from typing import Any, Awaitable, Callable, Optional
from urllib.parse import parse_qs, urlsplit

import aiohttp

from actors.adapters.errors import PermanentError, RetryableError
from actors.adapters.feishu import frames
from actors.adapters.feishu.client import FeishuAPI

MAX_FRAME_BYTES = 4 * 2**20   # a fragment is at most a few hundred KB; a frame past this ends the connection
MIN_PING_INTERVAL_S = 1.0
CLOSED = (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR)


class Ended(RetryableError):
    """The connection ended; ``retry_after`` a random share of the platform's ReconnectNonce."""


def service_id_of(url: str) -> int:
    """The ``service_id`` the endpoint's URL names (pings carry it); 0 where it names none."""
    values = parse_qs(urlsplit(url).query).get("service_id") or ["0"]
    try:
        return int(values[0])
    except ValueError:
        return 0


class LongConnection:
    """One long connection of ``api``. ``say(level, text)`` logs; ``alive()`` on each proof of life."""

    def __init__(self, api: FeishuAPI, say: Callable[[int, str], None], alive: Callable[[], None] = lambda: None,
                 max_ping_interval_s: float = 120.0, clock: Callable[[], float] = time.monotonic):
        self.api, self.say, self.alive, self.clock = api, say, alive, clock
        self.max_ping_interval_s = max_ping_interval_s
        self.config = frames.ClientConfig()
        self.fragments = frames.Fragments()
        self.service_id = 0
        self.answered = 0
        self._ws: Optional[aiohttp.ClientWebSocketResponse] = None
        self._send_lock = asyncio.Lock()

    @property
    def ping_interval_s(self) -> float:
        return min(self.max_ping_interval_s, max(MIN_PING_INTERVAL_S, self.config.ping_interval_s))

    async def open(self) -> None:
        url, config = await self.api.ws_endpoint()   # a refused app raises PermanentError here: "refused"
        self.config = frames.client_config(config, self.config)
        self.service_id = service_id_of(url)
        try:
            self._ws = await self.api.session().ws_connect(url, autoping=True, max_msg_size=MAX_FRAME_BYTES)
        except aiohttp.WSServerHandshakeError as exc:
            headers = exc.headers or {}
            status, words = headers.get("handshake-status", ""), headers.get("handshake-msg", "")
            text = f"the long connection's handshake was refused: {words or f'HTTP {exc.status}'}" + (
                f" (handshake-status {status})" if status else "")
            if status == "403":
                raise PermanentError(text, method="ws_connect") from None
            raise RetryableError(text, method="ws_connect") from None
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise RetryableError(f"long connection: {type(exc).__name__}", method="ws_connect") from None

    async def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            await ws.close()

    async def _send(self, frame: frames.Frame) -> None:
        ws = self._ws
        if ws is None or ws.closed:
            raise self._ended("the connection is closed")
        async with self._send_lock:
            await ws.send_bytes(frames.encode(frame))

    def _ended(self, why: str) -> Ended:
        nonce = min(self.config.reconnect_nonce_s, 30.0)   # the kit's backoff is never longer than its 30 s either
        return Ended(f"the long connection ended ({why})", method="ws", retry_after=random.random() * nonce)

    async def _ping_forever(self) -> None:
        while True:
            await self._send(frames.ping(self.service_id))
            await asyncio.sleep(self.ping_interval_s)   # read again each time: a pong may have changed it

    async def serve(self, handle: Callable[[Any], Awaitable[None]]) -> None:
        """Read frames until the connection ends (raised: the intake reconnects); ``handle(payload)`` for each whole
        event, its answer after."""
        pinger = asyncio.get_running_loop().create_task(self._ping_forever())
        receive: Optional[asyncio.Future] = None
        try:
            while True:
                ws = self._ws
                if ws is None:
                    raise self._ended("not connected")
                receive = asyncio.ensure_future(ws.receive())
                done, _ = await asyncio.wait({receive, pinger}, return_when=asyncio.FIRST_COMPLETED)
                if pinger in done:   # it ends only by a ping that could not go: the connection is gone
                    raise self._ended(f"a ping could not go: {type(pinger.exception()).__name__}")
                msg = receive.result()
                if msg.type in CLOSED:
                    raise self._ended(f"close code {ws.close_code}")
                self.alive()
                if msg.type != aiohttp.WSMsgType.BINARY:
                    continue
                await self._take(msg.data, handle)
        finally:
            pinger.cancel()
            if receive is not None:
                receive.cancel()

    async def _take(self, data: bytes, handle: Callable[[Any], Awaitable[None]]) -> None:
        try:
            frame = frames.decode(data)
        except frames.BadFrame as exc:
            self.say(logging.WARNING, f"a long-connection frame that is no protobuf Frame was skipped ({exc})")
            return
        kind = frame.header("type")
        if frame.method == frames.CONTROL:
            if kind == "pong" and frame.payload:
                self.config = frames.client_config(frame.payload, self.config)
            return
        if frame.method != frames.DATA:
            return
        started = self.clock()
        if kind != "event":
            self.say(logging.INFO, f"a long-connection {kind[:16]!r} frame was answered and skipped")
            await self._send(frames.answer(frame, 0))
            return
        try:
            total, seq = int(frame.header("sum", "1")), int(frame.header("seq", "0"))
            whole = self.fragments.add(frame.header("message_id"), total, seq, frame.payload, self.clock())
        except (ValueError, frames.BadFrame) as exc:
            self.say(logging.WARNING, f"a long-connection event frame was skipped: {exc}; the platform delivers "
                                      f"it again")
            return
        if whole is None:
            return   # more fragments to come; answered once the event is whole and stored
        await handle(_json(whole))
        await self._send(frames.answer(frame, int((self.clock() - started) * 1000)))
        self.answered += 1


def _json(data: bytes) -> Any:
    """The event's JSON; bytes that are none go on as text, for the adapter's normalise to name what is wrong."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return data.decode("utf-8", "replace")
