"""A generic fake chat platform, plus the machinery every fake server here shares.

Wire format (JSON everywhere; errors are ``{"ok": false, "error": <code>}`` with the HTTP status shown):

    GET  /bot/updates?offset=N&timeout=S
         -> {"ok": true, "updates": [{"id": int, "chat": str, "user": str, "text": str, "message_id": str,
                                      "thread": str|null, "chat_type": "dm"|"group"}]}
            ids increase; only ids >= offset are returned; waits up to S seconds while there are none.
            The highest offset seen is reported as ``acked_offset`` in the stats.
    POST /bot/send    {"chat", "text", "reply_to"?, "thread"?}  -> {"ok": true, "message_id": str}
    POST /bot/edit    {"chat", "message_id", "text"}           -> {"ok": true}
                      same text -> 400 "not_modified"; unknown or deleted message -> 400 "not_found"
    POST /bot/delete  {"chat", "message_id"}                   -> {"ok": true}; unknown -> 400 "not_found"
    POST /bot/typing  {"chat"}                                 -> {"ok": true}
    Limits: text over ``text_limit`` chars (default 4000) -> 400 "too_long"; empty text -> 400 "empty".
    Pacing: send/edit/delete share a per-chat token bucket (one op per ``op_interval`` s, ``op_burst`` at once;
    off when op_interval is 0). Over budget -> 429 {"error": "flood", "retry_after": float}; until that time
    passes every op on the chat is refused again and counted in stats as ``retry_after_violations``.
    Scripted faults (see FaultScript): 429 storms, 500 {"error": "internal"}, connections dropped before
    ("drop") or after ("drop_after") the operation took effect.

Control API (for tests, also from another process):

    POST /_control/inject   one message {"chat", "text", "user"?, "chat_type"?, "thread"?}, a list of them,
                            or {"messages": [...]}                       -> {"ok": true, "ids": [...]}
    GET  /_control/chats    -> {"chats": [...]}
    GET  /_control/chats/{chat} -> {"chat", "messages": [{"message_id", "text", "history": [{"text", "at"}],
                            "deleted", "deleted_at", "reply_to", "thread", "sent_at"}], "ops": [{"op", "at",
                            "message_id", "status", "error"}], "inbound": [updates]}
    GET  /_control/stats    POST /_control/faults {FaultScript fields}   POST /_control/config {text_limit,
                            op_interval, op_burst}   POST /_control/reset

Run standalone with ``python -m tests.fakes.fakeplatform --port P --state FILE``; it prints one JSON line
``{"ready": true, "port": P, "base_url": ...}`` when listening. With ``--state`` every change is written
atomically to FILE and reloaded at start, so a restarted fake keeps its history. Configuration and faults are
not persisted: pass them again (``--config JSON``) on restart.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import os
import random
import selectors
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Optional

from aiohttp import web

REPO_ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------- shared machinery

class TokenBucket:
    """``burst`` operations at once, refilled at one per ``interval`` seconds; interval 0 means unlimited."""

    def __init__(self, interval: float, burst: int):
        self.interval, self.burst = interval, max(1, int(burst))
        self.tokens, self.stamp = float(self.burst), time.monotonic()

    def wait_needed(self, now: float) -> float:
        """Seconds until one token is available (0 when one is available now)."""
        if self.interval <= 0:
            return 0.0
        elapsed = max(0.0, now - self.stamp)  # ``now`` may predate the bucket's creation
        self.tokens = min(self.burst, self.tokens + elapsed / self.interval)
        self.stamp = max(self.stamp, now)
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) * self.interval

    def take(self) -> None:
        if self.interval > 0:
            self.tokens -= 1


class FloodGate:
    """Token buckets by key plus the ban a 429 imposes, as real platforms do: a client that comes back before
    ``retry_after`` has passed is refused again, and that is counted as a violation a test can assert on."""

    GRACE = 0.05  # a client sleeping exactly retry_after may arrive a hair early on the server's clock

    def __init__(self):
        self.buckets: dict[Any, TokenBucket] = {}
        self.banned_until: dict[Any, float] = {}

    def bucket(self, key, interval: float, burst: int) -> TokenBucket:
        if key not in self.buckets:
            self.buckets[key] = TokenBucket(interval, burst)
        return self.buckets[key]

    def ban_remaining(self, keys, now: float) -> float:
        return max([self.banned_until.get(k, 0.0) - now for k in keys] + [0.0])

    def ban(self, key, now: float, seconds: float) -> None:
        self.banned_until[key] = max(self.banned_until.get(key, 0.0), now + seconds - self.GRACE)


class FaultScript:
    """Scripted failures for the methods in ``methods`` (None: the fake's write operations).

    ``next`` is a queue of kinds served first, in order; then every ``flood_every``-th call is a 429; then each
    call draws once from a seeded RNG against p_flood, p_error, p_drop, p_drop_after (cumulative).
    Kinds: "flood" (429 with ``flood_retry_after``), "error" (500), "drop" (connection closed before the
    operation takes effect), "drop_after" (it took effect but the answer is lost: the ambiguous case).
    """

    KINDS = ("flood", "error", "drop", "drop_after")

    def __init__(self, default_methods: tuple[str, ...], **settings):
        self.default_methods = default_methods
        self.configure(**settings)

    def configure(self, p_flood=0.0, p_error=0.0, p_drop=0.0, p_drop_after=0.0, flood_every=0, seed=None,
                  flood_retry_after=1.0, next=(), methods=None) -> None:
        unknown = [k for k in next if k not in self.KINDS]
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}")
        self.probabilities = {"flood": float(p_flood), "error": float(p_error), "drop": float(p_drop),
                              "drop_after": float(p_drop_after)}
        self.flood_every, self.flood_retry_after = int(flood_every), float(flood_retry_after)
        self.queued = list(next)
        self.methods = tuple(methods) if methods is not None else self.default_methods
        self.rng, self.calls = random.Random(seed), 0

    def draw(self, method: str) -> Optional[str]:
        if method not in self.methods:
            return None
        self.calls += 1
        if self.queued:
            return self.queued.pop(0)
        if self.flood_every and self.calls % self.flood_every == 0:
            return "flood"
        roll, edge = self.rng.random(), 0.0
        for kind, p in self.probabilities.items():
            edge += p
            if roll < edge:
                return kind
        return None


def drop_connection(request: web.Request) -> web.Response:
    """Close the socket without answering; the client sees a disconnect. The response returned is never sent."""
    if request.transport is not None:
        request.transport.close()
    return web.Response(status=599)


class FakeServer:
    """An aiohttp fake on 127.0.0.1, in a background thread (context manager) or as the main program.

    State is one JSON-able dict guarded by one re-entrant lock, so test threads and the server's loop may both
    touch it. ``mutate()`` is the only way to change it: it persists the state file and wakes every waiter
    (``wait_for`` in test threads, long polls in the loop). Subclasses give ``initial_state`` and ``add_routes``.
    """

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None):
        self.requested_port, self.state_file = port, state_file
        self.port: Optional[int] = None
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._runner: Optional[web.AppRunner] = None
        self._waiters: set[asyncio.Future] = set()  # long polls sleeping in wait_for_change
        self.state = self.initial_state()
        if state_file and os.path.exists(state_file):
            with open(state_file, encoding="utf-8") as f:
                self.state = json.load(f)

    # -- to override
    def initial_state(self) -> dict:
        raise NotImplementedError

    def add_routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def on_started(self) -> None:
        """Runs in the server loop once listening (start background tasks here)."""

    async def on_stopping(self) -> None:
        """Runs in the server loop before the listener closes."""

    # -- lifecycle
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FakeServer":
        loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name=type(self).__name__, daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._start_site(loop), loop).result(timeout=10)
        except BaseException:  # e.g. the port is taken: don't leave a loop thread behind
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout=10)
            self._loop = None
            raise
        return self

    def stop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._stop_site(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=10)
        loop.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    async def _start_site(self, loop) -> None:
        self._loop = loop
        app = web.Application()
        self.add_routes(app)
        # A short shutdown timeout: pending long polls are cut instead of holding a test's teardown.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.requested_port, reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]
        await self.on_started()

    async def _stop_site(self) -> None:
        await self.on_stopping()
        await self._runner.cleanup()
        # Long polls whose client went away are still waiting; end them rather than let the loop close on them.
        leftovers = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in leftovers:
            task.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)

    def serve_forever(self) -> None:
        """Standalone mode: listen, print the ready line, serve until SIGTERM/SIGINT."""
        async def main():
            loop = asyncio.get_running_loop()
            await self._start_site(loop)
            print(json.dumps({"ready": True, "port": self.port, "base_url": self.base_url}), flush=True)
            stop = asyncio.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
            await self._stop_site()
        asyncio.run(main())

    # -- state
    @contextlib.contextmanager
    def mutate(self):
        with self._lock:
            yield self.state
            self._persist()
            self._changed.notify_all()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake_long_polls)

    def read(self, select: Callable[[dict], Any]) -> Any:
        """A deep copy of part of the state, so callers never see it change under them."""
        with self._lock:
            return copy.deepcopy(select(self.state))

    def reset_state(self) -> None:
        with self.mutate() as state:
            state.clear()
            state.update(self.initial_state())

    def _persist(self) -> None:
        if not self.state_file:
            return
        # Write-then-rename so a reader (or a fake killed mid-write) never sees half a file. No fsync: only the
        # fake process dies in these tests, and the page cache survives that.
        tmp = f"{self.state_file}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.state, f)
        os.replace(tmp, self.state_file)

    def _wake_long_polls(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            _release(waiter)

    async def wait_for_change(self, timeout: float) -> None:
        """Sleep until the next ``mutate`` or ``timeout``. Callers check the state first, then call this without
        awaiting anything in between, so a change between check and wait cannot be missed.

        A bare future rather than asyncio.wait_for(event.wait()): on Python 3.11 wait_for swallows a
        cancellation that races with the event firing, and the fake would then never stop."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._waiters.add(waiter)
        timer = loop.call_later(max(0.0, timeout), _release, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiters.discard(waiter)

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.05) -> Any:
        """Poll ``predicate`` (woken early by every state change) until it is truthy; TimeoutError at the deadline."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"condition not met within {timeout} s")
                self._changed.wait(min(interval, remaining))


def _release(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)


class ControlClient:
    """Synchronous client for a fake's ``/_control`` API, usable from any process or thread."""

    def __init__(self, base_url: str, timeout: float = 5.0):
        self.base_url, self.timeout = base_url.rstrip("/"), timeout

    def get(self, path: str) -> Any:
        return self._request(urllib.request.Request(self.base_url + path))

    def post(self, path: str, body: Any = None) -> Any:
        data = json.dumps({} if body is None else body).encode()
        return self._request(urllib.request.Request(self.base_url + path, data=data, method="POST",
                                                    headers={"Content-Type": "application/json"}))

    def _request(self, req) -> Any:
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            return json.loads(resp.read() or b"null")

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.05) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise TimeoutError(f"condition not met within {timeout} s")
            time.sleep(interval)  # polling interval of a deadline loop, not synchronisation by itself


