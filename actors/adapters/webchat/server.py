"""The web chat's HTTP side: the static page and one WebSocket per tab, on the configured host only (aiohttp).

The server knows frames and connections, nothing of the gateway: every valid frame goes to its ``FrameHandler``
(the adapter), which answers it. It keeps the open connections per visitor so the adapter can push operations.

Who may connect: the listening socket is bound to the configured host (loopback by default), and since any web
site the user visits could also open a WebSocket to 127.0.0.1, two more checks apply to every request. The Host
header must be an IP literal or ``localhost`` (a DNS-rebinding attacker's page carries its own domain name there),
and a WebSocket's Origin, when the browser sends one, must be this very host and port (a foreign page's Origin is
its own site). Clients that are not browsers send no Origin and are let in: they could reach the port anyway.

Who is who: the page (``/``) gives a browser without one a visitor credential, 256 random bits, in an ``HttpOnly;
SameSite=Strict`` cookie (no script reads it, no other site's request carries it); the WebSocket takes the visitor
from that cookie alone, and its id is a hash of it (protocol.visitor_id), so knowing a visitor id (from a log)
gives no access to that chat. A client-chosen ``?visitor=`` is refused.

An operator login (``login_token``), for a page reachable beyond loopback: ``/?token=THE_TOKEN`` sets a login cookie
(an HMAC of the token, so changing the token logs everyone out) and redirects to ``/``; without that cookie the page
and the WebSocket answer 401 (the static script and style are public: they hold no data). With a login the Host
check is not needed (a rebinding page gets no cookie of this site) and a domain name may serve the page. Cookies
are ``Secure`` when the browser's request came over TLS: this server's own, or a TLS-terminating reverse proxy on
this host that says so (address_limits.came_over_tls).

Bounds a hostile client meets (besides the connection cap and the body bounds every server has,
supervision/http_serving.py): per client address, new visitors, messages and uploads (address_limits.py); an
upload is streamed to disk as it arrives (storage/media.py, ``Incoming``), at most UPLOAD_MAX_BYTES, within the
adapter's ``upload_timeout_s`` from its start, so a stalled one costs a connection and the bytes it sent on disk,
never memory, and is cut at its deadline.
"""
from __future__ import annotations

import asyncio
import collections
import hashlib
import hmac
import json
import logging
import secrets
import time
from pathlib import Path
from typing import Callable, Optional, Protocol
from urllib.parse import quote, urlsplit

from aiohttp import WSMsgType, web

from actors.adapters.webchat.address_limits import AddressLimits, came_over_tls, client_address
from actors.adapters.webchat.highlight import style_sheet
from actors.adapters.webchat.protocol import (CREDENTIAL, HARD_FRAME_BYTES, VISITOR_COOKIE, FrameError,
                                              error_frame, frame_id, parse_frame, visitor_id)
from supervision.http_serving import BODY_TIMEOUT, SECURITY_HEADERS, HttpLimits, host_allowed, serve

STATIC_DIR = Path(__file__).resolve().parent / "static"
STATIC_FILES = {"app.js": "text/javascript", "messages.js": "text/javascript", "style.css": "text/css",
                "conversations.js": "text/javascript", "looks.js": "text/javascript", "theme.js": "text/javascript",
                "icon.svg": "image/svg+xml"}
PUSH_TIMEOUT_S = 5.0               # a tab that cannot take a frame this long is cut; it reconnects and reloads
CLOSE_TIMEOUT_S = 1.0              # how long a closing tab may take to answer the close frame
HEARTBEAT_S = 20.0
COOKIE_MAX_AGE_S = 400 * 24 * 3600   # the longest lifetime browsers keep a cookie for
LOGIN_COOKIE = "gw_login"
UPLOAD_MAX_BYTES = 20 * 1024 * 1024   # actors/media/limits.py: what the web chat takes of one file
UPLOAD_TIMEOUT_S = 120.0            # [adapters.web] upload_timeout_s: a whole upload, from its request's start
UPLOAD_CHUNK_BYTES = 64 * 1024      # what an upload holds in memory at a time on its way to disk
INLINE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")   # raster images a page shows as <img>
AUDIO_TYPES = ("audio/ogg", "audio/mpeg", "audio/mp4", "audio/aac", "audio/wav", "audio/flac", "audio/webm")


