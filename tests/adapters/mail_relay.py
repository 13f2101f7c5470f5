"""Line relays between the email adapter and the real mail servers: every line goes on unchanged, both ways, except
where a test holds one. A connection closed on either side is closed on the other.

``SmtpRelay`` (in front of Postfix), ``hold_next_send(address)``: the adapter's next mail to ``address`` goes on to
the server whole (the server takes it and delivers it), and the server's answer to its end of data ("250 queued as
...") is held until ``release()``: the window between a mail being taken and the adapter knowing it was.

``ImapRelay`` (in front of Dovecot), ``hold_next_store()``: the adapter's next STORE command (setting \\Seen, after
its rows are stored) is held, and everything after it, until ``release()``: the window between a mail being stored
in the inbox and the mailbox hearing of it.

The relaying itself: tests/adapters/line_relay.py.
"""
from __future__ import annotations

import asyncio
import threading

from tests.adapters.line_relay import LineRelay


class SmtpRelay(LineRelay):
    def __init__(self, upstream_port: int):
        super().__init__(upstream_port, "smtp-relay")
        self._states: dict = {}      # per connection (its held event): inside DATA, a recipient that is held

    def _closed(self, held: threading.Event) -> None:
        self._states.pop(held, None)

    def hold_next_send(self, address: str) -> None:
        self._arm(address.lower().encode())

    async def _pass_on(self, line: bytes, writer, held: threading.Event) -> None:
        state = self._states.setdefault(held, {"in_data": False, "for_target": False})
        upper = line.upper()
        if not state["in_data"] and upper.startswith(b"RCPT TO:"):
            state["for_target"] |= self._hold is not None and self._hold in line.lower()
        elif not state["in_data"] and upper.strip() == b"DATA":
            state["in_data"] = True
        elif state["in_data"] and line in (b".\r\n", b".\n"):
            state["in_data"] = False
            if state["for_target"] and self._hold is not None:
                self._held(held)
            state["for_target"] = False
        writer.write(line)
        await writer.drain()


class ImapRelay(LineRelay):
    def __init__(self, upstream_port: int):
        super().__init__(upstream_port, "imap-relay")

    def hold_next_store(self) -> None:
        self._arm(b"STORE")

    async def _pass_on(self, line: bytes, writer, held: threading.Event) -> None:
        if self._hold is not None and b" STORE " in line.upper():
            self._held(held)
        while held.is_set() and not self.released.is_set():
            await asyncio.sleep(0.02)   # a test thread releases: polled from this loop
        if held.is_set() and not self.deliver:
            raise ConnectionResetError("the held command is dropped with its connection")
        writer.write(line)
        await writer.drain()
