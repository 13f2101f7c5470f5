"""The terminal side of ``run_gateway.py chat``: runs in the operator's shell, not in the gateway.

It attaches to the running gateway through the admin port (never starting one), finds the ``cli`` adapter in the
live tree, and exchanges CliSay / CliShow with it. On a terminal the answer streams in place, shown once whatever
its previews were (terminal_view.py); keys typed meanwhile wait for the next prompt (tty_modes.py). Into a pipe each
answer is written once, complete. Ctrl-C while an answer streams sends ``/stop`` (the turn is interrupted, what was
said is kept); Ctrl-D leaves. ``--message`` sends one line, prints the answer and exits once the gateway has
delivered it: 0 if the turn answered it, else 1 with the turn's error on stderr.
"""
from __future__ import annotations

import signal
import sys
import time
import uuid
from contextlib import contextmanager, nullcontext
from typing import Optional

from actors.messages import CliAccepted, CliAskDone, CliDone, CliSay, CliShow
from daemon.terminal_view import LiveView, PipedView, end_failed
from daemon.tty_modes import keys_held
from supervision import tree as tree_mod


class Terminal:
    def __init__(self, client, user: str, out=None, keys=None):
        """``out``: where answers go (stdout); ``keys``: the terminal typed on (stdin)."""
        out = sys.stdout if out is None else out
        self.client, self.user, self.keys = client, user, sys.stdin if keys is None else keys
        self.interrupted = False    # a Ctrl-C noted while a turn runs (interrupts_between_calls)
        self.errors_apart = False   # a failed turn's error shown as an error, not as its answer (the chat prompt)
        self.view = LiveView(out) if getattr(out, "isatty", lambda: False)() else PipedView(out)
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

    def streaming(self):
        """The context of a turn on a terminal: keys typed meanwhile wait for the next prompt instead of landing in
        the answer being drawn."""
        return keys_held(self.keys) if self.view.live else nullcontext()

    @contextmanager
    def interrupts_between_calls(self):
        """While a turn runs, Ctrl-C only takes note; ``check_interrupt`` raises KeyboardInterrupt between two
        calls into Thespian. Raised inside one (a listen reading a message), it could leave the admin connection
        half-read, and the answer to the ``/stop`` that follows never came."""
        self.interrupted = False

        def take_note(_signum, _frame) -> None:
            self.interrupted = True
        previous = signal.signal(signal.SIGINT, take_note)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def check_interrupt(self) -> None:
        if self.interrupted:
            self.interrupted = False
            raise KeyboardInterrupt

    def say(self, text: str) -> int:
        message_id = f"{self.user}-{uuid.uuid4().hex[:12]}"
        self.client.asys.tell(self.adapter, CliSay(self.user, text, message_id))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            reply = self.client.asys.listen(1.0)   # a Ctrl-C meanwhile is raised by wait_done, once there is a seq
            if isinstance(reply, CliAccepted) and reply.message_id == message_id:
                if reply.seq < 0:
                    raise RuntimeError(reply.refused or "the gateway is draining and takes no new messages")
                return reply.seq
            self.handle(reply)
        raise RuntimeError("the gateway did not accept the message within 30s")

    def handle(self, message) -> None:
        if not isinstance(message, CliShow) or message.action == "typing":
            return
        if message.action == "delete":
            self.view.delete(message.message_id)
        else:
            self.view.show(message.message_id, message.text)

    def wait_done(self, seq: int, timeout: float = 600.0) -> Optional[CliDone]:
        """The gateway's word that the reply to inbox row ``seq`` is delivered (with the turn's error if it failed),
        the answer shown by then; None if it did not come within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        next_ask = 0.0
        while time.monotonic() < deadline:
            if time.monotonic() >= next_ask:
                self.client.asys.tell(self.adapter, CliAskDone(seq))
                next_ask = time.monotonic() + 0.25
            reply = self.client.asys.listen(0.1)
            if isinstance(reply, CliDone) and reply.seq == seq and reply.done:
                if reply.error and self.errors_apart:
                    end_failed(self.view, reply.error)
                else:
                    self.view.end()
                return reply
            self.handle(reply)
            self.check_interrupt()
        return None


def interactive(terminal: Terminal) -> int:
    try:
        import readline  # noqa: F401 - line editing and history for input()
    except ImportError:
        pass
    print(f"chatting as {terminal.user!r}; /help lists commands, Ctrl-C stops an answer, Ctrl-D leaves")
    terminal.errors_apart = True
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
        with terminal.streaming(), terminal.interrupts_between_calls():
            seq = terminal.say(line)
            try:
                terminal.wait_done(seq)
            except KeyboardInterrupt:
                try:
                    terminal.say("/stop")
                    terminal.wait_done(seq, timeout=30)
                except KeyboardInterrupt:   # a second Ctrl-C: back to the prompt, the answer left as it stands
                    terminal.view.end()


def one_message(terminal: Terminal, text: str, timeout: float) -> int:
    """``chat --message``: the exit status says whether the turn answered it (0) or failed (1, why on stderr)."""
    with terminal.streaming():
        done = terminal.wait_done(terminal.say(text), timeout)
    if done is None:
        print(f"no complete answer within {timeout:g}s", file=sys.stderr)
        return 1
    if done.error:
        print(f"the turn failed: {done.error}", file=sys.stderr)
        return 1
    return 0
