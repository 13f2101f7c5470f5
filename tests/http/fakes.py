"""Both ends of the generic webhook, for tests: the sender of inbound messages and the receiver of reply callbacks.

``CallbackReceiver`` is a small aiohttp server in a thread of the test process. It verifies every callback's
signature, keeps each conversation's messages (a send with a known message id replaces it, as the contract asks),
answers 404 to an edit or delete of a message it does not have, and 429 when floods are scripted. ``stop()`` and
``start()`` again keep its history and port: every connection is cut, nothing is forgotten.

``WebhookSender`` posts signed bodies the way a webhook platform does: it retries until it gets an answer that is not
a failure of the gateway (2xx, or a 4xx that says the request itself is wrong), so a message posted while the
adapter is down arrives once it is back.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Optional

from aiohttp import web

from actors.adapters.http.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign, signature_ok

SEND_DEADLINE_S = 30.0
RETRY_PAUSE_S = 0.05


class CallbackReceiver:
    def __init__(self, secret: str, port: int = 0):
        self.secret, self.port = secret, port
        self._lock = threading.Lock()
        self._chats: dict[str, dict[str, dict]] = {}
        self._attempts: list[dict] = []
        self.received: list[dict] = []          # every well-signed callback, in arrival order
        self.bad_signatures = 0
        self._floods_left, self._flood_retry_after, self._flood_actions = 0, 0.0, ("send",)
        self._banned_until = 0.0
        self._violations = 0
        self._hold: Optional[str] = None        # hold_next_send: that conversation's next send waits for ``released``
        self.holding, self.released = threading.Event(), threading.Event()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._runner: Optional[web.AppRunner] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/callback"

    # --------------------------------------------------------------------------------------------- life cycle
    def start(self) -> "CallbackReceiver":
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="callback-receiver", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        return self

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/callback", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._loop = None

    # --------------------------------------------------------------------------------------------- the server
    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        now = time.time()
        with self._lock:
            if not signature_ok(self.secret, body, request.headers.get(SIGNATURE_HEADER),
                                request.headers.get(TIMESTAMP_HEADER)):
                self.bad_signatures += 1
                return web.json_response({"error": "bad signature"}, status=401)
            payload = json.loads(body)
            self.received.append(payload)
            status = self._apply(payload, now)
            self._attempts.append({"chat": payload["conversation_id"], "action": payload["action"], "at": now,
                                   "status": status})
        if status == 429:
            return web.json_response({"retry_after": self._flood_retry_after}, status=429,
                                     headers={"Retry-After": str(self._flood_retry_after)})
        if self._hold == payload["conversation_id"] and payload["action"] == "send" and status == 200:
            self._hold = None
            self.holding.set()
            while not self.released.is_set():   # the message is here; the gateway has not heard so
                await asyncio.sleep(0.02)
        return web.json_response({"ok": status == 200}, status=status)

    def _apply(self, payload: dict, now: float) -> int:
        if now < self._banned_until:
            self._violations += 1
        action, message_id = payload["action"], payload["message_id"]
        if self._floods_left and action in self._flood_actions:
            self._floods_left -= 1
            self._banned_until = now + self._flood_retry_after
            return 429
        messages = self._chats.setdefault(payload["conversation_id"], {})
        if action == "send":
            messages[message_id] = {"message_id": message_id, "text": payload["text"], "deleted": False,
                                    "final": payload["final"]}
            return 200
        message = messages.get(message_id)
        if message is None or message["deleted"]:
            return 404
        if action == "edit":
            message.update(text=payload["text"], final=payload["final"])
        elif action == "delete":
            message["deleted"] = True
        return 200

    # ------------------------------------------------------------------------------------------ for the tests
    def messages(self, chat: str) -> list[dict]:
        with self._lock:
            return [dict(m) for m in self._chats.get(chat, {}).values()]

    def attempts(self, chat: str, action: str) -> list[dict]:
        with self._lock:
            return [{"at": a["at"], "status": a["status"]} for a in self._attempts
                    if a["chat"] == chat and a["action"] == action]

    def script_floods(self, count: int, retry_after: float, actions: tuple = ("send",)) -> None:
        with self._lock:
            self._floods_left, self._flood_retry_after, self._flood_actions = count, retry_after, actions

    def clear_faults(self) -> None:
        with self._lock:
            self._floods_left, self._hold = 0, None
        self.released.set()

    def hold_next_send(self, conversation: str) -> None:
        """The conversation's next send is taken (it shows in ``messages``) and its answer waits until ``released``
        is set: the window in which a test kills the gateway."""
        self.holding.clear()
        self.released.clear()
        self._hold = conversation

    def flood_violations(self) -> int:
        with self._lock:
            return self._violations


class WebhookSender:
    """Delivers webhook bodies to ``url``; each delivery has a handle and, once answered for good, a status."""

    def __init__(self, url: str, secret: str):
        self.url, self.secret = url, secret
        self._handles = itertools.count(1)
        self._lock = threading.Lock()
        self._status: dict[str, int] = {}
        self.bodies: dict[str, dict] = {}

    def post(self, body: bytes, signature: Optional[str] = "sign", at: Optional[int] = None) -> tuple[int, dict]:
        """One attempt: (status, JSON answer). ``signature`` "sign" signs with the secret; None sends none. ``at``:
        the timestamp sent and signed (now by default)."""
        stamp = int(time.time()) if at is None else at
        headers = {"Content-Type": "application/json", TIMESTAMP_HEADER: str(stamp)}
        if signature is not None:
            headers[SIGNATURE_HEADER] = sign(self.secret, body, stamp) if signature == "sign" else signature
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            text = error.read()
            try:
                return error.code, json.loads(text)
            except ValueError:
                return error.code, {"text": text.decode(errors="replace")}

    def deliver(self, body: dict) -> str:
        """Deliver in the background, retrying what a sender retries; returns the delivery's handle."""
        handle = str(next(self._handles))
        self.bodies[handle] = body
        threading.Thread(target=self._deliver, args=(handle, json.dumps(body).encode()), daemon=True).start()
        return handle

    def _deliver(self, handle: str, data: bytes) -> None:
        deadline = time.monotonic() + SEND_DEADLINE_S
        while time.monotonic() < deadline:
            try:
                status, _answer = self.post(data)
            except OSError:       # refused or reset: the adapter is down or restarting
                status = None
            if status is not None and status < 500 and status != 429:
                with self._lock:
                    self._status[handle] = status
                return
            time.sleep(RETRY_PAUSE_S)   # a sender's retry pace, not a test's synchronisation

    def status(self, handle: str) -> Optional[int]:
        with self._lock:
            return self._status.get(handle)
