"""A scripted web chat visitor for tests: what the page does, over aiohttp WebSockets, driven from sync test code.

One asyncio loop in a background thread holds one connection per visitor. Like the page it reconnects with backoff
when the connection drops (the gateway restarted, the adapter was killed) and re-sends every message the server has
not acknowledged yet, with its original id, so the inbox sees a resend, never a new message.

A visitor is known to the gateway by the cookie its page set, as a browser is: the first connection of a name
fetches the page for it, and every later one of that name (another tab, another client, after a restart) sends
the same cookie. Its id on the gateway's side (logs, chat id) is ``Visitor.id``, from the hello frame.
"""
from __future__ import annotations

import asyncio
import collections
import threading
import time
from typing import Optional

import aiohttp

RECONNECT_S = (0.05, 1.0)          # first and longest wait between reconnection attempts
CALL_TIMEOUT_S = 15.0
COOKIE = "gw_visitor"
_credentials: dict[str, str] = {}  # visitor name -> the cookie the gateway issued for it: the "browser profile"


async def issued_cookie(session: aiohttp.ClientSession, base_url: str, name: str | None = None) -> dict:
    """The Cookie header of visitor ``name`` (a fresh visitor's when None): fetched from the chat page once."""
    credential = _credentials.get(name) if name is not None else None
    if credential is None:
        async with session.get(f"{base_url}/") as page:
            await page.read()
            credential = page.cookies[COOKIE].value
        if name is not None:
            _credentials[name] = credential
    return {"Cookie": f"{COOKIE}={credential}"}


class Visitor:
    def __init__(self, name: str):
        self.name = name
        self.id: Optional[str] = None                       # the gateway's id of this visitor (hello frame)
        self.ws: Optional[aiohttp.ClientWebSocketResponse] = None
        self.unacked: dict[str, dict] = {}                 # id -> the message frame, in send order
        self.acks: collections.Counter = collections.Counter()
        self.errors: dict[str, str] = {}                    # id -> reason, for frames the server refused
        self.frames: list[dict] = []                        # everything the server sent, in order
        self.connects = 0
        self.connected = asyncio.Event()
        self.replies: asyncio.Queue = asyncio.Queue()       # answers to request(): history, debug, pong


class WebChatClient:
    def __init__(self, base_url: str, reconnect_s: tuple[float, float] = RECONNECT_S):
        self.base_url = base_url
        self.reconnect_s = reconnect_s
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="webchat-client", daemon=True)
        self._thread.start()
        self.visitors: dict[str, Visitor] = {}
        self._tasks: list = []
        self.session: Optional[aiohttp.ClientSession] = self._call(self._open_session())

    # ----------------------------------------------------------------------------------- sync API (test thread)
    def say(self, visitor: str, message_id: str, text, files: Optional[list] = None) -> None:
        """Send a message frame (text may be anything: the malformed tests send numbers), naming ``files``
        (upload ids) if given."""
        frame = {"type": "message", "id": message_id, "text": text, **({"files": files} if files else {})}
        self._call(self._say(visitor, frame))

    def request(self, visitor: str, frame: dict, timeout: float = CALL_TIMEOUT_S) -> dict:
        """Send a frame and return the server's next answer that is not an operation or an ack."""
        return self._call(self._request(visitor, frame, timeout), timeout + 1)

    def visitor(self, name: str) -> Visitor:
        self._call(self._ensure(name))
        return self.visitors[name]

    def id_of(self, name: str, timeout: float = CALL_TIMEOUT_S) -> str:
        """The gateway's id of visitor ``name`` (its chat id), once a connection of it was greeted."""
        visitor = self.visitor(name)
        deadline = time.monotonic() + timeout
        while visitor.id is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"visitor {name} was not greeted within {timeout}s "
                                     f"({visitor.connects} connection(s))")
            time.sleep(0.01)
        return visitor.id

    def drop_all(self) -> None:
        """Cut every connection the way a network failure would; each one reconnects by itself."""
        self._call(self._drop_all())

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self._call(self._close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()

    def _call(self, coro, timeout: float = CALL_TIMEOUT_S):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    # ------------------------------------------------------------------------------------------- on the loop
    async def _open_session(self) -> aiohttp.ClientSession:
        # One connection per visitor, held open: no cap (aiohttp's default is 100 per session).
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def _ensure(self, name: str) -> Visitor:
        visitor = self.visitors.get(name)
        if visitor is None:
            visitor = self.visitors[name] = Visitor(name)
            self._tasks.append(asyncio.get_running_loop().create_task(self._keep_connected(visitor)))
        return visitor

    async def _say(self, name: str, frame: dict) -> None:
        visitor = await self._ensure(name)
        visitor.unacked[frame["id"]] = frame
        if visitor.ws is not None and not visitor.ws.closed:
            try:
                await visitor.ws.send_json(frame)
            except (ConnectionError, aiohttp.ClientError):
                pass   # the socket is closing (a dropped connection, a killed daemon): kept unacked, the
                #        reconnect sends it again, as the page does

    async def _request(self, name: str, frame: dict, timeout: float) -> dict:
        visitor = await self._ensure(name)
        await asyncio.wait_for(visitor.connected.wait(), timeout)
        while not visitor.replies.empty():
            visitor.replies.get_nowait()
        await visitor.ws.send_json(frame)
        return await asyncio.wait_for(visitor.replies.get(), timeout)

    async def _keep_connected(self, visitor: Visitor) -> None:
        wait = self.reconnect_s[0]
        url = f"{self.base_url}/ws"
        while True:
            try:
                cookie = await issued_cookie(self.session, self.base_url, visitor.name)
                async with self.session.ws_connect(url, max_msg_size=8 * 1024 * 1024, headers=cookie) as ws:
                    visitor.ws, wait = ws, self.reconnect_s[0]
                    visitor.connects += 1
                    visitor.connected.set()
                    for frame in list(visitor.unacked.values()):
                        await ws.send_json(frame)
                    async for msg in ws:
                        if msg.type == aiohttp.WSMsgType.TEXT:
                            self._on_frame(visitor, msg.json())
            except (aiohttp.ClientError, ConnectionError, OSError):
                pass
            visitor.connected.clear()
            visitor.ws = None
            await asyncio.sleep(wait)
            wait = min(self.reconnect_s[1], wait * 2)

    def _on_frame(self, visitor: Visitor, frame: dict) -> None:
        visitor.frames.append(frame)
        kind, message_id = frame.get("type"), frame.get("id")
        if kind == "ack":
            visitor.acks[message_id] += 1
            visitor.unacked.pop(message_id, None)
        elif kind == "error" and message_id is not None and not frame.get("retry"):
            visitor.errors[message_id] = frame.get("error", "")
            visitor.unacked.pop(message_id, None)
        elif kind == "error" and message_id is not None:
            asyncio.get_running_loop().call_later(0.2, self._resend, visitor, message_id)
        elif kind == "hello":
            visitor.id = frame.get("visitor")
        elif kind != "op":
            visitor.replies.put_nowait(frame)

    def _resend(self, visitor: Visitor, message_id: str) -> None:
        frame = visitor.unacked.get(message_id)
        if frame is not None and visitor.ws is not None and not visitor.ws.closed:
            asyncio.get_running_loop().create_task(visitor.ws.send_json(frame))

    async def _drop_all(self) -> None:
        for visitor in list(self.visitors.values()):   # a visitor may join while a close awaits
            if visitor.ws is not None:
                await visitor.ws.close()

    async def _close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.session.close()
