"""A recording relay between the Matrix adapter and a real Synapse: every request goes on to Synapse unchanged and
Synapse's answer comes back unchanged, except where a test asks for a fault. What the relay adds is what the
server does not show: when each request came and what it was (the suite's ``attempts``), the sync exchanges (which
``next_batch`` the adapter asked from next: its acknowledgement), and faults in Synapse's own wire format:

* ``script_floods(n, retry_after)``: the next n message sends answer 429 ``M_LIMIT_EXCEEDED`` with
  ``retry_after_ms``, without reaching Synapse; a send to that room before the time is counted as a violation;
* ``hold_next_send(room=None)``: the next message send (to ``room``, if given) reaches Synapse (the event is made)
  and its answer is held until ``release()``: the window between a PUT leaving and its event id coming back;
* ``replay(event_id)``: the next sync asks from the token before that event, so Synapse delivers it again;
* ``forget_next_sync_token()``: the next sync asks from a token Synapse never issued (it answers 400);
* ``restart()``: every connection cut (the long poll included), the same port served again.

Runs aiohttp on its own loop in a background thread; the port is chosen by the kernel (port 0) at the first start.
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Optional
from urllib.parse import unquote

import aiohttp
from aiohttp import web
from yarl import URL

HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "accept-encoding"}


class MatrixRelay:
    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.port = 0
        self.requests: list[dict] = []        # {"at", "kind", "room", "txn", "status", "content"}
        self.syncs: list[dict] = []           # {"since", "next_batch", "events", "rewound"}
        self.sent_contents: dict[str, dict] = {}   # event id -> the content the bot PUT for it
        self.violations = 0
        self._floods: list[float] = []
        self._banned_until: dict[str, float] = {}
        self._rewind_to: Optional[str] = None
        self._hold = False
        self._hold_room: Optional[str] = None
        self.holding, self.released = threading.Event(), threading.Event()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="matrix-relay", daemon=True)
        self._runner: Optional[web.AppRunner] = None
        self._client: Optional[aiohttp.ClientSession] = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------------------------------------------ life
    def start(self) -> "MatrixRelay":
        if not self._thread.is_alive():
            self._thread.start()
        self._run(self._start())
        return self

    def stop(self) -> None:
        if self._runner is not None:
            self._run(self._stop())

    def close(self) -> None:
        self.stop()
        if self._client is not None:
            self._run(self._client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    async def _start(self) -> None:
        if self._client is None:
            self._client = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._relay)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        runner, self._runner = self._runner, None
        await runner.cleanup()

    # ------------------------------------------------------------------------------------------- test controls
    def script_floods(self, count: int, retry_after: float) -> None:
        with self._lock:
            self._floods = [retry_after] * count

    def clear_faults(self) -> None:
        with self._lock:
            self._floods, self._hold, self._rewind_to = [], False, None
        self.release()

    def hold_next_send(self, room: Optional[str] = None) -> None:
        self.holding.clear()
        self.released.clear()
        self._hold_room = room
        self._hold = True

    def release(self) -> None:
        self.released.set()

    def replay(self, event_id: str) -> None:
        """The next sync asks from the token the sync that first delivered ``event_id`` asked from."""
        with self._lock:
            first = next(s for s in self.syncs if event_id in s["events"])
            self._rewind_to = first["since"]

    def forget_next_sync_token(self) -> None:
        """The next sync asks from a token the server never issued: a homeserver that lost its database."""
        with self._lock:
            self._rewind_to = "s0_never_issued"

    def deliveries(self, event_id: str) -> list[int]:
        with self._lock:
            return [i for i, s in enumerate(self.syncs) if event_id in s["events"]]

    def acknowledged(self, event_id: str, delivery: int) -> bool:
        """A sync after the ``delivery``-th one that carried the event asked from its ``next_batch`` or a later one:
        the adapter committed that far (it asks from a token only once the rows it covers are stored)."""
        with self._lock:
            carried = [i for i, s in enumerate(self.syncs) if event_id in s["events"]]
            if len(carried) < delivery:
                return False
            first = carried[delivery - 1]
            tokens = {s["next_batch"] for s in self.syncs[first:] if s["next_batch"]}
            return any(s["since"] in tokens for s in self.syncs[first + 1:])

    def of(self, room: str, kind: str) -> list[dict]:
        with self._lock:
            return [dict(r) for r in self.requests if r["room"] == room and r["kind"] == kind]

    # ------------------------------------------------------------------------------------------------ relaying
    async def _relay(self, request: web.Request) -> web.StreamResponse:
        kind, room, txn = classify(request.method, request.path)
        body = await request.read()
        content = _json(body) if kind in ("send", "edit") else None
        if kind == "send" and content is not None and (content.get("m.relates_to") or {}).get("rel_type") == "m.replace":
            kind = "edit"
        record = {"at": time.monotonic(), "kind": kind, "room": room, "txn": txn, "status": None, "content": content}
        with self._lock:
            self.requests.append(record)
            if kind == "send" and time.monotonic() < self._banned_until.get(room, 0.0):
                self.violations += 1
            flood = self._floods.pop(0) if kind == "send" and self._floods else None
        if flood is not None:
            with self._lock:
                self._banned_until[room] = time.monotonic() + flood
            record["status"], record["retry_after_ms"] = 429, int(flood * 1000)
            return web.json_response({"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests",
                                      "retry_after_ms": int(flood * 1000)}, status=429)
        query = dict(request.query)
        sync = None
        if kind == "sync":
            with self._lock:
                rewound, self._rewind_to = self._rewind_to, None
                if rewound is not None:
                    query["since"] = rewound
                sync = {"since": query.get("since"), "next_batch": None, "events": [], "rewound": rewound is not None}
                self.syncs.append(sync)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        url = URL(self.upstream + request.raw_path.split("?")[0], encoded=True)
        async with self._client.request(request.method, url, params=query, data=body or None,
                                        headers=headers, timeout=aiohttp.ClientTimeout(total=120)) as answer:
            payload = await answer.read()
            status, content_type = answer.status, answer.headers.get("Content-Type", "application/json")
        record["status"] = status
        if status == 429:
            record["retry_after_ms"] = (_json(payload) or {}).get("retry_after_ms") or 0
        if sync is not None and status == 200:
            parsed = _json(payload) or {}
            with self._lock:
                sync["next_batch"] = parsed.get("next_batch")
                sync["events"] = [e.get("event_id") for r in ((parsed.get("rooms") or {}).get("join") or {}).values()
                                  for e in ((r.get("timeline") or {}).get("events") or []) if isinstance(e, dict)]
        if kind in ("send", "edit") and status == 200:
            event_id = (_json(payload) or {}).get("event_id")
            if event_id:
                with self._lock:
                    self.sent_contents[event_id] = content
        if kind == "send" and self._hold and status == 200 and self._hold_room in (None, room):
            self._hold = False
            self.holding.set()
            while not self.released.is_set():
                await asyncio.sleep(0.02)   # the answer held: the event exists, its id has not reached the adapter
        return web.Response(body=payload, status=status, content_type=content_type.split(";")[0])


def classify(method: str, path: str) -> tuple[str, Optional[str], Optional[str]]:
    """(kind, room id, transaction id) of a client-server API request: send | redact | typing | sync | other."""
    parts = [unquote(p) for p in path.split("/")]
    if path.endswith("/sync"):
        return "sync", None, None
    if "rooms" in parts:
        at = parts.index("rooms")
        room = parts[at + 1] if len(parts) > at + 1 else None
        verb = parts[at + 2] if len(parts) > at + 2 else ""
        if verb == "send" and method == "PUT":
            return "send", room, parts[-1]
        if verb == "redact":
            return "delete", room, parts[-1]
        if verb == "typing":
            return "typing", room, None
        return verb or "other", room, None
    return "other", None, None


def _json(data: bytes):
    try:
        return json.loads(data) if data else None
    except ValueError:
        return None
