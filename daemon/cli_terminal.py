"""The terminal side of ``run_gateway.py chat``: runs in the operator's shell, not in the gateway.

It attaches to the running gateway through the admin port (never starting one), finds the ``cli`` adapter in the
live tree, and exchanges CliSay / CliShow with it. The answer streams in place: an edit that extends what is already
on screen prints only the new characters; anything else reprints the message. Ctrl-C while an answer streams sends
``/stop`` (the turn is interrupted, what was said is kept); Ctrl-D leaves. ``--message`` sends one line, prints the
streamed answer and exits once the gateway has delivered it.
"""
from __future__ import annotations

import sys
import time
import uuid

from actors.messages import CliAccepted, CliAskDone, CliDone, CliSay, CliShow
from supervision import tree as tree_mod

CURSOR = " ▍"


class Terminal:
    def __init__(self, client, user: str, out=sys.stdout):
        self.client, self.user, self.out = client, user, out
        # The streaming cursor is drawn and erased with backspaces, and a preview the chunker had to close (an open
        # code fence) is reprinted whole: only a terminal shows that as intended. Piped into a file or another
        # program, each message of the answer is written once, as it ends.
        self.draws_cursor = bool(getattr(out, "isatty", lambda: False)())
        # A supervisor slow to answer a walk shows its children as last known, without addresses: walk again.
        deadline = time.monotonic() + 10.0
        while True:
            nodes = [n for n, _, _ in tree_mod.walk(client.tree()) if n.kind == "CliAdapter"]
            if not nodes:
                raise RuntimeError("the gateway has no terminal adapter ([adapters.cli] is disabled)")
            if nodes[0].ref is not None or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if nodes[0].ref is None:
            raise RuntimeError("the terminal adapter did not answer; try again in a moment")
        self.adapter = nodes[0].ref
        self.shown: dict[str, str] = {}
        self.current: str | None = None

    def say(self, text: str) -> int:
        message_id = f"{self.user}-{uuid.uuid4().hex[:12]}"
        self.client.asys.tell(self.adapter, CliSay(self.user, text, message_id))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            reply = self.client.asys.listen(1.0)
            if isinstance(reply, CliAccepted) and reply.message_id == message_id:
                if reply.seq < 0:
                    raise RuntimeError("the gateway is draining and takes no new messages")
                return reply.seq
            self.handle(reply)
        raise RuntimeError("the gateway did not accept the message within 30s")

    def handle(self, message) -> None:
        if not isinstance(message, CliShow) or message.action == "typing":
            return
        old = self.shown.get(message.message_id, "")
        new = message.text
        if message.action == "delete":
            self.shown.pop(message.message_id, None)
            return
        if not self.draws_cursor:
            self.shown[message.message_id] = new   # written by _finish_line, in the order the messages came
            return
        if message.message_id == self.current and new.startswith(old.removesuffix(CURSOR)):
            self._write(new[len(old.removesuffix(CURSOR)):], old.endswith(CURSOR))
        else:
            if self.current is not None:
                self.out.write("\n")
            self.current = message.message_id
            self._write(new, False)
        self.shown[message.message_id] = new

    def _write(self, text: str, erase_cursor: bool) -> None:
        if not self.draws_cursor:
            text, erase_cursor = text.replace(CURSOR, ""), False
        if erase_cursor:
            self.out.write("\b" * len(CURSOR) + " " * len(CURSOR) + "\b" * len(CURSOR))
        self.out.write(text)
        self.out.flush()

    def wait_done(self, seq: int, timeout: float = 600.0) -> bool:
        deadline = time.monotonic() + timeout
        next_ask = 0.0
        while time.monotonic() < deadline:
            if time.monotonic() >= next_ask:
                self.client.asys.tell(self.adapter, CliAskDone(seq))
                next_ask = time.monotonic() + 0.25
            reply = self.client.asys.listen(0.1)
            if isinstance(reply, CliDone) and reply.seq == seq and reply.done:
                self._finish_line()
                return True
            self.handle(reply)
        return False

    def _finish_line(self) -> None:
        if not self.draws_cursor:
            self.out.write("\n".join(text.replace(CURSOR, "") for text in self.shown.values()) + "\n")
            self.out.flush()
            self.shown.clear()
            return
        text = self.shown.get(self.current or "", "")
        if text.endswith(CURSOR):
            self._write("", True)
        self.out.write("\n")
        self.out.flush()
        self.current = None


def interactive(terminal: Terminal) -> int:
    try:
        import readline  # noqa: F401 - line editing and history for input()
    except ImportError:
        pass
    print(f"chatting as {terminal.user!r}; /help lists commands, Ctrl-C stops an answer, Ctrl-D leaves")
    while True:
        try:
            line = input("you> ")
        except EOFError:
            print()
            return 0
        except KeyboardInterrupt:
            print()
            continue
        if not line.strip():
            continue
        seq = terminal.say(line)
        try:
            terminal.wait_done(seq)
        except KeyboardInterrupt:
            terminal.say("/stop")
            terminal.wait_done(seq, timeout=30)