def login_proof(token: str) -> str:
    """What the login cookie holds: an HMAC of the token (never the token), so a new token logs everyone out."""
    return hmac.new(token.encode("utf-8"), b"agent-gateway web chat login", hashlib.sha256).hexdigest()


class FrameHandler(Protocol):
    async def handle_frame(self, visitor: str, frame: dict) -> Optional[dict]: ...
    async def media_for(self, visitor: str, key: str) -> Optional[tuple[bytes, dict]]: ...
    def upload_refusal(self, visitor: str) -> Optional[dict]: ...
    def new_upload(self): ...
    async def take_upload(self, visitor: str, incoming, name: str) -> dict: ...
    def reject_frame(self, visitor: str, reason: str) -> None: ...
    def log_line(self, level: int, text: str) -> None: ...
    def page_facts(self, visitor: str) -> dict: ...


def origin_allowed(origin: Optional[str], host_header: str) -> bool:
    if origin is None:
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host_header.lower()


class Tab:
    """One open WebSocket. Sends are serialised: a push from an operation lane and an answer to the page's own
    frame may be written at the same time."""

    def __init__(self, ws: web.WebSocketResponse):
        self.ws = ws
        self._lock = asyncio.Lock()

    async def send(self, frame: dict) -> bool:
        if self.ws.closed:
            return False
        try:
            async with self._lock:
                await asyncio.wait_for(self.ws.send_str(json.dumps(frame, ensure_ascii=False)), PUSH_TIMEOUT_S)
            return True
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a tab that cannot take a frame is cut; the operation itself succeeded
            await self.close()
            return False

    async def close(self, code: int = 1011, message: bytes = b"") -> None:
        try:
            await asyncio.wait_for(self.ws.close(code=code, message=message), CLOSE_TIMEOUT_S + 0.5)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - closing a connection that is already broken
            pass


