"""A line relay between the IRC adapter and a real IRC server (ngircd): every line goes on unchanged, both ways,
except where a test holds one.

``hold_next_send(target)``: the bot's next PRIVMSG to ``target`` goes on to the server (the person it is for hears it), and from then on
nothing the server says to the bot reaches it until ``release()``: the PONG the adapter waits for to know its line
was taken (actors/adapters/irc/link.py) is held, the window between a line reaching the server and the adapter
knowing it did. A connection closed on either side is closed on the other (a server restarted cuts the bot too).

Runs asyncio on its own loop in a background thread; the port is chosen by the kernel (port 0) at the start.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Optional


class IrcRelay:
    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.port = 0
        self._hold: Optional[bytes] = None     # the target whose next PRIVMSG from the bot is held
        self.holding, self.released = threading.Event(), threading.Event()
        self.released.set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="irc-relay", daemon=True)
        self._server: Optional[asyncio.AbstractServer] = None
        self._writers: set[asyncio.StreamWriter] = set()

    # ------------------------------------------------------------------------------------------------ life
    def start(self) -> "IrcRelay":
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
        self._server = await asyncio.start_server(self._connected, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    # ------------------------------------------------------------------------------------------- test controls
    def hold_next_send(self, target: str) -> None:
        self.holding.clear()
        self.released.clear()
        self._hold = target.lower().encode()

    def release(self) -> None:
        self._hold = None
        self.released.set()

    # ------------------------------------------------------------------------------------------------ relaying
    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(self._pump(reader, up_writer, from_bot=True),
                                 self._pump(up_reader, writer, from_bot=False))
        finally:
            for w in (writer, up_writer):
                w.close()
                self._writers.discard(w)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, from_bot: bool) -> None:
        try:
            while line := await reader.readline():
                while not from_bot and self.holding.is_set() and not self.released.is_set():
                    await asyncio.sleep(0.02)   # a test thread releases: polled from this loop
                writer.write(line)
                await writer.drain()
                if from_bot and self._hold is not None and _command(line)[:2] == [b"PRIVMSG", self._hold]:
                    self._hold = None
                    self.holding.set()          # set before the line after it (its PING) goes on
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()


def _command(line: bytes) -> list[bytes]:
    """[COMMAND, first parameter lowercased] of a line (a nick's case is not significant on IRC)."""
    words = line.split(maxsplit=3)
    if words and words[0].startswith(b":"):
        words = words[1:]
    return [words[0].upper(), *(w.lower() for w in words[1:2])] if words else []
