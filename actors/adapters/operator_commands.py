"""The operator's commands to an adapter (AdapterCommand: `adapters pause|resume|reconnect NAME`, and the console's
adapters page): pause its intake, resume it, reconnect it. A part of PlatformAdapter (base.py), kept apart.

State (actor thread): ``paused`` (by an operator: the intake is not running), ``commanding`` (the command waiting
for the intake to halt, with its sender), and the intake's run: ``_intake_task`` (the bridge's future) and, on the
loop thread, ``_intake_running`` (its asyncio task, which a halt cancels and waits for).

  running --pause--> halting --halted--> paused --resume--> running
  running --reconnect--> halting --halted--> running (a new connection)

A halt cancels the intake between rounds or mid-fetch: a round being stored is shielded and completes (its rows
and offset commit together, intake.py), so a pause loses nothing: what the platform sends meanwhile stays with it
(or is refused by a served intake, whose platform sends it again) and the resumed intake takes it from the offset.
kill -9: nothing of a pause survives; the next life of the adapter takes messages again, from the committed offset.
"""
from __future__ import annotations

import asyncio
import time

from actors.messages import ADAPTER_COMMANDS, AdapterCommand, AdapterCommandDone

HALT_TIMEOUT_S = 5.0


def command_refusal(action: str, *, paused: bool, draining: bool, busy: bool) -> str:
    """Why the command cannot be done now ("" if it can). Pure."""
    if action not in ADAPTER_COMMANDS:
        return f"no such command {action[:40]!r}; try one of {', '.join(ADAPTER_COMMANDS)}"
    if draining:
        return "the gateway is draining: the intake is stopped for good"
    if busy:
        return "another command is being done; try again"
    if action == "pause" and paused:
        return "already paused"
    if action == "resume" and not paused:
        return "not paused"
    if action == "reconnect" and paused:
        return "paused: resume it instead"
    return ""


class OperatorCommands:
    paused = False
    commanding = None             # (AdapterCommand, sender) while its halt runs
    _intake_task = None
    _intake_running = None

    def start_intake(self) -> None:
        self._intake_task = self.bridge.submit(self._run_intake(), tag="intake")

    async def _run_intake(self) -> None:
        self._intake_running = asyncio.current_task()
        await self.intake.run_forever()

    async def _halt_intake(self) -> None:
        task = self._intake_running
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=HALT_TIMEOUT_S)
        self.intake.healthy = False

    def on_AdapterCommand(self, message: AdapterCommand, sender) -> None:
        refusal = command_refusal(message.action, paused=self.paused, draining=self.intake_stopped,
                                  busy=self.commanding is not None)
        if refusal:
            self.log.info("%s: %s by %s refused: %s", self.name, message.action[:40], message.by, refusal)
            self.send(sender, AdapterCommandDone(self.name, message.action, False, refusal))
            return
        self.log.info("%s: intake %s by %s", self.name, message.action, message.by)
        if message.action == "resume":
            self.paused = False
            self.connection.resumed(time.time())
            self.start_intake()
            self.send(sender, AdapterCommandDone(self.name, "resume", True, "intake resumed"))
            return
        self.commanding = (message, sender)
        self.bridge.submit(self._halt_intake(), tag="halted")

    def intake_halted(self) -> None:
        """The halt of a pause or a reconnect is done (actor thread)."""
        (message, sender), self.commanding = self.commanding, None
        if self.intake_stopped:   # a drain came meanwhile: it stays stopped
            self.send(sender, AdapterCommandDone(self.name, message.action, False, "the gateway is draining"))
        elif message.action == "pause":
            self.paused = True
            self.connection.paused(message.by, time.time())
            self._report_connection(False)
            self.send(sender, AdapterCommandDone(self.name, "pause", True, "intake paused; outbound continues"))
        else:
            self.start_intake()
            self.send(sender, AdapterCommandDone(self.name, "reconnect", True, "reconnecting"))
