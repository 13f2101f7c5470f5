"""One user's terminal for the cli conformance harness (tests/adapters/harnesses/cli.py), run as its own process.

What ``run_gateway.py chat`` is to the gateway, this is too: an external process attached through the daemon's admin
port (daemon/admin.py AdminClient), finding the ``CliAdapter`` in the live tree and exchanging CliSay / CliAccepted /
CliShow with it. Instead of drawing on a screen it records what the bot showed, and it takes its lines from the
harness: one JSON command per line on stdin, one JSON answer per line on stdout.

Commands:
  {"say": {"message_id": ..., "text": ...}}   tell the adapter a line (any JSON value as text: a broken client's
                                              line is sent as given); answered {"ok": true} once told
  {"state": null}                             -> {"accepted": {message_id: [[seq, refused], ...]},
                                                  "shown": [{"message_id", "text", "deleted"}, ...],
                                                  "held": [message_id, ...], "synced": bool}
  {"received": null}                          the same at once, unsynced ("synced": false): what came, when the
                                              daemon that showed it is gone
  {"hold": null} / {"release": null}          the delivery case (fault injection, actors/adapters/send_hold.py):
                                              tell the adapter HoldNextSend for this user's chat / ReleaseSend;
                                              answered {"ok": bool} (false: no adapter known yet). The
                                              adapter's SendHeld answers show in "held".

What the bot showed reaches this process by its own path, not with the OpResult the suite waits for: a state is
answered once the adapter has answered a done check asked after the command came (CliAskDone of a row that cannot
exist, a negative seq). The adapter sends to one terminal in order, so everything it showed before is in by then
("synced"; false if the adapter was not found or did not answer within SYNC_S).

A line not accepted within RESEND_S (the adapter was killed and restarted by its supervisor meanwhile) is told again
with the same message id to the adapter the tree shows then, as a terminal does; the inbox deduplicates it. The
process ends when stdin closes.

Usage: python -m tests.adapters.cli_terminal_process CONFIG USER   (GATEWAY_STATE_DIR set to the daemon's)
"""
from __future__ import annotations

import json
import queue
import sys
import threading
import time

from actors.messages import (CliAccepted, CliAskDone, CliDone, CliSay, CliShow, HoldNextSend, ReleaseSend,
                             SendHeld)
from common import config as config_mod
from daemon.admin import AdminClient
from daemon.asking import listen_for
from supervision import tree as tree_mod
from supervision.messages import DescribeTree, TreeReply

RESEND_S = 2.0       # a line unanswered this long: look the adapter up again, and tell it again if it moved
RETELL_S = 10.0      # ... or if it is the same adapter but still silent (the line may have been lost with a crash)
LISTEN_S = 0.05
SYNC_S = 10.0        # a state waits this long at most for the adapter's answer to its done check