class WebChatServer:
    def __init__(self, host: str, port: int, handler: FrameHandler, limits: HttpLimits = HttpLimits(),
                 max_tabs_per_client: int = 32, on_refused: Optional[Callable[[str], None]] = None,
                 login_token: str = "", max_tabs: int = 256, address_limits: Optional[AddressLimits] = None,
                 behind_proxy: bool = False, upload_timeout_s: float = UPLOAD_TIMEOUT_S):
        self.host, self.port, self.handler, self.limits = host, port, handler, limits
        self.address_limits = address_limits or AddressLimits()
        self.behind_proxy, self.upload_timeout_s = behind_proxy, upload_timeout_s
        self._login_proof = login_proof(login_token) if login_token else None
        self._login_token = login_token
        self.on_refused = on_refused
        self.max_tabs_per_client = max_tabs_per_client
        self.max_tabs = max_tabs   # all visitors together: each open tab holds a connection
        self.tabs: dict[str, set[Tab]] = {}
        self.tabs_of_client: collections.Counter = collections.Counter()   # client address -> its open tabs
        self._runner: Optional[web.AppRunner] = None

    # ------------------------------------------------------------------------------------------------ life
    async def start(self) -> int:
        """Listen; returns the port (the one the OS picked when configured as 0)."""
        # Bodies are read by /upload only (every other route is a GET or the WebSocket, bounded on its own).
        app = web.Application(middlewares=[self._guard], client_max_size=UPLOAD_MAX_BYTES + 64 * 1024)
        app[BODY_TIMEOUT] = self.upload_timeout_s
        app.router.add_get("/", self._index)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/ws", self._websocket)
        app.router.add_get("/media/{key}", self._media)
        app.router.add_post("/upload", self._upload)
        app.router.add_get("/favicon.ico", self._no_icon)  # browsers ask for it; a 404 would be a console error
        self._runner, self.port = await serve(app, self.host, self.port, limits=self.limits,
                                              on_refused=self.on_refused)
        return self.port

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        tabs = [t for visitor_tabs in self.tabs.values() for t in visitor_tabs]
        await asyncio.gather(*(tab.close(1001, b"gateway stopping") for tab in tabs))
        await runner.cleanup()

    # ------------------------------------------------------------------------------------------------ push
    async def push(self, visitor: str, frame: dict) -> int:
        """Send a frame to every open tab of the visitor; returns how many took it."""
        tabs = list(self.tabs.get(visitor, ()))
        if not tabs:
            return 0
        results = await asyncio.gather(*(tab.send(frame) for tab in tabs))
        return sum(results)

    # ----------------------------------------------------------------------------------------------- routes
    @web.middleware
    async def _guard(self, request: web.Request, handler):
        host = request.headers.get("Host", "")
        if self._login_proof is not None:
            refusal = self._login(request)
            if refusal is not None:
                return refusal
        elif not host_allowed(host):
            self.handler.log_line(logging.WARNING, f"web chat: refused a request for host {host[:80]!r} "
                                                   f"(only IP addresses and localhost are served)")
            return web.Response(status=421, text="misdirected request: use the gateway's address\n")
        response = await handler(request)
        if not isinstance(response, web.WebSocketResponse):
            for name, value in SECURITY_HEADERS.items():   # a handler's own (a file's policy) stands
                response.headers.setdefault(name, value)
        return response

    def _login(self, request: web.Request) -> Optional[web.StreamResponse]:
        """None if the request may go on; else the answer: the redirect that logs in, or 401."""
        if request.path.startswith("/static/") or request.path == "/favicon.ico":
            return None
        given = request.query.get("token")
        if request.path == "/" and given is not None:
            if hmac.compare_digest(given.encode("utf-8", "surrogatepass"), self._login_token.encode("utf-8")):
                response = web.Response(status=303, headers={"Location": "/", **SECURITY_HEADERS})
                response.set_cookie(LOGIN_COOKIE, self._login_proof, max_age=COOKIE_MAX_AGE_S, path="/",
                                    httponly=True, samesite="Strict", secure=self._over_tls(request))
                return response
            self.handler.log_line(logging.WARNING, f"web chat: a wrong login token from {request.remote}")
            return web.Response(status=401, text="wrong login token\n", headers=SECURITY_HEADERS)
        if hmac.compare_digest(request.cookies.get(LOGIN_COOKIE, "").encode("utf-8", "surrogatepass"),
                               self._login_proof.encode("ascii")):
            return None
        return web.Response(status=401, text="this web chat needs its login link (/?token=...): ask its operator\n",
                            headers=SECURITY_HEADERS)

    def _client(self, request: web.Request) -> str:
        return client_address(request.remote, request.headers.get("X-Forwarded-For"), self.behind_proxy)

    def _over_tls(self, request: web.Request) -> bool:
        return came_over_tls(request.secure, request.remote, request.headers.get("X-Forwarded-Proto"))

    async def _index(self, request: web.Request) -> web.StreamResponse:
        new = not CREDENTIAL.fullmatch(request.cookies.get(VISITOR_COOKIE, ""))
        if new and not self.address_limits.new_visitor(self._client(request), time.monotonic()):
            self.handler.log_line(logging.WARNING, f"web chat: {self._client(request)} was issued "
                                  f"{self.address_limits.policy.new_visitors_per_hour} new visitors within the "
                                  "hour (new_visitors_per_hour); refused another")
            return web.Response(status=429, text="too many new visitors from your address; try again later\n",
                                headers={"Retry-After": "300"})
        response = web.FileResponse(STATIC_DIR / "index.html", headers={"Content-Type": "text/html; charset=utf-8"})
        if new:
            response.set_cookie(VISITOR_COOKIE, secrets.token_urlsafe(32), max_age=COOKIE_MAX_AGE_S, path="/",
                                httponly=True, samesite="Strict", secure=self._over_tls(request))
        return response

    async def _no_icon(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=204)

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name == "highlight.css":   # the syntax colours, from the highlighter's own styles (highlight.py)
            return web.Response(text=style_sheet(), content_type="text/css", charset="utf-8")
        if name not in STATIC_FILES:  # a fixed list: no path from the URL ever reaches the file system
            raise web.HTTPNotFound()
        return web.FileResponse(STATIC_DIR / name,
                                headers={"Content-Type": f"{STATIC_FILES[name]}; charset=utf-8"})

    async def _media(self, request: web.Request) -> web.StreamResponse:
        """A file of the visitor's own conversation (protocol.py, FILE). Served so that no byte of it can run in
        this page's origin: a photo under its sniffed raster type, a voice note under its audio type (for the page's
        player), anything else as an ``attachment`` of type
        application/octet-stream, both with nosniff and a sandboxing policy (a polyglot opened on its own is still
        only a picture or a download)."""
        credential = request.cookies.get(VISITOR_COOKIE, "")
        found = None
        if CREDENTIAL.fullmatch(credential):
            found = await self.handler.media_for(visitor_id(credential), request.match_info["key"])
        if found is None:
            raise web.HTTPNotFound(text="no such file in this chat\n")
        data, file = found
        inline = (file.get("kind") == "photo" and file.get("mime") in INLINE_TYPES) or \
            (file.get("kind") == "voice" and file.get("mime") in AUDIO_TYPES)   # the page's <audio> plays it
        name = quote(str(file.get("name") or "file"), safe="")
        return web.Response(body=data, headers={
            "Content-Type": file["mime"] if inline else "application/octet-stream",
            "Content-Disposition": f"{'inline' if inline else 'attachment'}; filename*=UTF-8''{name}",
            "Content-Security-Policy": "default-src 'none'; sandbox",
            "Cache-Control": "private, max-age=86400"})   # named by its hash: the bytes never change

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        """One file (multipart/form-data, field ``file``) for a message to name: answered with its upload id, or a
        400/429/503 whose ``error`` the page shows. Only from the page itself: the visitor's cookie (SameSite=Strict:
        no other site's form carries it) and, when the browser sends one, this very origin."""
        credential = request.cookies.get(VISITOR_COOKIE, "")
        if not CREDENTIAL.fullmatch(credential):
            raise web.HTTPUnauthorized(text="no visitor cookie: open the chat page first\n")
        if not origin_allowed(request.headers.get("Origin"), request.headers.get("Host", "")):
            raise web.HTTPForbidden(text="cross-origin upload refused\n")
        visitor, client = visitor_id(credential), self._client(request)
        refused = self.address_limits.upload_starts(client, time.monotonic())
        if refused is not None:
            self.handler.reject_frame(visitor, f"upload refused: {refused}")
            return web.json_response({"error": f"{refused}; wait a little"}, status=429)
        try:
            refusal = self.handler.upload_refusal(visitor)   # before a byte of the body is read
            if refusal is not None:
                refusal = dict(refusal)
                return web.json_response(refusal, status=refusal.pop("status"))
            return await self._receive(request, visitor)
        finally:
            self.address_limits.upload_ends(client)

    async def _receive(self, request: web.Request, visitor: str) -> web.StreamResponse:
        """The upload's file, streamed to the media cache's incoming folder as it arrives, then handed over."""
        incoming = None
        try:
            reader = await request.multipart()
            part = await reader.next()
            if part is None or part.name != "file":
                return web.json_response({"error": "send the file in a form field named file"}, status=400)
            incoming = self.handler.new_upload()
            while chunk := await part.read_chunk(UPLOAD_CHUNK_BYTES):
                if incoming.size + len(chunk) > UPLOAD_MAX_BYTES:
                    response = web.json_response({"error": f"files up to {UPLOAD_MAX_BYTES // (1024 * 1024)} MB"},
                                                 status=413)
                    response.force_close()   # the rest of the body is not read
                    return response
                incoming.write(chunk)
            answer = dict(await self.handler.take_upload(visitor, incoming, part.filename or ""))
            incoming = None            # taken: committed to the cache, or discarded by the handler
            return web.json_response(answer, status=answer.pop("status", 200))
        except (ValueError, AssertionError) as exc:   # not multipart, or a broken body
            return web.json_response({"error": f"not a file upload: {exc}"}, status=400)
        except ConnectionError:     # the client went away mid-upload: nobody reads an answer
            return web.Response(status=400)
        finally:
            if incoming is not None:
                incoming.discard()

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if not origin_allowed(origin, request.headers.get("Host", "")):
            self.handler.log_line(logging.WARNING, f"web chat: refused a WebSocket from origin {origin[:80]!r}")
            raise web.HTTPForbidden(text="cross-origin WebSocket refused\n")
        if "visitor" in request.query:
            self.handler.reject_frame("-", "a WebSocket that named its own visitor (?visitor=) refused: visitors "
                                           "are issued by the server")
            raise web.HTTPBadRequest(text="visitors are issued by the server (a cookie from the chat page); "
                                          "?visitor= is not taken\n")
        credential = request.cookies.get(VISITOR_COOKIE, "")
        if not CREDENTIAL.fullmatch(credential):
            self.handler.log_line(logging.WARNING, f"web chat: refused a WebSocket from {request.remote} without a "
                                                   "visitor cookie")
            raise web.HTTPUnauthorized(text="no visitor cookie: open the chat page first\n")
        visitor = visitor_id(credential)
        if sum(len(t) for t in self.tabs.values()) >= self.max_tabs:
            raise web.HTTPServiceUnavailable(text="too many open chats\n")
        client = self._client(request)
        if 0 < self.max_tabs_per_client <= self.tabs_of_client[client]:
            # Anyone may fetch the page for a fresh cookie, so the share is per address: one client cannot hold
            # every slot however many visitors it makes itself.
            self.handler.log_line(logging.WARNING, f"web chat: {client} already holds {self.max_tabs_per_client} "
                                                   "open tabs (max_tabs_per_client); refused another")
            raise web.HTTPServiceUnavailable(text="too many open chats from your address\n")
        ws = web.WebSocketResponse(heartbeat=HEARTBEAT_S, max_msg_size=HARD_FRAME_BYTES, timeout=CLOSE_TIMEOUT_S)
        await ws.prepare(request)
        tab = Tab(ws)
        self.tabs.setdefault(visitor, set()).add(tab)
        self.tabs_of_client[client] += 1
        try:
            await tab.send({"type": "hello", "visitor": visitor, **self.handler.page_facts(visitor)})
            await self._serve(visitor, tab, client)
        finally:
            self.tabs_of_client[client] -= 1
            if self.tabs_of_client[client] <= 0:
                del self.tabs_of_client[client]
            tabs = self.tabs.get(visitor)
            if tabs is not None:
                tabs.discard(tab)
                if not tabs:
                    del self.tabs[visitor]
        return ws

    async def _serve(self, visitor: str, tab: Tab, client: str) -> None:
        async for msg in tab.ws:
            if msg.type == WSMsgType.ERROR:  # e.g. a frame over HARD_FRAME_BYTES: aiohttp closes with 1009
                self.handler.reject_frame(visitor, f"connection error: {tab.ws.exception()}")
                return
            try:
                frame = parse_frame(msg.data if msg.type == WSMsgType.TEXT else b"")
            except FrameError as exc:
                self.handler.reject_frame(visitor, str(exc))
                await tab.send(error_frame(str(exc)))
                continue
            if frame["type"] == "message" and not self.address_limits.message(client, time.monotonic()):
                reason = (f"your address sent more than {self.address_limits.policy.messages_per_minute} messages "
                          "a minute; wait a moment, then send it again")
                self.handler.reject_frame(visitor, f"over its address's message limit ({client})")
                await tab.send(error_frame(reason, frame_id(frame)))
                continue
            reply = await self.handler.handle_frame(visitor, frame)
            if reply is not None:
                await tab.send(reply)
