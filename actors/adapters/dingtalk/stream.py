"""Stream mode: the robot's messages over a WebSocket the app opens itself (no public URL needed).

``POST /v1.0/gateway/connections/open`` (client id and secret, the subscriptions) gives an ``endpoint`` and a
one-use ``ticket``; the app connects to ``endpoint?ticket=...``. Every frame either way is JSON. The platform's:

    {"specVersion": "1.0", "type": "SYSTEM" | "EVENT" | "CALLBACK",
     "headers": {"appId", "connectionId", "contentType": "application/json", "messageId", "time", "topic"},
     "data": a JSON string}

The app answers a frame by its ``messageId``: ``{"code": 200, "headers": {"contentType": "application/json",
"messageId"}, "message": "OK", "data": a JSON string}``. SYSTEM frames: ``ping`` is answered with its own data;
``disconnect`` says the platform is about to close this connection (it sends nothing more on it): the link raises, and
the intake reconnects with a fresh ticket; ``CONNECTED`` / ``REGISTERED`` / ``KEEPALIVE`` are proof of life only.
A CALLBACK on ``/v1.0/im/bot/messages/get`` carries one robot message: ``StreamLink`` hands it to the adapter's
``handle`` coroutine and answers it only when that returns, which the adapter makes mean "its inbox row is
committed": a message whose commit a kill -9 cut short is never acknowledged, and the platform delivers it again.
A frame that is no JSON object, or names no messageId, cannot be answered: it is logged and skipped (the platform
redelivers what it still wants answered).

Half-open connections are found by WebSocket pings (``ping_interval_s``: a ping goes after that long with nothing
received; no pong within half of it, the socket is closed and the intake reconnects). Every frame and pong is the
connection's proof of life (``alive``, actors/adapters/liveness.py).
"""
from __future__ import annotations

import json
import logging
from typing import Any, Awaitable, Callable, Optional
from urllib.parse import quote_plus

import aiohttp

from actors.adapters.dingtalk.client import BOT_MESSAGES_TOPIC, DingTalkAPI
from actors.adapters.errors import RetryableError

MAX_FRAME_BYTES = 4 * 2**20   # a robot message is a few KB; a frame past this closes the connection
CLOSED = (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR)


def answer(message_id: str, data: Any = None) -> str:
    """The frame acknowledging the platform's frame ``message_id``."""
    return json.dumps({"code": 200, "headers": {"contentType": "application/json", "messageId": message_id},
                       "message": "OK", "data": data if isinstance(data, str) else json.dumps({"response": data})})


class StreamLink:
    """One Stream-mode connection of ``api``. ``say(level, text)`` logs."""

    def __init__(self, api: DingTalkAPI, say: Callable[[int, str], None], alive: Callable[[], None] = lambda: None,
                 ping_interval_s: float = 20.0):
        self.api, self.say, self.alive = api, say, alive
        self.ping_interval_s = ping_interval_s
        self._ws: Optional[aiohttp.ClientWebSocketResponse] = None
        self.answered = 0

    async def open(self) -> None:
        endpoint, ticket = await self.api.open_connection()   # a fresh ticket for every connection
        url = f"{endpoint}{'&' if '?' in endpoint else '?'}ticket={quote_plus(ticket)}"
        try:
            self._ws = await self.api.session().ws_connect(url, heartbeat=self.ping_interval_s, autoping=False,
                                                           max_msg_size=MAX_FRAME_BYTES)
        except aiohttp.WSServerHandshakeError as exc:   # a ticket refused (used, expired): the next try asks anew
            raise RetryableError(f"the stream refused the ticket: HTTP {exc.status}", method="stream") from None
        except aiohttp.ClientError as exc:
            raise RetryableError(f"stream: {type(exc).__name__}", method="stream") from None

    async def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            await ws.close()

    async def serve(self, handle: Callable[[Any], Awaitable[None]]) -> None:
        """Read frames until the connection ends (raised: the intake reconnects); ``handle(data)`` for each robot
        message, its answer after."""
        while True:
            ws = self._ws
            if ws is None:
                raise RetryableError("not connected", method="stream")
            msg = await ws.receive()
            if msg.type in CLOSED:
                raise RetryableError(f"the stream closed (code {ws.close_code})", method="stream")
            self.alive()
            if msg.type == aiohttp.WSMsgType.PING:
                await ws.pong(msg.data)
                continue
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            frame = _json(msg.data)
            headers = frame.get("headers") if isinstance(frame, dict) else None
            message_id = headers.get("messageId") if isinstance(headers, dict) else None
            if not isinstance(message_id, str) or not message_id:
                self.say(logging.WARNING, f"a stream frame that cannot be answered was skipped (no JSON object with "
                                          f"headers.messageId): {str(msg.data)[:80]!r}")
                continue
            kind, topic = frame.get("type"), headers.get("topic")
            if kind == "SYSTEM":
                if topic == "disconnect":
                    raise RetryableError("the platform asked to reconnect (SYSTEM disconnect)", method="stream")
                if topic == "ping":
                    await ws.send_str(answer(message_id, frame.get("data") if isinstance(frame.get("data"), str)
                                             else "{}"))
                continue
            if kind == "CALLBACK" and topic == BOT_MESSAGES_TOPIC:
                data = frame.get("data")
                decoded = _json(data) if isinstance(data, str) else data
                # Undecodable data goes to the adapter as it came: its normalise names what is wrong, the kit logs
                # and counts it, and it is answered like any message, so it is not delivered forever.
                await handle(decoded if isinstance(decoded, dict) else data)
            else:
                self.say(logging.INFO, f"a {str(kind)[:16]} frame on {str(topic)[:60]!r} was answered and skipped")
            await ws.send_str(answer(message_id))
            self.answered += 1


def _json(data: Any) -> Any:
    try:
        return json.loads(data)
    except (TypeError, ValueError, RecursionError):
        return None
