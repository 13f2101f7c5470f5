"""The conformance harness of the terminal chat (``run_gateway.py chat``, actors/adapters/cli/adapter.py).

The "platform" is the terminals: each chat is one user at their own terminal, a process of its own attached through
the daemon's admin port (tests/adapters/cli_terminal_process.py), which says the lines ``inject`` gives it and
records every CliShow the adapter sends it. A terminal line is keyed by its user: chat id = user id = the chat
name, a DM. The adapter learns a terminal's address from that user's first line, so before the suite sends an
operation to a chat (``source``, asked for the chat id of every operation) its terminal says a line over
``[gateway] max_text_chars``: refused (CliAccepted with seq -1), it is stored nowhere and starts no turn, and the
adapter knows where that user's terminal is.

What a terminal does not have (``not_applicable``): no 429 and no attempts to count (an operation is done once its
CliShow is handed to the actor system), no files (the capabilities say so). A dropped connection is every terminal
detaching; the users come back with new terminals (new admin connections), and what the old ones showed stays in
the harness's record. So it is after the daemon is killed and started again (``daemon_restarted``): the new
adapter shows each user what it showed while no terminal of theirs was known once their new terminal speaks
(actors/adapters/cli/unseen.py).

The delivery case: a send to a terminal is done once the adapter hands its CliShow to the actor system, with no
answer from outside the daemon to hold, so the adapter's own fault injection holds it after that and before its
record in the ledger (actors/adapters/send_hold.py): the chat's terminal tells the adapter HoldNextSend, and hears
SendHeld once a send is held.
"""
from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import threading
import uuid
from pathlib import Path

from actors.messages import Source
from common.runfiles import RunFiles
from tests.actor_system import wait_for
from tests.gateway import PYTHON, ROOT

ANSWER_S = 30.0              # a terminal's answer to one command, on a loaded 2-core machine
REGISTERING_LINE = "x" * 100_001   # over any [gateway] max_text_chars (common/config.py: at most 100 000)


class Terminal:
    """One user's terminal process and its command channel (JSON lines over its stdin and stdout)."""

    def __init__(self, workdir: Path, user: str):
        env = dict(os.environ, GATEWAY_STATE_DIR=str(workdir / "state"), PYTHONPATH=str(ROOT))
        # Its stderr goes to a file: a pipe nobody reads while the test runs could fill and stop the terminal.
        (workdir / "terminals").mkdir(exist_ok=True)
        self.errors = workdir / "terminals" / f"{user}.stderr"
        # tests/gateway.py Gateway: the daemon's config and state directory under the rig's workdir.
        with open(self.errors, "a") as errors:
            self.process = subprocess.Popen(
                [PYTHON, "-m", "tests.adapters.cli_terminal_process", str(workdir / "gateway.toml"), user],
                cwd=str(ROOT), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True)
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._answer("attaching to the daemon")

    def _read(self) -> None:
        for line in self.process.stdout:
            self.answers.put(json.loads(line))
        self.answers.put(None)

    def _answer(self, what: str) -> dict:
        try:
            answer = self.answers.get(timeout=ANSWER_S)
        except queue.Empty:
            answer = None
        if answer is None:
            self.close()
            raise AssertionError(f"the terminal gave no answer within {ANSWER_S}s to {what}: exit status "
                                 f"{self.process.returncode}, stderr {self.errors.read_text(errors='replace')[-2000:]!r}")
        return answer

    def command(self, command: dict) -> dict:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self._answer(command)

    def say(self, message_id: str, text) -> None:
        self.command({"say": {"message_id": message_id, "text": text}})

    def state(self) -> dict:
        state = self.command({"state": None})
        assert state["synced"], "the adapter did not answer the terminal's done check: what it showed may be missing"
        return state

    def received(self) -> dict:
        """What the terminal has now, without asking the adapter (the daemon may be gone)."""
        return self.command({"received": None})

    def close(self) -> None:
        """The user leaves: stdin closes and the process ends (killed if it does not within 10s)."""
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
                self.process.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(10)


