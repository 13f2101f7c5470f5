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
from typing import Any, Callable, Optional

from thespian.actors import ActorSystemException

from actors.messages import CliAccepted, CliAskDone, CliDone, CliSay, CliShow
from daemon.admin import AdminError, NoGateway
from daemon.terminal_view import LiveView, PipedView, end_failed
from daemon.tty_modes import keys_held
from supervision import tree as tree_mod


RESEND_S = 5.0          # a line not acknowledged this long is told again (same id): its adapter may have restarted
CHECK_S = 1.0           # how often a terminal waiting on the gateway checks that it still runs
RECONNECT_POLL_S = 0.5  # how often a terminal whose gateway went away tries to attach again
LOST = "connection lost, reconnecting… (Ctrl-C leaves)"


class NotSent(Exception):
    """The user left (Ctrl-C) while a line waited for the gateway to acknowledge it: the line, for the message."""


class LeftWaiting(Exception):
    """The user left (Ctrl-C) while waiting for a gateway that went away after it stored the line."""


class Terminal:
    def __init__(self, client, user: str, out=None, keys=None, attach: Optional[Callable[[], Any]] = None):
        """``out``: where answers go (stdout); ``keys``: the terminal typed on (stdin); ``attach``: a new client of
        the gateway running now (raises while none does), to reattach when the one attached to is gone."""
        out = sys.stdout if out is None else out
        self.client, self.user, self.keys, self.attach = client, user, sys.stdin if keys is None else keys, attach
        self.interrupted = False    # a Ctrl-C noted while a turn runs (interrupts_between_calls)
        self.errors_apart = False   # a failed turn's error shown as an error, not as its answer (the chat prompt)
        self.view = LiveView(out) if getattr(out, "isatty", lambda: False)() else PipedView(out)
        self.adapter = adapter_of(client)
        self.pending: Optional[CliSay] = None   # the last line told: told again, same id, to a gateway come back
        self.checked = time.monotonic()

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

    # ------------------------------------------------------------------------------------- the line, delivered
    def say(self, text: str, timeout: Optional[float] = None) -> int:
        """Tell the gateway a line; its inbox seq once stored. Until then the line is kept: told again under the
        same message id (the inbox stores it once, however many copies land) when no acknowledgement comes, and
        to the next gateway when this one went away. NotSent if the user leaves (Ctrl-C) meanwhile; RuntimeError
        if the gateway refuses it, or (``timeout``) does not take it in time."""
        self.pending = CliSay(self.user, text, f"{self.user}-{uuid.uuid4().hex[:12]}")
        try:
            return self.tell_pending(None if timeout is None else time.monotonic() + timeout)
        except (KeyboardInterrupt, LeftWaiting):
            raise NotSent(text) from None

    def tell_pending(self, deadline: Optional[float]) -> int:
        line = self.pending
        while True:
            if not self.client.still_attached():
                self.reattach(deadline)
            self.client.asys.tell(self.adapter, line)
            reply = self.acknowledgement(line, deadline)
            if reply is None:
                if self.client.still_attached():    # the same gateway, silent: its adapter may have restarted
                    self.adapter = adapter_of(self.client)
                continue
            if reply.seq >= 0:
                return reply.seq
            if not reply.stopping:
                raise RuntimeError(reply.refused or "the gateway refused the message")
            self.client.wait_launcher_exit(RESEND_S)   # a drain: told again to the gateway that comes next

    def acknowledgement(self, line: CliSay, deadline: Optional[float]) -> Optional[CliAccepted]:
        """The gateway's CliAccepted of ``line``; None if none came within RESEND_S or the gateway went away."""
        told = time.monotonic()
        while time.monotonic() - told < RESEND_S and self.client.still_attached():
            if deadline is not None and time.monotonic() > deadline:
                raise RuntimeError("the gateway did not accept the message in time")
            reply = self.listen(CHECK_S)
            if isinstance(reply, CliAccepted) and reply.message_id == line.message_id:
                return reply
            self.handle(reply)
            self.check_interrupt()
        return None

    def reattach(self, deadline: Optional[float]) -> None:
        """The gateway attached to is gone (stopped, killed, restarted): wait for the next one and attach to it.
        What was being shown stays as it stands; what comes next is drawn below the notice."""
        if self.attach is None:
            raise RuntimeError("the gateway stopped")
        self.view.note(LOST)
        while True:
            if self.interrupted:
                self.interrupted = False
                raise LeftWaiting
            if deadline is not None and time.monotonic() > deadline:
                raise RuntimeError("the gateway did not come back in time")
            try:
                client = self.attach()
                adapter = adapter_of(client)
            except (NoGateway, AdminError, RuntimeError, OSError, ActorSystemException):
                time.sleep(RECONNECT_POLL_S)
                continue
            self.client, self.adapter = client, adapter
            self.view.note("reconnected")
            return

    def listen(self, timeout: float):
        """The next message, waiting at most ``timeout``; while an answer has changes not drawn yet, only what has
        come already: the changes are drawn once the mail is read (all those that came during the last drawing
        at once)."""
        reply = self.client.asys.listen(0 if self.view.dirty else timeout)
        if reply is None:
            self.view.flush()
        return reply

    def handle(self, message) -> None:
        if not isinstance(message, CliShow) or message.action == "typing":
            return
        if message.action == "delete":
            self.view.delete(message.message_id)
        else:
            self.view.show(message.message_id, message.text)

    def wait_done(self, seq: int, timeout: float = 600.0) -> Optional[CliDone]:
        """The gateway's word that the reply to inbox row ``seq`` is delivered (with the turn's error if it failed),
        the answer shown by then; None if it did not come within ``timeout`` seconds. A gateway that goes away
        meanwhile is waited for: the row is in its inbox, and its next life answers it. The last line is told to
        it again, which attaches this terminal to it (a duplicate of a stored line: the same row, no second turn)."""
        deadline = time.monotonic() + timeout
        next_ask = 0.0
        while time.monotonic() < deadline:
            if time.monotonic() - self.checked >= CHECK_S:
                self.checked = time.monotonic()
                if not self.client.still_attached():
                    self.view.end()
                    self.tell_pending(deadline)
            if time.monotonic() >= next_ask:
                self.client.asys.tell(self.adapter, CliAskDone(seq))
                next_ask = time.monotonic() + 0.25
            reply = self.listen(0.1)
            if isinstance(reply, CliDone) and reply.seq == seq and reply.done:
                if not self.view.showing() and reply.answer:
                    self.view.show(f"stored-{seq}", reply.answer)   # answered while this terminal was away
                if reply.error and self.errors_apart:
                    end_failed(self.view, reply.error)
                else:
                    self.view.end()
                return reply
            self.handle(reply)
            self.check_interrupt()
        return None


