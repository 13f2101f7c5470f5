"""The watchdog: health checks, heartbeat, drain and graceful shutdown.

State: ``phase`` (``WatchdogPhase``), the outstanding pings of the current health round, the drain or shutdown in
progress (``Closing``: who asked, deadline, flushes awaited).

Phase (health rounds go on in every phase; the admin tree shows WATCHING as "running", the others by their value):
  WATCHING -> DRAINING           DrainRequest: intake stopped, the tree walked until idle or the timeout, then flushed
  DRAINING -> DRAINED            DrainReport sent (intake stays stopped; the launcher exits 0)
  WATCHING -> SHUTTING_DOWN      ShutdownRequest: intake stopped, every actor flushed at once
  SHUTTING_DOWN -> STOPPED       ShutdownReady sent (the launcher stops the system)
  DRAINED | STOPPED -> DRAINING | SHUTTING_DOWN   a later request starts its operation again
A request that comes while one operation runs joins it (it gets that operation's report).

Every ``interval_s`` it walks the tree (DescribeTree to the root), pings every actor, and asks the supervisor of any
actor that missed its ping (``ping_deadline_s``) in PATIENCE rounds in a row (SUPERVISOR_PATIENCE for a supervisor,
whose restart takes its subtree down) to restart it. A round whose deadline timer fired late proves nothing (the
watchdog itself was starved of CPU) and restarts nothing: on an overloaded machine, restarts would add load. It
rewrites ``<state_dir>/run/heartbeat.json`` on every round, so an outside monitor can tell a live gateway from a
wedged one by the file's age.

Drain:    StopIntake to every actor -> walk the tree until no work is in flight or the timeout -> Flush every actor
          -> DrainReport to the root (which tells the operator and the launcher, which exits 0).
Shutdown: StopIntake -> Flush every actor -> ShutdownReady to the root (the launcher then stops the system).

Messages it takes: timers tick / ping_deadline / drain_poll / flush_deadline, TreeReply, Pong, Flushed,
DrainRequest, ShutdownRequest. Messages it sends: DescribeTree, Ping, RestartChild, StopIntake, Flush,
DrainReport, ShutdownReady.
"""
from __future__ import annotations

import enum
import itertools
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from actors.messages import DrainReport, DrainRequest, ShutdownReady, ShutdownRequest
from common.config import setting
from supervision.messages import DescribeTree, Flush, Flushed, Ping, Pong, RestartChild, StopIntake, TreeReply
from supervision import tree
from supervision.actor import GatewayActor

NOT_IN_FLIGHT = ("DeliverySweeper",)  # obligations it holds are durable in the ledger: drain need not wait
PATIENCE = 2                # missed health rounds in a row before an actor is restarted
SUPERVISOR_PATIENCE = 3     # ... and a supervisor, whose restart takes its subtree down


class WatchdogPhase(enum.StrEnum):
    # str-valued: the values are what heartbeat.json's "phase" and the admin tree's state say (unchanged)
    WATCHING = "watching"
    DRAINING = "draining"
    SHUTTING_DOWN = "shutting_down"
    DRAINED = "drained"
    STOPPED = "stopped"


@dataclass
class Closing:
    """The drain or shutdown in progress."""
    requesters: list
    started: float
    deadline: float
    in_flight: int = 0                 # pending work at the last walk (actors in NOT_IN_FLIGHT aside)
    flushed: int = 0                   # items the actors' Flushed answers counted
    awaiting: list = field(default_factory=list)   # actors whose Flushed has not come yet
    intake_stopped: bool = False       # StopIntake went to every actor
    busy: list = field(default_factory=list)       # "name (pending)" of each busy actor at the last walk
    turns: int = 0                     # turns still in flight at the last walk
    idle_walks: int = 0                # walks in a row that found nothing in flight
    flush_token: int | None = None


