"""A OneBot v11 WebSocket: the forward one (the implementation serves ``ws://host:port/``; the adapter connects:
``Link.open_forward``) or a reverse one (the implementation connects to the adapter's server: reverse.py hands the
accepted socket to ``Link.attach``). Either is the universal kind: one connection carries both directions: the
implementation pushes events (``{"post_type": ...}``) and answers actions. An action is ``{"action", "params",
"echo"}``; its answer ``{"status": "ok"|"async"|"failed", "retcode", "data", "echo"}`` carries the same ``echo``,
which is how an answer finds its caller among the events around it. The access token goes in the
``Authorization: Bearer`` header, never in the URL (no proxy log holds it); a missing or wrong one is refused at
the handshake (401, 403).

Liveness: every frame calls ``alive()``; the implementation's ``meta_event`` heartbeat (every
``heartbeat_interval_s``) is what shows the connection up while nobody writes.

Bounds: a frame over ``MAX_FRAME_BYTES`` closes the connection; at most ``MAX_PENDING_EVENTS`` events wait for the
intake (a reader past it closes the connection rather than grow without bound: the adapter reconnects).
"""
from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any, Callable, Optional

import aiohttp

from actors.adapters.errors import PermanentError, RetryableError

MAX_FRAME_BYTES = 4 << 20
MAX_PENDING_EVENTS = 1000
CONNECT_TIMEOUT_S = 15.0
CLOSED = object()

# retcodes of OneBot v11 (its api/README: 1400 bad request, 1401 / 1403 the token, 1404 no such action); the
# implementations add their own above these (NapCat 200 and up): all a refusal of this request.
PERMANENT_RETCODES = {1400: "bad request", 1401: "access token missing", 1403: "access token wrong",
                      1404: "the implementation has no such action"}


class ActionFailed(PermanentError):
    """The implementation answered the action with status "failed"."""

    def __init__(self, action: str, retcode: Any, message: str):
        super().__init__(f"retcode {retcode}: {message}", method=action)
        self.retcode = retcode


class Link:
    """One connection. ``next_event()`` gives the pushed events in order; ``call()`` runs an action and returns its
    ``data``; ``alive()`` is called on every frame."""

    def __init__(self, alive: Callable[[], None], action_timeout_s: float):
        self.alive, self.action_timeout_s = alive, action_timeout_s
        self._http: Optional[aiohttp.ClientSession] = None
        self._ws: Any = None         # aiohttp's client WebSocket, or the server's WebSocketResponse (reverse)
        self.ended = asyncio.Event()  # the connection is over (a reverse socket's handler waits on it)
        self._reader: Optional[asyncio.Task] = None
        self._answers: dict[str, asyncio.Future] = {}
        self._events: asyncio.Queue = asyncio.Queue()
        self._echoes = itertools.count(1)
        self.closed_because = ""

    @property
    def open(self) -> bool:
        return self._ws is not None and not self._ws.closed

    def attach(self, ws: Any) -> "Link":
        """Read an accepted (reverse) socket."""
        self._ws = ws
        self._reader = asyncio.create_task(self._read())
        return self

    async def open_forward(self, url: str, token: str) -> "Link":
        """Connect to the implementation's forward WebSocket, the access token in the header."""
        self._http = aiohttp.ClientSession()
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            self._ws = await asyncio.wait_for(self._http.ws_connect(
                url.rstrip("/") + "/", headers=headers, max_msg_size=MAX_FRAME_BYTES,
                timeout=aiohttp.ClientWSTimeout(ws_close=5.0), autoping=True), CONNECT_TIMEOUT_S)
        except aiohttp.WSServerHandshakeError as exc:
            await self.close()
            if exc.status in (401, 403):
                raise PermanentError(f"the WebSocket was refused: HTTP {exc.status} (the access token is "
                                     f"{'missing' if exc.status == 401 else 'wrong'})", method="websocket") from None
            raise RetryableError(f"the WebSocket was refused: HTTP {exc.status}", method="websocket") from None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            await self.close()
            raise RetryableError(f"cannot connect: {type(exc).__name__}", method="websocket") from None
        return self.attach(self._ws)

    async def _read(self) -> None:
        ws = self._ws
        reason = "the implementation closed the connection"
        try:
            async for frame in ws:
                self.alive()
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    body = json.loads(frame.data)
                except ValueError:
                    continue        # no JSON: not OneBot (an event that is JSON but no valid event is the intake's)
                if isinstance(body, dict) and "post_type" not in body and "echo" in body:
                    waiter = self._answers.pop(str(body.get("echo")), None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(body)
                    continue
                if self._events.qsize() >= MAX_PENDING_EVENTS:
                    reason = f"more than {MAX_PENDING_EVENTS} events waiting"
                    break
                self._events.put_nowait(body)
        except (aiohttp.ClientError, OSError) as exc:
            reason = f"the connection failed: {type(exc).__name__}"
        except asyncio.CancelledError:
            reason = "the adapter closed the connection"
            raise
        finally:
            self.closed_because = reason
            for waiter in self._answers.values():
                if not waiter.done():
                    waiter.set_exception(RetryableError(f"the connection closed before the answer ({reason})",
                                                        method="websocket", maybe_done=True))
            self._answers.clear()
            self._events.put_nowait(CLOSED)
            self.ended.set()
            if not ws.closed:
                await ws.close()

    async def next_event(self) -> Any:
        """The next pushed event; RetryableError once the connection is gone."""
        event = await self._events.get()
        if event is CLOSED:
            self._events.put_nowait(CLOSED)
            raise RetryableError(self.closed_because or "the connection closed", method="websocket")
        return event

    async def call(self, action: str, params: dict) -> Any:
        """Run ``action``; its ``data`` (None for an "async" answer: accepted, nothing to return)."""
        if not self.open:
            raise RetryableError("not connected to the implementation", method=action)
        echo = f"gw-{next(self._echoes)}"
        waiter = asyncio.get_running_loop().create_future()
        self._answers[echo] = waiter
        try:
            await self._ws.send_str(json.dumps({"action": action, "params": params, "echo": echo}))
        except (aiohttp.ClientError, ConnectionError, RuntimeError) as exc:
            self._answers.pop(echo, None)
            raise RetryableError(f"cannot send: {type(exc).__name__}", method=action, maybe_done=True) from None
        try:
            answer = await asyncio.wait_for(waiter, self.action_timeout_s)
        except asyncio.TimeoutError:
            self._answers.pop(echo, None)
            raise RetryableError(f"no answer within {self.action_timeout_s:g} s", method=action,
                                 maybe_done=True) from None
        return answer_data(action, answer)

    async def close(self) -> None:
        reader, self._reader = self._reader, None
        ws, self._ws = self._ws, None
        if ws is not None and not ws.closed:
            await ws.close()
        if reader is not None:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        self.ended.set()
        http, self._http = self._http, None
        if http is not None:
            await http.close()


def answer_data(action: str, answer: Any) -> Any:
    """An action's answer as its data, or the error it says (pure)."""
    if not isinstance(answer, dict):
        raise PermanentError("the answer is no JSON object", method=action)
    status, retcode = answer.get("status"), answer.get("retcode")
    if status == "ok" and retcode == 0:
        return answer.get("data")
    if status == "async" or retcode == 1:
        return None
    message = str(answer.get("wording") or answer.get("message") or answer.get("msg") or
                  PERMANENT_RETCODES.get(retcode, "failed"))[:200]
    raise ActionFailed(action, retcode, message)
