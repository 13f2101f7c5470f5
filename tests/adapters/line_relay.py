"""A line relay between an adapter and a real server: every line goes on unchanged, both ways, except where a test
holds one. A connection closed on either side is closed on the other.

A subclass decides what to hold in ``_pass_on`` (each line from the adapter): ``_arm(what)`` from the test makes it
look for a line; when it sees it, ``_held(held)`` holds what the server says on that connection from then on, until
``release()``. ``release(deliver=False)`` drops what the adapter said and was held instead of passing it on, closing
its connection (the adapter died meanwhile). IRC (irc_relay.py), SMTP and IMAP (mail_relay.py).

Runs asyncio on its own loop in a background thread; the port is chosen by the kernel (port 0) at the start.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Optional

LINE_LIMIT = 1 << 22          # a line relayed at most (a mail's literal in an IMAP answer is read as lines)


class LineRelay:
    def __init__(self, upstream_port: int, name: str = "line-relay"):
        self.upstream_port = upstream_port
        self.port = 0
        self._hold: Optional[bytes] = None     # what the adapter's line to hold after says (the subclass's)
        self.holding, self.released = threading.Event(), threading.Event()
        self.released.set()
        self.deliver = True
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._server: Optional[asyncio.AbstractServer] = None
        self._writers: set[asyncio.StreamWriter] = set()

    def start(self) -> "LineRelay":
        self._thread.start()
        self._run(self._start())
        return self

    def close(self) -> None:
        self.release()
        self._run(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._connected, "127.0.0.1", self.port, limit=LINE_LIMIT)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    def _arm(self, hold: bytes) -> None:
        self.deliver = True
        self.holding.clear()
        self.released.clear()
        self._hold = hold

    def _held(self, held: threading.Event) -> None:
        self._hold = None
        held.set()
        self.holding.set()

    def release(self, deliver: bool = True) -> None:
        """Let what is held go on; ``deliver=False``: what the client said and was held is dropped, its connection
        closed (the client died meanwhile: a command it never saw answered must not reach the server late)."""
        self._hold = None
        self.deliver = deliver
        self.released.set()

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port, limit=LINE_LIMIT)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        held = threading.Event()     # this connection's line was the one to hold after: hold the server's lines
        try:
            await asyncio.gather(self._from_client(reader, up_writer, held), self._from_server(up_reader, writer, held))
        finally:
            for w in (writer, up_writer):
                w.close()
                self._writers.discard(w)
            self._closed(held)

    async def _from_client(self, reader, writer, held: threading.Event) -> None:
        try:
            while line := await reader.readline():
                await self._pass_on(line, writer, held)
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _pass_on(self, line: bytes, writer, held: threading.Event) -> None:
        writer.write(line)
        await writer.drain()

    def _closed(self, held: threading.Event) -> None:
        """A connection ended (``held`` is its own)."""

    async def _from_server(self, reader, writer, held: threading.Event) -> None:
        try:
            while line := await reader.readline():
                while held.is_set() and not self.released.is_set():
                    await asyncio.sleep(0.02)   # a test thread releases: polled from this loop
                writer.write(line)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