class Watchdog(GatewayActor):
    def __init__(self):
        super().__init__()
        self.phase = WatchdogPhase.WATCHING
        self.nonces = itertools.count(1)
        self.walks: dict[int, str] = {}            # token -> purpose (health | drain)
        self.pings: dict[int, tuple] = {}          # nonce -> (node, parent node), unanswered so far
        self.operation: Closing | None = None      # the drain or shutdown in progress
        self.last_round: dict = {}
        self.misses: dict[str, int] = {}   # actor name -> health rounds in a row whose ping it missed

    def on_start(self, args) -> None:
        self.interval = setting(self.config, "watchdog", "interval_s")
        self.deadline = setting(self.config, "watchdog", "ping_deadline_s")
        self.heartbeat = Path(self.config["gateway"]["state_dir"]) / "run" / "heartbeat.json"
        self.after(min(self.interval, 1.0), "tick")

    def state_name(self) -> str:
        return self.phase.value if self.phase is not WatchdogPhase.WATCHING else "running"

    # ------------------------------------------------------------------------------------------ health rounds
    def on_timer_tick(self, _data) -> None:
        self._walk("health")
        self.after(self.interval, "tick")

    def _walk(self, purpose: str) -> None:
        token = next(self.nonces)
        self.walks[token] = purpose
        self.send(self.parent, DescribeTree(token))

    def on_TreeReply(self, message: TreeReply, sender) -> None:
        purpose = self.walks.pop(message.token, None)
        if purpose == "health":
            self._health_round(message.node)
        elif purpose == "drain":
            self._drain_progress(message.node)
        elif purpose == "flush":
            self._flush_all(message.node)

    def _health_round(self, root) -> None:
        outstanding = {node.name for node, _ in self.pings.values()}  # still waiting: not pinged twice
        sent = set()
        for node, parent, _depth in tree.walk(root):
            # Every actor with an address is pinged, including one its supervisor found silent: slow to describe
            # is not dead, and only a missed ping (a mailbox that does not move) gets an actor restarted.
            if parent is None or node.ref is None or node.ref == self.myAddress:
                continue
            if node.state in ("running", "unresponsive", "busy") and node.name not in outstanding:
                nonce = next(self.nonces)
                self.pings[nonce] = (node, parent)
                sent.add(nonce)
                self.send(node.ref, Ping(nonce))
        self.after(self.deadline, "ping_deadline", (sent, time.monotonic()))
        counts = tree.counts(root, without_children_of=("ConventionHosts",))   # hosts are listed, not actors
        self.last_round = {"time": time.time(), "pid": os.getpid(), "phase": self.phase.value, **counts}
        self._write_heartbeat()

    def on_Pong(self, message: Pong, sender) -> None:
        answered = self.pings.pop(message.nonce, None)
        if answered is not None:
            self.misses.pop(answered[0].name, None)

    def on_timer_ping_deadline(self, data) -> None:
        nonces, sent_at = data
        late = time.monotonic() - sent_at - self.deadline
        starved = late > max(1.0, self.deadline / 2)
        if starved:
            # This timer fired long after its time: the watchdog itself did not get the CPU, so a ping unanswered
            # meanwhile says the machine is overloaded, not that the actor is hung. Restarting would add load.
            self.log.warning("watchdog: health round judged %.1fs late (machine overloaded); no restart from it", late)
        for nonce in nonces:
            pending = self.pings.pop(nonce, None)
            if pending is None or starved:
                continue
            node, parent = pending
            # A restart loses the actor's in-memory work, and a supervisor's takes its subtree down: an actor is
            # judged hung only after missing PATIENCE rounds in a row (a busy one answers between its turns).
            patience = SUPERVISOR_PATIENCE if node.kind.endswith("Supervisor") else PATIENCE
            misses = self.misses[node.name] = self.misses.get(node.name, 0) + 1
            if misses < patience:
                self.log.warning("watchdog: %s %s (pid %s) did not answer a ping within %gs (%d of %d)",
                                 node.kind, node.name, node.pid, self.deadline, misses, patience)
                continue
            self.misses.pop(node.name, None)
            self._restart(node, parent, f"did not answer {patience} pings in a row within {self.deadline:g}s")

    def _restart(self, node, parent, reason: str) -> None:
        self.log.error("watchdog: %s %s (pid %s) %s; asking %s to restart it", node.kind, node.name, node.pid,
                       reason, parent.name)
        self.send(parent.ref, RestartChild(node.name, reason, node.pid))

    def _write_heartbeat(self) -> None:
        tmp = self.heartbeat.with_suffix(".tmp")
        try:
            self.heartbeat.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self.last_round))
            os.replace(tmp, self.heartbeat)
        except OSError as exc:  # a full disk must not stop health checks
            self.log.error("watchdog: cannot write heartbeat %s: %s", self.heartbeat, exc)

    # -------------------------------------------------------------------------------------- drain and shutdown
    def on_DrainRequest(self, message: DrainRequest, sender) -> None:
        self._begin(WatchdogPhase.DRAINING, sender, message.timeout_s)

    def on_ShutdownRequest(self, message: ShutdownRequest, sender) -> None:
        self._begin(WatchdogPhase.SHUTTING_DOWN, sender, message.timeout_s)

    def _begin(self, phase: WatchdogPhase, requester, timeout_s: float) -> None:
        if self.operation is not None:
            self.operation.requesters.append(requester)
            return
        self.phase = phase
        self.operation = Closing([requester], time.monotonic(), time.monotonic() + timeout_s)
        # INFO: an operator's stop or drain is the gateway doing as told, not a warning sign.
        self.log.info("watchdog: %s (timeout %gs): intake stopped", phase.value.replace("_", " "), timeout_s)
        self._walk("drain")

    def _drain_progress(self, root) -> None:
        op = self.operation
        if op is None:
            return
        if not op.intake_stopped:
            op.intake_stopped = True
            for node, parent, _ in tree.walk(root):
                if node.ref is not None and node.ref != self.myAddress and parent is not None:
                    self.send(node.ref, StopIntake())
        busy = [n for n, _, _ in tree.walk(root) if n.pending and n.kind not in NOT_IN_FLIGHT]
        in_flight = sum(n.pending for n in busy)
        op.in_flight = in_flight
        op.busy = [f"{n.name} ({n.pending})" for n in busy]
        op.turns = sum(n.pending for n in tree.find_kind(root, "Session"))
        # Idle twice in a row: one walk can miss work a slow actor did not report in time.
        op.idle_walks = op.idle_walks + 1 if not in_flight else 0
        if self.phase is WatchdogPhase.DRAINING and op.idle_walks < 2 and time.monotonic() < op.deadline:
            self.after(0.2, "drain_poll")
            return
        self._flush_all(root)

    def on_timer_drain_poll(self, _data) -> None:
        self._walk("drain")

    def _flush_all(self, root) -> None:
        op = self.operation
        token = next(self.nonces)
        op.flush_token = token
        op.awaiting = [node.ref for node, parent, _ in tree.walk(root)
                       if node.ref is not None and node.ref != self.myAddress and parent is not None]
        for ref in op.awaiting:
            self.send(ref, Flush(token))
        self.after(max(0.5, min(5.0, op.deadline - time.monotonic())), "flush_deadline", token)
        if not op.awaiting:
            self._finish()

    def on_Flushed(self, message: Flushed, sender) -> None:
        op = self.operation
        if op is None or message.token != op.flush_token:
            return
        op.flushed += message.count
        op.awaiting = [ref for ref in op.awaiting if ref != sender]
        if not op.awaiting:
            self._finish()

    def on_timer_flush_deadline(self, token) -> None:
        if self.operation is not None and self.operation.flush_token == token:
            self._finish()

    def _finish(self) -> None:
        op, self.operation = self.operation, None
        waited = time.monotonic() - op.started
        if self.phase is WatchdogPhase.DRAINING:
            left = op.turns
            busy = op.busy
            reply = DrainReport(ok=op.in_flight == 0, waited_s=round(waited, 3), in_flight_left=left,
                                detail=f"flushed {op.flushed} item(s)" + (
                                    "" if not op.awaiting else f"; no flush answer from {len(op.awaiting)}")
                                + ("" if not busy else f"; still busy at the deadline: {', '.join(busy[:10])}"
                                   + (f" and {len(busy) - 10} more" if len(busy) > 10 else "")))
        else:
            reply = ShutdownReady(op.flushed, f"took {waited:.3f}s")
        complete = not op.awaiting and (self.phase is not WatchdogPhase.DRAINING or reply.ok)
        (self.log.info if complete else self.log.warning)(
            "watchdog: %s", reply if self.phase is WatchdogPhase.DRAINING else f"shutdown flush finished: {reply}")
        for requester in op.requesters:
            self.send(requester, reply)
        self.phase = WatchdogPhase.DRAINED if self.phase is WatchdogPhase.DRAINING else WatchdogPhase.STOPPED
