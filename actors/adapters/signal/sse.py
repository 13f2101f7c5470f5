"""Server-sent events (the WHATWG event-stream format) as signal-cli writes them on ``GET /api/v1/events``: pure,
fed bytes as they come off the socket.

signal-cli writes ``event:receive`` and one ``data:`` line of JSON per event, a blank line after it, and a comment
line ``:`` every 15 s as a keep-alive; it gives no ``id:`` (the stream has no position a client could resume
from). The decoder follows the format as written: a field's value loses one leading space; several ``data`` lines
join with newlines; a blank line ends the event; lines end with LF, CR or CRLF. A line longer than ``max_line``
bytes (a hostile sender cannot make one: signal-cli bounds what it receives; the bound keeps memory finite all the
same) is dropped whole and counted, and the event it was part of is dropped with it.
"""
from __future__ import annotations

from dataclasses import dataclass

MAX_LINE_BYTES = 4 * 1024 * 1024     # a 64 KiB long text, escaped as JSON, plus its envelope, with room to spare


@dataclass(frozen=True)
class ServerEvent:
    event: str          # "message" when the stream names none (the format's default)
    data: str


class EventStreamDecoder:
    def __init__(self, max_line: int = MAX_LINE_BYTES):
        self.max_line = max_line
        self.keepalives = 0          # comment lines seen: the stream is alive
        self.dropped = 0             # over-long lines dropped (with their event)
        self._buffer = bytearray()
        self._skipping = False       # inside an over-long line: discard up to its end
        self._spoilt = False         # the event being read lost a line
        self._event, self._data = "", []
        self._after_cr = False

    def feed(self, chunk: bytes) -> list[ServerEvent]:
        out: list[ServerEvent] = []
        start = 0
        if self._after_cr and chunk[:1] == b"\n":
            start = 1                # the LF of a CRLF split across two chunks
        self._after_cr = False
        while start < len(chunk):
            ends = [i for i in (chunk.find(b"\n", start), chunk.find(b"\r", start)) if i >= 0]
            if not ends:
                self._take(chunk[start:])
                break
            end = min(ends)
            self._take(chunk[start:end])
            if chunk[end:end + 1] == b"\r":
                if end + 1 < len(chunk):
                    end += chunk[end + 1:end + 2] == b"\n"
                else:
                    self._after_cr = True
            self._line_done(out)
            start = end + 1
        return out

    def _take(self, piece: bytes) -> None:
        if self._skipping:
            return
        self._buffer += piece
        if len(self._buffer) > self.max_line:
            self._buffer.clear()
            self._skipping = self._spoilt = True
            self.dropped += 1

    def _line_done(self, out: list) -> None:
        if self._skipping:
            self._skipping = False
            return
        line = self._buffer.decode("utf-8", "replace")
        self._buffer.clear()
        if line == "":
            if self._data and not self._spoilt:
                out.append(ServerEvent(self._event or "message", "\n".join(self._data)))
            self._event, self._data, self._spoilt = "", [], False
            return
        if line.startswith(":"):
            self.keepalives += 1
            return
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