class CliHarness:
    adapter_type = "cli"
    adapter_name = "cli"
    adapter_kind = "CliAdapter"
    text_limit = 1_000_000        # actors/adapters/cli/platform.py
    not_applicable = {
        "floods": "a terminal has no 429: the adapter hands each CliShow to the actor system and it is done",
    }

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.terminals: dict[str, Terminal] = {}
        self.detached: dict[str, list] = {}    # chat -> what its earlier terminals showed, oldest first
        self.holding: str | None = None        # the chat whose next send is held (the delivery case)

    def start(self) -> None:
        pass        # the terminals attach when a chat is first used: the daemon starts after this

    def stop(self) -> None:
        for terminal in self.terminals.values():
            terminal.close()
        self.terminals.clear()

    def drop_connection(self) -> None:
        """Every terminal detaches (its process ends); a chat used again gets a new one, as a user who comes back."""
        for chat, terminal in list(self.terminals.items()):
            self.detached.setdefault(chat, []).extend(terminal.state()["shown"])
            terminal.close()
        self.terminals.clear()

    def daemon_restarted(self) -> None:
        """The daemon was killed and started again: every terminal was attached to the one that is gone. What each
        had received stays in the record; its user comes back with a new terminal when the chat is used again."""
        for chat, terminal in list(self.terminals.items()):
            self.detached.setdefault(chat, []).extend(terminal.received()["shown"])
            terminal.close()
        self.terminals.clear()

    def adapter_toml(self) -> str:
        return f'[adapters.{self.adapter_name}]\ntype = "{self.adapter_type}"\n'   # tests/gateway.py: [debug] on

    def terminal(self, chat: str, register: bool = True) -> Terminal:
        """The chat's terminal, attached (and, with ``register``, known to the adapter: see the module's doc)."""
        if chat not in self.terminals:
            terminal = self.terminals[chat] = Terminal(self.workdir, chat)
            if register:
                message_id = f"register-{uuid.uuid4().hex[:12]}"
                terminal.say(message_id, REGISTERING_LINE)
                [[seq, refused]] = wait_for(lambda: self._state(chat)["accepted"].get(message_id), 30, 0.05,
                                            f"the adapter to answer {chat}'s first line")
                assert seq < 0 and "characters" in refused, f"{chat}'s first line was not refused: {seq} {refused!r}"
        return self.terminals[chat]

    def _state(self, chat: str) -> dict:
        return self.terminal(chat).state()

    # -- inbound: a handle is "chat/message id/delivery number". The chat is the user (a terminal line is keyed by
    # who typed it), so ``user`` names no one else here.
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        message_id = f"{chat}-{uuid.uuid4().hex[:12]}"
        self.terminal(chat, register=False).say(message_id, text)
        return f"{chat}/{message_id}/1"

    def platform_message_id(self, handle: str) -> str:
        return handle.split("/")[1]

    def replay(self, handle: str) -> str:
        """The terminal says the line again with its message id, as one does that is not sure it was taken."""
        chat, message_id, delivery = handle.split("/")
        self.terminal(chat).say(message_id, "said again: the id, not the text, is what the inbox dedups on")
        return f"{chat}/{message_id}/{int(delivery) + 1}"

    def inject_malformed(self) -> tuple[str, str]:
        """A broken client's line (text not a string): the adapter logs it and answers nothing. It is handled when
        the same terminal's next line is answered (the adapter takes one sender's mail in order), so the handle's
        acknowledgement is the answer to a refused line said after it."""
        chat = f"malformed-{uuid.uuid4().hex[:8]}"
        terminal = self.terminal(chat, register=False)
        terminal.say(f"{chat}-bad", 42)
        probe = f"{chat}-after"
        terminal.say(probe, REGISTERING_LINE)
        return f"{chat}/{probe}/1", "text must be a string"

    def acknowledged(self, handle: str) -> bool:
        chat, message_id, delivery = handle.split("/")
        return len(self._state(chat)["accepted"].get(message_id, [])) >= int(delivery)

    def source(self, chat: str, user: str = "alice") -> Source:
        self.terminal(chat)     # the adapter knows this chat's terminal before an operation is sent to it
        return Source(platform=self.adapter_name, chat_id=chat, chat_type="dm", user_id=chat, user_name=chat)

    # -- outbound: what the terminal was shown
    def sent(self, chat: str) -> list[dict]:
        shown = list(self.detached.get(chat, []))
        if chat in self.terminals:
            terminal = self.terminals[chat]
            shown.extend((terminal.state() if self._daemon_running() else terminal.received())["shown"])
        return [{"message_id": m["message_id"], "text": m["text"], "deleted": m["deleted"]} for m in shown]

    def _daemon_running(self) -> bool:
        """Its admin port answers (a launcher killed by the test is a zombie until reaped: its pid still looks
        alive)."""
        runtime = RunFiles(self.workdir / "state").read_runtime()
        try:
            with socket.create_connection((runtime["bind_host"], runtime["admin_port"]), timeout=1.0):
                return True
        except (OSError, TypeError, KeyError):
            return False

    # -- the delivery case (see the module's doc)
    def hold_next_send(self, chat: str) -> None:
        self._state(chat)      # synced: the terminal knows the adapter, and the adapter knows the terminal
        assert self.terminal(chat).command({"hold": None})["ok"], f"{chat}'s terminal knows no adapter"
        self.holding = chat

    def send_held(self) -> bool:
        received = self.terminal(self.holding).received()
        shown = {m["message_id"] for m in received["shown"]}
        return any(held in shown for held in received["held"])

    def release_send(self) -> None:
        """Drops a hold (a send held goes on) where the adapter still runs; after a kill there is nothing to drop."""
        if self.holding in self.terminals and self._daemon_running():
            self.terminals[self.holding].command({"release": None})


HARNESS = CliHarness