class TerminalProcess:
    def __init__(self, client: AdminClient, user: str):
        self.client, self.user = client, user
        self.adapter = None
        self.looked_up_at = -RESEND_S
        self.pending: dict[str, tuple] = {}     # message id -> (CliSay, the adapter told, when)
        self.accepted: dict[str, list] = {}     # message id -> [[seq, refused], ...]: one per answer
        self.shown: dict[str, dict] = {}        # message id -> {"text", "deleted"}, in the order first shown
        self.held: list[str] = []               # the message ids of sends the adapter said it holds
        self.syncs = 0
        self.waiting_state: tuple | None = None  # (the done check's seq, its deadline) of a state not answered yet
        self.sync_asked = False

    # -------------------------------------------------------------------------------------------- the adapter
    def look_up(self) -> None:
        """Ask the root for the tree; its TreeReply comes through ``take`` (never waited for here)."""
        self.looked_up_at = time.monotonic()
        self.client.asys.tell(self.client.root, DescribeTree(1))

    def found(self, root) -> None:
        ref = next((n.ref for n, _parent, _depth in tree_mod.walk(root) if n.kind == "CliAdapter"), None)
        if ref is None:
            return          # restarting, or shown as last known without an address: asked again later
        moved, self.adapter = ref != self.adapter, ref
        if moved:
            self.sync_asked = False    # a done check asked of the adapter that was killed is asked of this one
        now = time.monotonic()
        for message_id, (line, told, at) in list(self.pending.items()):
            if told is None or (moved and told != ref) or now - at > RETELL_S:
                self.tell(line)

    def tell(self, line: CliSay) -> None:
        self.pending[line.message_id] = (line, self.adapter, time.monotonic())
        if self.adapter is not None:
            self.client.asys.tell(self.adapter, line)

    # ------------------------------------------------------------------------------------------------ the mail
    def take(self, message) -> None:
        if isinstance(message, TreeReply):
            self.found(message.node)
        elif isinstance(message, CliAccepted):
            self.pending.pop(message.message_id, None)
            self.accepted.setdefault(message.message_id, []).append([message.seq, message.refused])
        elif isinstance(message, CliShow):
            if message.action == "send":
                self.shown[message.message_id] = {"text": message.text, "deleted": False}
            elif message.action == "edit" and message.message_id in self.shown:
                self.shown[message.message_id]["text"] = message.text
            elif message.action == "delete" and message.message_id in self.shown:
                self.shown[message.message_id]["deleted"] = True
        elif isinstance(message, SendHeld):
            self.held.append(message.message_id)
        elif isinstance(message, CliDone) and self.waiting_state and message.seq == self.waiting_state[0]:
            self.answer_state(synced=True)

    def answer_state(self, synced: bool) -> None:
        self.waiting_state = None
        answer({"accepted": self.accepted, "shown": [{"message_id": m, **s} for m, s in self.shown.items()],
                "held": self.held, "synced": synced})

    # ---------------------------------------------------------------------------------------------- commands
    def command(self, command: dict) -> None:
        if "say" in command:
            self.tell(CliSay(self.user, command["say"]["text"], command["say"]["message_id"]))
            answer({"ok": True})
        elif "received" in command:
            self.answer_state(synced=False)
        elif "hold" in command or "release" in command:
            if self.adapter is not None:
                self.client.asys.tell(self.adapter, HoldNextSend(self.user) if "hold" in command else ReleaseSend())
            answer({"ok": self.adapter is not None})
        elif "state" in command:
            self.syncs += 1
            self.waiting_state = (-self.syncs, time.monotonic() + SYNC_S)
            self.sync_asked = False     # asked once the adapter is known (this terminal may have just attached)
        else:
            answer({"error": f"unknown command {sorted(command)}"})

    def run(self, commands: queue.Queue) -> None:
        self.look_up()
        while True:
            while self.waiting_state is None:      # one command at a time: the harness waits for each answer
                try:
                    command = commands.get_nowait()
                except queue.Empty:
                    break
                if command is None:
                    return
                self.command(command)
            if self.waiting_state and not self.sync_asked and self.adapter is not None:
                self.sync_asked = True
                self.client.asys.tell(self.adapter, CliAskDone(self.waiting_state[0]))
            if self.waiting_state and time.monotonic() > self.waiting_state[1]:
                self.answer_state(synced=False)
            if ((self.adapter is None or self.pending or self.waiting_state)
                    and time.monotonic() - self.looked_up_at > RESEND_S):
                self.look_up()
            listen_for(self.client.asys, (), LISTEN_S, other=self.take)


def answer(reply: dict) -> None:
    print(json.dumps(reply), flush=True)


def read_commands(commands: queue.Queue) -> None:
    for line in sys.stdin:
        if line.strip():
            commands.put(json.loads(line))
    commands.put(None)


def main(config_path: str, user: str) -> None:
    client = AdminClient(config_mod.load(config_path))
    commands: queue.Queue = queue.Queue()
    threading.Thread(target=read_commands, args=(commands,), daemon=True).start()
    answer({"attached": True})
    TerminalProcess(client, user).run(commands)


if __name__ == "__main__":
    main(*sys.argv[1:3])
