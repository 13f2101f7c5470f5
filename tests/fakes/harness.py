"""What every fake platform server here shares: the aiohttp server in a thread or a process, the state file,
per-chat flood gates, scripted faults, the control API client, and the standalone entry point."""
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

UPLOAD_MAX_BYTES = 60 * 1024 * 1024

REPO_ROOT = Path(__file__).resolve().parents[2]



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

    KINDS = ("flood", "error", "drop", "drop_after", "none")   # "none": that call goes through (in a ``next`` list)

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
            kind = self.queued.pop(0)
            return None if kind == "none" else kind
        if self.flood_every and self.calls % self.flood_every == 0:
            return "flood"
        roll, edge = self.rng.random(), 0.0
        for kind, p in self.probabilities.items():
            edge += p
            if roll < edge:
                return kind
        return None


async def ping_forever(ws: web.WebSocketResponse, interval: float, payload: bytes,
                       quiet: Callable[[], bool]) -> None:
    """A server's WebSocket pings: one every ``interval`` seconds (0: none) while ``ws`` is open, skipped while
    ``quiet()`` (a connection the test has silenced). Runs as a task its connection's handler cancels."""
    while interval > 0 and not ws.closed:
        await asyncio.sleep(interval)  # the fake's own ping period, not a synchronisation point
        if not quiet() and not ws.closed:
            try:
                await ws.ping(payload)
            except (ConnectionError, RuntimeError):
                return


async def json_object(request: web.Request) -> dict:
    """A request's JSON object body ({} for anything else: the handlers then refuse what is missing)."""
    try:
        params = json.loads(await request.read() or b"null")
    except ValueError:
        return {}
    return params if isinstance(params, dict) else {}


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
        # Where it listens: loopback by default; the cluster lab (tests/cluster/shared_lab.py) sets its namespace's
        # address, and a unix socket beside it that the test process reaches from outside that namespace.
        self.host, self.unix_path = "127.0.0.1", None
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._runner: Optional[web.AppRunner] = None
        self._waiters: set[asyncio.Future] = set()  # long polls sleeping in wait_for_change
        self._hold_for: Optional[tuple[str, str]] = None   # (method, chat) whose next answer is held
        self.answer_held = threading.Event()        # such a call took effect; its answer waits
        self.answer_released = threading.Event()
        self.answer_released.set()
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
        return f"http://{self.host}:{self.port}"

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
        app = web.Application(client_max_size=UPLOAD_MAX_BYTES)   # uploads (sendPhoto, files) take more than 1 MB
        self.add_routes(app)
        # A short shutdown timeout: pending long polls are cut instead of holding a test's teardown.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.requested_port, reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]
        if self.unix_path:
            await web.UnixSite(self._runner, self.unix_path).start()
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

    # -- a held answer
    def hold_next_answer(self, method: str, chat: str) -> None:
        """The next call of ``method`` for ``chat`` that takes effect gets its answer only after ``release_held``
        (or once the server stops): the window between a request reaching the platform and its answer reaching the
        client, in which a test kills the client."""
        self.answer_released.clear()
        self.answer_held.clear()
        self._hold_for = (method, str(chat))

    def release_held(self) -> None:
        self._hold_for = None
        self.answer_released.set()

    async def hold_if_asked(self, method: str, chat: Any, took_effect: bool) -> None:
        """Called by every handler of a held method once the call is done, outside the state lock."""
        if not took_effect or self._hold_for != (method, str(chat)):
            return
        self._hold_for = None
        self.answer_held.set()
        while not self.answer_released.is_set():
            await asyncio.sleep(0.02)   # a threading.Event a test thread sets: polled from the server's loop

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
    """Entry point shared by the fakes' ``python -m`` mode: --port, --state, --config JSON (keyword arguments),
    --host (the address to listen on, loopback by default), --unix (a unix socket serving the same routes)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state", default=None)
    parser.add_argument("--config", default="{}", help="JSON object of constructor keyword arguments")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--unix", default=None)
    args = parser.parse_args(argv)
    fake = make_fake(port=args.port, state_file=args.state, **json.loads(args.config))
    fake.host, fake.unix_path = args.host, args.unix
    fake.serve_forever()



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



def _failure(status: int, error: str, **extra) -> tuple[int, dict]:
    return status, {"ok": False, "error": error, **extra}


async def read_params(request) -> dict:
    """A Bot-API-style request's parameters: the query string, then a JSON object or a form body on top (the
    Telegram and Slack fakes both take all three, as the real APIs do)."""
    params = dict(request.query)
    if request.can_read_body:
        if request.content_type == "application/json":
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("JSON body must be an object")
            params.update(body)
        else:  # application/x-www-form-urlencoded or multipart/form-data
            params.update({k: v for k, v in (await request.post()).items() if isinstance(v, str)})
    return params
