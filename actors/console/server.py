"""The console's HTTP side, on the console actor's bridge loop (aiohttp): the pages, the JSON API, the live streams.

The server knows requests, logins and streams, nothing of the gateway: every read and every action is handed to
the actor thread as a ``ConsoleAsk`` (a bridge item) and waits for its answer (``answer``), as the metrics server
does; the actor alone talks to the tree and the store. Who may read and who may write: access.py.

Routes (every one but /static/ and /favicon.ico behind the login when there is one):
  GET  /, /overview, /tree, /adapters, /chats, /deliveries, /pairing, /cron, /logs   the page (one file; the
       script draws the page the path names), and ``?token=`` on any of them logs in
  GET  /static/NAME           the page's script, style and icon: a fixed list, shipped in the package
  GET  /api/session           this browser's CSRF token and whether actions are allowed
  GET  /api/READ              a read (READS): tree, status, deliveries, pairing, sessions, transcript, search, cron, logs,
                              tasks
  GET  /api/media/KEY         a file of a transcript, from the media cache: a raster image inline, anything else
                              as a download, neither able to run in this page's origin
  GET  /api/stream?topic=T    server-sent events: each new snapshot of T (tree, status) while the page is open;
                              topic=logs&level=&actor=&q=&from=: the log's new lines that match, as they are
                              written, from byte ``from`` (where the page's GET /api/logs ended) or from now
  POST /api/actions/NAME      an action (ACTIONS), JSON body; refused unless allowed, same-site, with the CSRF token

Bounds: a request body of at most BODY_MAX_BYTES (every server's body bounds: supervision/http_serving.py), query
values of at most QUERY_MAX_CHARS, at most MAX_STREAMS open streams (503 past it), an answer waited for at most
ANSWER_TIMEOUT_S (503), a stream that cannot take an event within PUSH_TIMEOUT_S cut. A stream holds only the
newest snapshot of its topic, never a queue: a slow browser skips snapshots, it never makes the gateway hold more.
A logs stream reads at most LOG_CHUNK_BYTES of new log a look (skipping to the newest past that, and saying so), and
a browser that does not take it within PUSH_TIMEOUT_S is cut: the same bound.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from aiohttp import web

from actors.adapters.webchat.address_limits import came_over_tls
from actors.console import access, log_lines
from actors.media.sniff import sniff
from common.peer_credentials import allowed_uids, peer_uid
from supervision.http_serving import SECURITY_HEADERS, HttpLimits, host_allowed, serve
from storage.media import MediaCache, valid_key

STATIC_DIR = Path(__file__).resolve().parent / "static"
STATIC_FILES = {"console.js": "text/javascript", "pages.js": "text/javascript", "console.css": "text/css"}
PAGES = ("/", "/overview", "/tree", "/adapters", "/chats", "/deliveries", "/pairing", "/cron", "/logs")
READS = ("tree", "status", "deliveries", "pairing", "sessions", "transcript", "search", "cron", "logs", "adapters",
         "tasks")
ACTIONS = ("deliveries.retry", "deliveries.abandon", "pairing.approve", "pairing.deny", "sessions.suspend",
           "sessions.resume", "cron.run", "adapters.pause", "adapters.resume", "adapters.reconnect",
           "sessions.stop", "sessions.reset")
TOPICS = ("tree", "status")      # snapshots the actor makes while a page follows them
LOG_TOPIC = "logs"               # new lines of the log file, read here: no actor work, none with no page open
LOG_POLL_S = 0.5                 # how often an open logs stream looks for new lines
LOG_CHUNK_BYTES = 64 * 1024      # the most of the file one look reads (log_lines.read_new): a burst is skipped
BODY_MAX_BYTES = 16 * 1024
QUERY_MAX_CHARS = 200
MAX_STREAMS = 32
ANSWER_TIMEOUT_S = 10.0
PUSH_TIMEOUT_S = 5.0
STREAM_CHECK_S = 5.0       # how often a quiet stream looks whether its browser is gone
KEEPALIVE_S = 15.0         # a comment line on a quiet stream, so proxies keep it open
COOKIE_MAX_AGE_S = 400 * 24 * 3600
INLINE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")   # raster images a page shows as <img>


@dataclass(frozen=True)
class ConsoleAsk:
    """Bridge item: the server asks the actor one read or one action. ``args``: (name, value) pairs."""
    request_id: int
    op: str                    # a READS name, or "action:" + an ACTIONS name
    args: tuple = ()
    who: str = ""


@dataclass(frozen=True)
class StreamsOpen:
    """Bridge item: how many browsers follow each topic now (the actor walks the tree only while one does)."""
    counts: tuple              # ((topic, n), ...)


class Follower:
    """One open stream: the newest snapshot not yet sent, never more."""

    def __init__(self):
        self.newest: Optional[bytes] = None
        self.ready = asyncio.Event()

    def offer(self, data: bytes) -> None:
        self.newest = data
        self.ready.set()

    async def take(self, timeout: float) -> Optional[bytes]:
        try:
            await asyncio.wait_for(self.ready.wait(), timeout)
        except asyncio.TimeoutError:
            return None
        self.ready.clear()
        data, self.newest = self.newest, None
        return data


class ConsoleServer:
    def __init__(self, host: str, port: int, ask: Callable, limits: HttpLimits = HttpLimits(),
                 login_token: str = "", allow_actions: bool = False,
                 log_line: Callable[[int, str], None] = lambda level, text: None, media_root: str = "",
                 log_path: str = ""):
        self.host, self.port, self.ask, self.limits = host, port, ask, limits
        self.login_token, self.allow_actions, self.log_line = login_token, allow_actions, log_line
        self.secret = os.urandom(32)    # CSRF tokens of this server's life: a restart asks the page for a new one
        self.pending: dict[int, asyncio.Future] = {}
        self.ids = itertools.count(1)
        self.followers: dict[str, set[Follower]] = {topic: set() for topic in TOPICS}
        self.latest: dict[str, bytes] = {}
        self.runner: Optional[web.AppRunner] = None
        self.media = MediaCache(media_root) if media_root else None
        self.log_path = log_path
        self.log_streams = 0

    # ------------------------------------------------------------------------------------------------ life
    async def start(self) -> int:
        app = web.Application(middlewares=[self._guard], client_max_size=BODY_MAX_BYTES)
        for path in PAGES:
            app.router.add_get(path, self._page)
        app.router.add_get("/chats/{session}", self._page)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/favicon.ico", self._no_icon)
        app.router.add_get("/api/session", self._session)
        app.router.add_get("/api/stream", self._stream)
        app.router.add_get("/api/media/{key}", self._media)
        app.router.add_get("/api/{read}", self._read)
        app.router.add_post("/api/actions/{action}", self._action)
        self.runner, self.port = await serve(app, self.host, self.port, limits=self.limits, shutdown_timeout=0.5,
                                             on_refused=lambda text: self.log_line(logging.WARNING, f"console: {text}"))
        return self.port

    async def stop(self) -> None:
        runner, self.runner = self.runner, None
        if runner is not None:
            await runner.cleanup()

    # ------------------------------------------------------------------------------------ from the actor
    def answer(self, request_id: int, status: int, payload) -> None:
        future = self.pending.get(request_id)
        if future is not None and not future.done():
            future.set_result((status, payload))

    def publish(self, topic: str, payload) -> None:
        data = json.dumps(payload, default=str, separators=(",", ":")).encode()
        self.latest[topic] = data
        for follower in self.followers.get(topic, ()):
            follower.offer(data)

    # ---------------------------------------------------------------------------------------------- guard
    @web.middleware
    async def _guard(self, request: web.Request, handler):
        if not (request.path.startswith("/static/") or request.path == "/favicon.ico"):
            refusal = self._refusal(request)
            if refusal is not None:
                return refusal
        response = await handler(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    def _refusal(self, request: web.Request) -> Optional[web.StreamResponse]:
        given = request.query.get("token")
        if self.login_token and given is not None and request.method == "GET" and not request.path.startswith("/api/"):
            if access.same(given, self.login_token):
                page = request.path if request.path.startswith("/") and not request.path.startswith("//") else "/"
                response = web.Response(status=303, headers={"Location": page})   # this site's own page only
                response.set_cookie(access.LOGIN_COOKIE, access.login_proof(self.login_token), path="/",
                                    max_age=COOKIE_MAX_AGE_S, httponly=True, samesite="Strict",
                                    secure=came_over_tls(request.secure, request.remote,
                                                         request.headers.get("X-Forwarded-Proto")))
                return response
            self.log_line(logging.WARNING, f"console: a wrong login token from {request.remote}")
            return web.Response(status=401, text="wrong login token\n")
        verdict = access.read_verdict(self.login_token, request.cookies.get(access.LOGIN_COOKIE, ""),
                                      host_allowed(request.headers.get("Host", "")))
        if verdict.allowed and not self.login_token:   # loopback without login: this host's other users kept out
            uid = _peer_uid(request)
            verdict = access.peer_verdict(uid, allowed_uids())
            if not verdict.allowed:
                self.log_line(logging.WARNING, f"console: refused a request of another local user (uid {uid})")
        if verdict.allowed:
            return None
        if verdict.status == 421:
            self.log_line(logging.WARNING, f"console: refused a request for host "
                                           f"{request.headers.get('Host', '')[:80]!r}")
        return _refused(request, verdict)

    def _login(self, request: web.Request) -> str:
        return access.login_of(self.login_token, request.cookies.get(access.LOGIN_COOKIE, ""))

    def _who(self, request: web.Request) -> str:
        return access.who(request.remote or "", self.login_token)

    # ---------------------------------------------------------------------------------------------- pages
    async def _page(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC_DIR / "index.html", headers={"Content-Type": "text/html; charset=utf-8"})

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in STATIC_FILES:   # a fixed list: no path from the URL ever reaches the file system
            raise web.HTTPNotFound()
        return web.FileResponse(STATIC_DIR / name, headers={"Content-Type": f"{STATIC_FILES[name]}; charset=utf-8"})

    async def _no_icon(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=204)

    async def _session(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"csrf": access.csrf_token(self.secret, self._login(request)),
                                  "allow_actions": self.allow_actions, "who": self._who(request)})

    async def _media(self, request: web.Request) -> web.StreamResponse:
        """A file a transcript names, by its cache key (a SHA-256: no key names a path outside the cache). The
        operator reads every transcript here anyway, so any cached file may be shown; it is served so that no byte
        of it can run in this origin: a raster image under its sniffed type, anything else as an attachment."""
        key = request.match_info["key"]
        data = await asyncio.to_thread(self.media.read, key) if self.media and valid_key(key) else None
        if data is None:
            return web.json_response({"error": "no such file in the media cache"}, status=404)
        mime = sniff(data[:4096])
        inline = mime in INLINE_TYPES
        return web.Response(body=data, headers={
            "Content-Type": mime if inline else "application/octet-stream",
            "Content-Disposition": "inline" if inline else f"attachment; filename={key[:16]}",
            "Content-Security-Policy": "default-src 'none'; sandbox",
            "Cache-Control": "private, max-age=86400"})   # named by its hash: the bytes never change

    # ------------------------------------------------------------------------------------------ the API
    async def _read(self, request: web.Request) -> web.StreamResponse:
        read = request.match_info["read"]
        if read not in READS:
            return web.json_response({"error": f"no such read; try one of {', '.join(READS)}"}, status=404)
        args = tuple((k, v) for k, v in request.query.items())
        if any(len(k) > 40 or len(v) > QUERY_MAX_CHARS for k, v in args) or len(args) > 8:
            return web.json_response({"error": f"query values up to {QUERY_MAX_CHARS} characters"}, status=400)
        return await self._ask(read, args, self._who(request))

    async def _action(self, request: web.Request) -> web.StreamResponse:
        action = request.match_info["action"]
        verdict = access.write_verdict(self.allow_actions, self.secret, self._login(request),
                                       request.headers.get(access.CSRF_HEADER, ""), request.headers.get("Origin"),
                                       request.headers.get("Host", ""))
        if not verdict.allowed:
            self.log_line(logging.WARNING, f"console: refused action {action[:40]!r} by {self._who(request)}: "
                                           f"{verdict.reason}")
            return _refused(request, verdict)
        if action not in ACTIONS:
            return web.json_response({"error": f"no such action; try one of {', '.join(ACTIONS)}"}, status=404)
        try:
            body = json.loads(await request.read() or b"{}")
        except (ValueError, UnicodeDecodeError):
            return web.json_response({"error": "the body must be a JSON object"}, status=400)
        if not isinstance(body, dict) or not all(isinstance(v, str) and len(v) <= QUERY_MAX_CHARS
                                                 for v in body.values()):
            return web.json_response({"error": f"the body must be a JSON object of strings up to "
                                               f"{QUERY_MAX_CHARS} characters"}, status=400)
        return await self._ask(f"action:{action}", tuple(body.items()), self._who(request))

    async def _ask(self, op: str, args: tuple, who: str) -> web.StreamResponse:
        request_id = next(self.ids)
        future = self.pending[request_id] = asyncio.get_running_loop().create_future()
        self.ask(ConsoleAsk(request_id, op, args, who))
        try:
            status, payload = await asyncio.wait_for(future, ANSWER_TIMEOUT_S)
        except asyncio.TimeoutError:
            status, payload = 503, {"error": "the gateway did not answer in time; try again"}
        finally:
            self.pending.pop(request_id, None)
        return web.Response(status=status, text=json.dumps(payload, default=str),
                            content_type="application/json")

    # ------------------------------------------------------------------------------------------ streams
    async def _stream(self, request: web.Request) -> web.StreamResponse:
        topic = request.query.get("topic", "")
        if topic not in (*TOPICS, LOG_TOPIC):
            return web.json_response({"error": f"topics: {', '.join((*TOPICS, LOG_TOPIC))}"}, status=404)
        if sum(len(f) for f in self.followers.values()) + self.log_streams >= MAX_STREAMS:
            return web.json_response({"error": "too many open console pages"}, status=503)
        if topic == LOG_TOPIC:
            return await self._log_stream(request)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **SECURITY_HEADERS})
        await response.prepare(request)
        follower = Follower()
        if topic in self.latest:
            follower.offer(self.latest[topic])
        self.followers[topic].add(follower)
        self._streams_changed()
        quiet = 0.0
        try:
            while request.transport is not None and not request.transport.is_closing():
                data = await follower.take(STREAM_CHECK_S)
                if data is None:
                    quiet += STREAM_CHECK_S
                    if quiet < KEEPALIVE_S:
                        continue
                    data, quiet = b"", 0.0
                else:
                    quiet = 0.0
                chunk = b"data: " + data + b"\n\n" if data else b": keep-alive\n\n"
                await asyncio.wait_for(response.write(chunk), PUSH_TIMEOUT_S)
        except (ConnectionError, asyncio.TimeoutError, RuntimeError):
            pass   # the browser went away, or cannot keep up: it reconnects (EventSource does) and gets the newest
        finally:
            self.followers[topic].discard(follower)
            if not self.followers[topic]:
                self.latest.pop(topic, None)   # not followed from now on: the next page must not start from it
            self._streams_changed()
        return response

    async def _log_stream(self, request: web.Request) -> web.StreamResponse:
        """The log's new lines that match the page's filters, from where the page's read of the tail ended
        (``from``, GET /api/logs answered it) or else from the moment it opens: one event per look that found any,
        {"lines": [...], "skipped": bytes}. A ``from`` past the file's end (rotated since) reads the new file from its
        start; one far behind skips to the newest LOG_CHUNK_BYTES, as any reader that falls behind does."""
        filters = {k: request.query.get(k, "")[:QUERY_MAX_CHARS] for k in ("level", "actor", "q")}
        asked_from = request.query.get("from", "")
        try:
            position = (int(asked_from) if asked_from.isdigit() and len(asked_from) <= 15
                        else (await asyncio.to_thread(log_lines.tail, self.log_path, 0))[1])
        except OSError as exc:
            return web.json_response({"error": f"cannot read the log: {exc.strerror}"}, status=503)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **SECURITY_HEADERS})
        await response.prepare(request)
        self.log_streams += 1
        quiet = 0.0
        try:
            while request.transport is not None and not request.transport.is_closing():
                await asyncio.sleep(LOG_POLL_S)
                try:
                    lines, position, skipped = await asyncio.to_thread(log_lines.read_new, self.log_path, position,
                                                                       LOG_CHUNK_BYTES)
                except OSError:
                    lines, skipped = [], 0            # rotated away this instant: the next look finds the new file
                lines = log_lines.matching(lines, filters["level"], filters["actor"], filters["q"])
                if lines or skipped:
                    chunk = b"data: " + json.dumps({"lines": lines, "skipped": skipped}).encode() + b"\n\n"
                    quiet = 0.0
                else:
                    quiet += LOG_POLL_S
                    if quiet < KEEPALIVE_S:
                        continue
                    chunk, quiet = b": keep-alive\n\n", 0.0
                await asyncio.wait_for(response.write(chunk), PUSH_TIMEOUT_S)
        except (ConnectionError, asyncio.TimeoutError, RuntimeError):
            pass   # gone, or too slow to take what is written: it reconnects (EventSource does) from the newest
        finally:
            self.log_streams -= 1
        return response

    def _streams_changed(self) -> None:
        self.ask(StreamsOpen(tuple((topic, len(f)) for topic, f in self.followers.items())))


def _refused(request: web.Request, verdict: access.Verdict) -> web.StreamResponse:
    if request.path.startswith("/api/"):
        return web.json_response({"error": verdict.reason}, status=verdict.status, headers=SECURITY_HEADERS)
    return web.Response(status=verdict.status, text=verdict.reason + "\n", headers=SECURITY_HEADERS)


def _peer_uid(request: web.Request) -> Optional[int]:
    """Who owns the other end of the request's connection (None: it cannot be told)."""
    sock = request.transport.get_extra_info("socket") if request.transport is not None else None
    return peer_uid(sock) if sock is not None else None