def adapter_of(client):
    """The address of the gateway's terminal adapter. A supervisor slow to answer a walk shows its children as
    last known, without addresses: walked again for a while."""
    deadline = time.monotonic() + 10.0
    while True:
        nodes = [n for n, _, _ in tree_mod.walk(client.tree()) if n.kind == "CliAdapter"]
        if not nodes:
            raise RuntimeError("the gateway has no terminal adapter ([adapters.cli] is disabled)")
        if nodes[0].ref is not None:
            return nodes[0].ref
        if time.monotonic() > deadline:
            raise RuntimeError("the terminal adapter did not answer; try again in a moment")
        time.sleep(0.1)


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
        try:
            with terminal.streaming(), terminal.interrupts_between_calls():
                exchange(terminal, line)
        except NotSent as exc:
            print(f"left before the gateway took it: not sent: {exc}", file=sys.stderr)
            return 1
        except LeftWaiting:
            print("left while the gateway was away: your last message is stored, and answered when the gateway "
                  "is back (see `sessions show`)", file=sys.stderr)
            return 1


def exchange(terminal: Terminal, line: str) -> None:
    """One line and its answer. Ctrl-C while it streams sends ``/stop``; a second one leaves the answer as it is."""
    seq = terminal.say(line)
    try:
        terminal.wait_done(seq)
    except KeyboardInterrupt:
        try:
            terminal.say("/stop")
            terminal.wait_done(seq, timeout=30)
        except (KeyboardInterrupt, NotSent):   # a second Ctrl-C: back to the prompt, the answer left as it stands
            terminal.view.end()


def one_message(terminal: Terminal, text: str, timeout: float) -> int:
    """``chat --message``: the exit status says whether the turn answered it (0) or failed (1, why on stderr)."""
    try:
        with terminal.streaming():
            done = terminal.wait_done(terminal.say(text, timeout), timeout)
    except NotSent:
        print("interrupted before the gateway took the message: not sent", file=sys.stderr)
        return 1
    except (LeftWaiting, KeyboardInterrupt):
        print("interrupted: the message is stored, and answered by the gateway", file=sys.stderr)
        return 1
    if done is None:
        print(f"no complete answer within {timeout:g}s", file=sys.stderr)
        return 1
    if done.error:
        print(f"the turn failed: {done.error}", file=sys.stderr)
        return 1
    return 0
