"""A line relay between the IRC adapter and a real IRC server (ngircd): every line goes on unchanged, both ways,
except where a test holds one.

``hold_next_send(target)``: the bot's next PRIVMSG to ``target`` goes on to the server (the person it is for hears it), and from then on
nothing the server says to the bot reaches it until ``release()``: the PONG the adapter waits for to know its line
was taken (actors/adapters/irc/link.py) is held, the window between a line reaching the server and the adapter
knowing it did. A connection closed on either side is closed on the other (a server restarted cuts the bot too).

The relaying itself: tests/adapters/line_relay.py.
"""
from __future__ import annotations

import threading

from tests.adapters.line_relay import LineRelay


class IrcRelay(LineRelay):
    def __init__(self, upstream_port: int):
        super().__init__(upstream_port, "irc-relay")

    def hold_next_send(self, target: str) -> None:
        self._arm(target.lower().encode())

    async def _pass_on(self, line: bytes, writer, held: threading.Event) -> None:
        writer.write(line)
        await writer.drain()
        if self._hold is not None and _command(line)[:2] == [b"PRIVMSG", self._hold]:
            self._held(held)          # set before the line after it (its PING) goes on


def _command(line: bytes) -> list[bytes]:
    """[COMMAND, first parameter lowercased] of a line (a nick's case is not significant on IRC)."""
    words = line.split(maxsplit=3)
    if words and words[0].startswith(b":"):
        words = words[1:]
    return [words[0].upper(), *(w.lower() for w in words[1:2])] if words else []