class StandaloneFake:
    """A fake running as its own process (``python -m <module>``), so it outlives a gateway killed with -9.

    ``start()`` waits for the ready line and keeps the port, so ``kill()`` + ``start()`` brings the fake back
    on the same address with the history from its state file."""

    def __init__(self, module: str, state_file: str, *, port: int = 0, args: tuple[str, ...] = ()):
        self.module, self.state_file, self.port, self.args = module, str(state_file), port, tuple(args)
        self.proc: Optional[subprocess.Popen] = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def control(self) -> ControlClient:
        return ControlClient(self.base_url)

    def start(self, timeout: float = 10.0) -> "StandaloneFake":
        cmd = [sys.executable, "-m", self.module, "--port", str(self.port), "--state", self.state_file, *self.args]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
        self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout) or not (line := self.proc.stdout.readline()):
                self.kill()
                raise RuntimeError(f"{self.module} did not become ready within {timeout} s")
        self.port = json.loads(line)["port"]
        return self

    def kill(self) -> None:
        """SIGKILL: nothing is flushed; only what the state file already holds survives."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        if self.proc:
            self.proc.wait(timeout=10)
            self.proc.stdout.close()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
        self.kill()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def standalone_main(make_fake: Callable[..., FakeServer], argv=None) -> None:
    """Entry point shared by the fakes' ``python -m`` mode: --port, --state, --config JSON (keyword arguments)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state", default=None)
    parser.add_argument("--config", default="{}", help="JSON object of constructor keyword arguments")
    args = parser.parse_args(argv)
    make_fake(port=args.port, state_file=args.state, **json.loads(args.config)).serve_forever()



