"""A TCP relay that can freeze the connections it carries: no byte goes either way, and nothing is closed.

What a NAT or a proxy that dropped a connection without telling either end looks like from the client: a socket
that stays open and carries nothing — the zombie connection of the adapter kit's liveness rule
(actors/adapters/liveness.py). ``freeze()`` freezes every connection open now; connections opened after it relay
normally, as a reconnecting client finds a fresh path. ``thaw()`` lets the frozen ones carry bytes again.

Runs on its own loop in a background thread; the port is chosen by the kernel.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Optional
from urllib.parse import urlsplit, urlunsplit

CHUNK = 65536


def through(url: str, port: int) -> str:
    """``url`` with its port replaced by a relay's on this machine: the same path, scheme and query, reached
    through the relay (a pure function)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"127.0.0.1:{port}"))


class FreezingProxy:
    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="freezing-proxy")
        self._server: Optional[asyncio.AbstractServer] = None
        self._open: list[asyncio.Event] = []     # one "may flow" event per open connection

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FreezingProxy":
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._relay, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def close():
            self._server.close()
            current = asyncio.current_task()
            relays = [t for t in asyncio.all_tasks() if t is not current]
            for task in relays:
                task.cancel()
            await asyncio.gather(*relays, return_exceptions=True)
        self._call(close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def freeze(self) -> int:
        """Freeze every connection open now; returns how many."""
        async def freeze():
            for flowing in self._open:
                flowing.clear()
            return len(self._open)
        return self._call(freeze())

    def thaw(self) -> None:
        async def thaw():
            for flowing in self._open:
                flowing.set()
        self._call(thaw())

    def _call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)

    async def _relay(self, client_reader, client_writer) -> None:
        flowing = asyncio.Event()
        flowing.set()
        self._open.append(flowing)
        self.connections += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_writer.close()
            self._open.remove(flowing)
            return

        async def pump(reader, writer):
            try:
                while data := await reader.read(CHUNK):
                    await flowing.wait()    # frozen: the bytes wait here, and the socket stays open
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                if flowing.is_set():        # a frozen connection is never closed by us
                    writer.close()
        try:
            await asyncio.gather(pump(client_reader, upstream_writer), pump(upstream_reader, client_writer))
        finally:
            if flowing in self._open:
                self._open.remove(flowing)
