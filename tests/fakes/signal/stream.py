"""The fake's ``GET /api/v1/events``: the server-sent event stream of signal-cli's HTTP daemon, and how signal-cli
hands what it receives to the streams it has (``HttpServerHandler.handleEventsEndpoint``).

* Each connection is a receive handler: every envelope goes to every open stream as ``event:receive`` and one
  ``data:`` line, then a blank line; a ``:`` comment every ``keepalive_interval`` (signal-cli: 15 s). No ``id:``.
* ``receive_mode`` "on-connection": while no stream is open nothing is taken off "Signal's servers": envelopes
  wait (``queue``, kept in the state file) and go to the next stream, in order. "on-start" (signal-cli's default):
  an envelope that arrives with no stream open is printed to signal-cli's stdout, that is, lost to any client.
* A stream signal-cli closes itself (``drop_streams``, a daemon stopping) is unsubscribed at once. A stream whose
  client vanished (killed, the network cut: ``cut_streams``) is not known dead until a write fails, and TCP takes
  the first write after the peer is gone and loses it: so the first write into a dead stream succeeds and is
  lost, the second fails, and only then is the stream unsubscribed. An envelope whose every write was lost is
  ``lost`` (an envelope written to another, live stream too is delivered).
"""
from __future__ import annotations

import asyncio
import contextlib
import json

from aiohttp import web

from tests.fakes.signal.world import next_timestamp

CLOSE = object()
ALLOWED_HOSTS = ("127.0.0.1", "localhost", "::1")


class _Stream:
    def __init__(self, request: web.Request):
        self.request = request
        self.queue: asyncio.Queue = asyncio.Queue()
        self.cut = False                  # the fake dropped the connection without signal-cli knowing
        self.silent_write_used = False    # TCP has taken (and lost) its one write into the dead connection
        self.keepalive_attempts = 0