def control_route(app: web.Application, method: str, path: str, fn: Callable[..., Any]) -> None:
    """Expose ``fn(body, **path_params)`` as a JSON control endpoint; a bad argument answers 400, not 500."""
    async def handler(request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else {}
        try:
            result = fn(body, **request.match_info)
        except (TypeError, ValueError, KeyError) as exc:
            return web.json_response({"ok": False, "error": f"{type(exc).__name__}: {exc}"}, status=400)
        return web.json_response({"ok": True} if result is None else result)
    app.router.add_route(method, path, handler)


# ------------------------------------------------------------------------------------------- the generic platform

WRITE_OPS = ("send", "edit", "delete", "typing")
PACED_OPS = ("send", "edit", "delete")  # typing shows a hint and costs no budget, as on Telegram


def _failure(status: int, error: str, **extra) -> tuple[int, dict]:
    return status, {"ok": False, "error": error, **extra}


class FakePlatform(FakeServer):
    """The generic fake; see the module docstring for its wire format. ``reset()`` keeps the configuration."""

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None, text_limit: int = 4000,
                 op_interval: float = 0.0, op_burst: int = 1):
        super().__init__(port=port, state_file=state_file)
        self.faults = FaultScript(WRITE_OPS)
        self.configure(text_limit=text_limit, op_interval=op_interval, op_burst=op_burst)

    def initial_state(self) -> dict:
        return {"next_update_id": 1, "next_message_id": 1, "updates": [], "chats": {},
                "stats": {"requests": {}, "errors": {}, "floods_served": 0, "retry_after_violations": 0,
                          "acked_offset": 0}}

    # -- in-process API
    def configure(self, text_limit=None, op_interval=None, op_burst=None) -> None:
        with self._lock:
            self.text_limit = int(text_limit) if text_limit is not None else self.text_limit
            self.op_interval = float(op_interval) if op_interval is not None else self.op_interval
            self.op_burst = int(op_burst) if op_burst is not None else self.op_burst
            self.flood = FloodGate()

    def set_faults(self, **settings) -> None:
        """Replace the fault script (see FaultScript.configure); no arguments turns faults off."""
        with self._lock:
            self.faults.configure(**settings)

    def reset(self) -> None:
        with self._lock:
            self.faults.configure()
            self.flood = FloodGate()
            self.reset_state()

    def inject(self, chat, text: str, user="user", chat_type: str = "dm", thread=None) -> int:
        """Queue an inbound message; returns its update id."""
        if chat_type not in ("dm", "group"):
            raise ValueError(f"chat_type must be dm or group, not {chat_type!r}")
        with self.mutate() as state:
            update = {"id": state["next_update_id"], "chat": str(chat), "user": str(user), "text": str(text),
                      "message_id": str(state["next_message_id"]),
                      "thread": None if thread is None else str(thread), "chat_type": chat_type}
            state["next_update_id"] += 1
            state["next_message_id"] += 1
            state["updates"].append(update)
            self._chat(state, chat)
        return update["id"]

    def messages(self, chat) -> list[dict]:
        """The bot's messages in ``chat``, oldest first, deleted ones included (``deleted`` flag)."""
        return self.read(lambda s: list(s["chats"].get(str(chat), {}).get("messages", {}).values()))

    def final_texts(self, chat) -> list[str]:
        return [m["text"] for m in self.messages(chat) if not m["deleted"]]

    def ops(self, chat, op: Optional[str] = None) -> list[dict]:
        """Every operation the bot attempted on ``chat`` (refused ones too), with wall-clock ``at``."""
        ops = self.read(lambda s: s["chats"].get(str(chat), {}).get("ops", []))
        return [o for o in ops if op is None or o["op"] == op]

    def stats(self) -> dict:
        return self.read(lambda s: s["stats"])

    def timeline(self, chat) -> dict:
        def select(s):
            rec = s["chats"].get(str(chat), {"messages": {}, "ops": []})
            return {"chat": str(chat), "messages": list(rec["messages"].values()), "ops": rec["ops"],
                    "inbound": [u for u in s["updates"] if u["chat"] == str(chat)]}
        return self.read(select)

    # -- HTTP
    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/bot/updates", self._handle_updates)
        for op in WRITE_OPS:
            app.router.add_post(f"/bot/{op}", self._op_handler(op))
        control_route(app, "POST", "/_control/inject", self._control_inject)
        control_route(app, "GET", "/_control/chats", lambda _: {"chats": self.read(lambda s: list(s["chats"]))})
        control_route(app, "GET", "/_control/chats/{chat}", lambda _, chat: self.timeline(chat))
        control_route(app, "GET", "/_control/stats", lambda _: self.stats())
        control_route(app, "POST", "/_control/faults", lambda body: self.set_faults(**body))
        control_route(app, "POST", "/_control/config", lambda body: self.configure(**body))
        control_route(app, "POST", "/_control/reset", lambda _: self.reset())

    def _control_inject(self, body) -> dict:
        items = body if isinstance(body, list) else body.get("messages", [body])
        return {"ok": True, "ids": [self.inject(**item) for item in items]}

    async def _handle_updates(self, request: web.Request) -> web.Response:
        try:
            offset = int(request.query.get("offset", 0))
            timeout = min(float(request.query.get("timeout", 0)), 60.0)
        except ValueError:
            return web.json_response({"ok": False, "error": "bad_request"}, status=400)
        with self._lock:  # set_faults may run in a test thread meanwhile
            fault = self.faults.draw("poll")
        if fault == "drop":
            return drop_connection(request)
        if fault in ("error", "flood"):
            status, payload = self._fault_failure(fault, None)
            return web.json_response(payload, status=status)
        with self.mutate() as state:
            state["stats"]["requests"]["poll"] = state["stats"]["requests"].get("poll", 0) + 1
            state["stats"]["acked_offset"] = max(state["stats"]["acked_offset"], offset)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            updates = self.read(lambda s: [u for u in s["updates"] if u["id"] >= offset])
            if updates or loop.time() >= deadline:
                answer = web.json_response({"ok": True, "updates": updates})
                return drop_connection(request) if fault == "drop_after" else answer
            await self.wait_for_change(deadline - loop.time())

    def _op_handler(self, op: str):
        async def handler(request: web.Request) -> web.Response:
            try:
                body = await request.json()
                chat = str(body["chat"])
            except (ValueError, KeyError, TypeError):
                return web.json_response({"ok": False, "error": "bad_request"}, status=400)
            with self.mutate() as state:
                fault = self.faults.draw(op)
                status, payload = self._apply(state, op, chat, body, fault)
            if fault in ("drop", "drop_after"):
                return drop_connection(request)
            return web.json_response(payload, status=status)
        return handler

    def _chat(self, state: dict, chat) -> dict:
        return state["chats"].setdefault(str(chat), {"messages": {}, "ops": []})

    def _fault_failure(self, fault: str, chat: Optional[str]) -> tuple[int, dict]:
        if fault == "error":
            return _failure(500, "internal")
        retry_after = self.faults.flood_retry_after
        if chat is not None:
            self.flood.ban(chat, time.monotonic(), retry_after)
        return _failure(429, "flood", retry_after=retry_after)

    def _apply(self, state: dict, op: str, chat: str, body: dict, fault: Optional[str]) -> tuple[int, dict]:
        """Decide and perform one bot operation; every attempt lands in the chat's ops log."""
        stats = state["stats"]
        stats["requests"][op] = stats["requests"].get(op, 0) + 1
        if fault == "drop":  # the request never reached the platform's logic
            status, payload = _failure(599, "dropped")
        elif fault in ("error", "flood"):
            status, payload = self._fault_failure(fault, chat)
        else:
            status, payload = self._perform(state, op, chat, body)
        if status == 429:
            stats["floods_served"] += 1
        if status != 200:
            stats["errors"][payload["error"]] = stats["errors"].get(payload["error"], 0) + 1
        message_id = payload.get("message_id", body.get("message_id"))
        self._chat(state, chat)["ops"].append({"op": op, "at": time.time(), "status": status,
                                               "message_id": None if message_id is None else str(message_id),
                                               "error": payload.get("error")})
        return status, payload

    def _perform(self, state: dict, op: str, chat: str, body: dict) -> tuple[int, dict]:
        now, messages = time.monotonic(), self._chat(state, chat)["messages"]
        paced = op in PACED_OPS
        if paced and (banned_for := self.flood.ban_remaining([chat], now)) > 0:
            state["stats"]["retry_after_violations"] += 1
            return _failure(429, "flood", retry_after=round(banned_for, 3))
        text = body.get("text")
        if op in ("send", "edit"):
            if not isinstance(text, str) or not text:
                return _failure(400, "empty")
            if len(text) > self.text_limit:
                return _failure(400, "too_long")
        message = messages.get(str(body.get("message_id")))
        if op in ("edit", "delete") and (message is None or message["deleted"]):
            return _failure(400, "not_found")
        if op == "edit" and message["text"] == text:
            return _failure(400, "not_modified")
        if paced:
            bucket = self.flood.bucket(chat, self.op_interval, self.op_burst)
            if (wait := bucket.wait_needed(now)) > 0:
                self.flood.ban(chat, now, wait)
                return _failure(429, "flood", retry_after=round(wait, 3))
            bucket.take()
        at = time.time()
        if op == "send":
            message_id = str(state["next_message_id"])
            state["next_message_id"] += 1
            messages[message_id] = {"message_id": message_id, "text": text, "history": [{"text": text, "at": at}],
                                    "deleted": False, "deleted_at": None, "sent_at": at,
                                    "reply_to": body.get("reply_to"), "thread": body.get("thread")}
            return 200, {"ok": True, "message_id": message_id}
        if op == "edit":
            message["text"] = text
            message["history"].append({"text": text, "at": at})
        elif op == "delete":
            message["deleted"], message["deleted_at"] = True, at
        return 200, {"ok": True}


if __name__ == "__main__":
    standalone_main(FakePlatform)