class StreamMethods:
    """Mixin for FakeSignalCli (uses ``mutate``, ``limits``, ``_loop``, ``_lock``)."""

    def init_streams(self) -> None:
        self.streams: list[_Stream] = []
        self.keepalives = 0

    def host_allowed(self, request: web.Request) -> bool:
        """signal-cli bound to a loopback address pins the Host header to it (421 otherwise)."""
        host = request.headers.get("Host", "")
        name, _, port = host.rpartition(":") if not host.startswith("[") else (host[1:host.find("]")], ":",
                                                                              host[host.find("]") + 2:])
        if not name:
            name, port = host, ""
        return name.lower() in ALLOWED_HOSTS and (not port or port == str(self.port))

    # -- delivery (called with the lock held, from any thread)
    def deliver(self, state: dict, record: dict) -> None:
        if not self.streams:
            if self.limits["receive_mode"] == "on-connection":
                state["queue"].append(record["handle"])
                record["state"] = "queued"
                state["stats"]["queued"] += 1
            else:
                record["state"] = "lost"
                state["stats"]["lost_no_client"] += 1
            return
        stamp = next_timestamp(state)
        record["deliveries"].append(stamp)
        event = dict(record["event"])
        if isinstance(event.get("envelope"), dict):
            event["envelope"] = dict(event["envelope"], serverDeliveredTimestamp=stamp)
        text = "event:receive\ndata:" + json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n\n"
        record["pending"] = record.get("pending", 0) + len(self.streams)
        record["state"] = "delivering"
        for stream in self.streams:
            self._loop.call_soon_threadsafe(stream.queue.put_nowait, (record["handle"], text))

    def _written(self, handle: str, ok: bool) -> None:
        with self.mutate() as state:
            record = state["inbound"][int(handle) - 1]
            record["pending"] -= 1
            if ok:
                record["written"] = record.get("written", 0) + 1
                record["state"] = "delivered"
                state["stats"]["delivered"] += 1
            else:
                state["stats"]["lost_dead_stream"] += 1
                if not record.get("written") and record["pending"] == 0:
                    record["state"] = "lost"

    # -- controls
    def drop_streams(self) -> int:
        """signal-cli closes every stream (its HTTP server stopping, a shutdown): unsubscribed at once."""
        with self._lock:
            streams, self.streams = self.streams, []
        for stream in streams:
            self._loop.call_soon_threadsafe(stream.queue.put_nowait, CLOSE)
        return len(streams)

    def cut_streams(self) -> int:
        """The connections vanish under signal-cli (the network, a killed client): it finds out on writing."""
        with self._lock:
            streams = list(self.streams)
        for stream in streams:
            stream.cut = True
            self._loop.call_soon_threadsafe(_close_transport, stream.request)
        return len(streams)

    def open_streams(self) -> int:
        with self._lock:
            return len(self.streams)

    def settle_streams(self, timeout: float = 30.0) -> None:
        """Wait until every stream open now has had two keep-alive writes since, or is gone: by then signal-cli has
        found a stream whose client died (the first write into it is lost, the second fails)."""
        with self._lock:
            marks = [(s, s.keepalive_attempts) for s in self.streams]
        self.wait_for(lambda: all(s not in self.streams or s.keepalive_attempts >= mark + 2 for s, mark in marks),
                      timeout, interval=0.02)

    def zombie_streams(self) -> int:
        """Streams signal-cli still writes to although their client is gone."""
        with self._lock:
            return sum(1 for s in self.streams if s.request.transport is None or s.request.transport.is_closing())

    # -- the endpoint
    async def route_events(self, request: web.Request) -> web.StreamResponse:
        if not self.host_allowed(request):
            with self.mutate() as state:
                state["stats"]["host_refused"] += 1
            return web.Response(status=421)
        account = request.query.get("account")
        if self.limits["multi_account"] and account and account != self.read(lambda s: s["account"]):
            return web.Response(status=400)
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        stream = _Stream(request)
        with self.mutate() as state:
            state["stats"]["connections"] += 1
            self.streams.append(stream)
            waiting, state["queue"] = state["queue"], []
            for handle in waiting:     # what waited on Signal's servers comes now, in order
                self.deliver(state, state["inbound"][int(handle) - 1])
        try:
            while True:
                item = await self._next(stream)
                if item is CLOSE or not await self._write(stream, response, item):
                    break
        finally:
            with self._lock:
                if stream in self.streams:
                    self.streams.remove(stream)
            for leftover in _drain(stream.queue):      # handed to this handler, never written: lost with it
                if leftover is not CLOSE and leftover is not None:
                    self._written(leftover[0], False)
        with contextlib.suppress(Exception):
            await response.write_eof()
        return response

    async def _next(self, stream: _Stream):
        """The next item for the stream, or None when a keep-alive is due."""
        with contextlib.suppress(asyncio.QueueEmpty):
            return stream.queue.get_nowait()
        getter = asyncio.ensure_future(stream.queue.get())
        done, _ = await asyncio.wait({getter}, timeout=self.limits["keepalive_interval"])
        if getter in done:
            return getter.result()
        getter.cancel()      # Queue.get is cancel-safe: an item stays in the queue
        with contextlib.suppress(asyncio.CancelledError):
            await getter
        return None

    async def _write(self, stream: _Stream, response: web.StreamResponse, item) -> bool:
        handle, text = item if item is not None else (None, ":\n")
        if handle is None:
            stream.keepalive_attempts += 1
        transport = stream.request.transport
        if stream.cut or transport is None or transport.is_closing():
            first, stream.silent_write_used = not stream.silent_write_used, True
            if handle is not None:
                self._written(handle, False)
            return first        # the first write "succeeds"; the next one fails and ends the handler
        try:
            await response.write(text.encode("utf-8"))
        except (ConnectionError, RuntimeError, OSError):
            if handle is not None:
                self._written(handle, False)
            return False
        if handle is not None:
            self._written(handle, True)
        else:
            with self._lock:      # not in the state file: a write of it every keep-alive would be all it does
                self.keepalives += 1
        return True


def _close_transport(request: web.Request) -> None:
    if request.transport is not None:
        request.transport.close()


def _drain(queue: asyncio.Queue) -> list:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items
