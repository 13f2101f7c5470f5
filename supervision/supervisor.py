"""The supervisor behaviour: starts children from specs, restarts them by policy, gives up by intensity.

State (per child, see ``ChildState``): its spec, current address and pid, status (``ChildStatus``: its phase, with
the transitions in spec.py), how its incarnation is ending (``Ending``), start time, restart count, last exit reason,
and the epoch of its current incarnation (timers carry it, so a timer meant for an earlier incarnation does
nothing). Facts beside the phase: whether its last crash had an outside cause, whether its process was missing at
the last liveness check (``vanished``), an unanswered DescribeTree.

Messages it takes:
  Started               from its parent: start the static children in order
  ChildReady            a child is up (pid known)            -> RUNNING
  CrashReport           a child is about to exit on a crash  -> remembered as its exit reason (and whether its
                        cause lies outside the gateway: such a crash is waited out, see spec.py)
  ChildStopping         a child is stopping cleanly          -> a transient child will not be restarted
  SupervisorGaveUp      a child supervisor escalates         -> remembered as its exit reason
  ChildActorExited      a child is gone (Thespian sends it twice for a graceful exit; the second finds no child
                        with that address and is ignored, which is what makes restarts idempotent)
  RestartChild          kill a child (SIGKILL: it may be hung) and let the policy restart it
  ConfigChanged         a reload: kept (every child started from now on gets it in its Started) and passed to
                        every running child
  DescribeTree          answer with this subtree, asking every child (describing.py; children that do not answer in
                        time are shown as unresponsive)
  timer liveness        every [supervision] liveness_check_s: a child whose process is gone without an exit notice is handled as
                        exited (Thespian can lose the notice)
Messages it sends: Started to each child, ActorExitRequest to children it stops, SupervisorGaveUp to its parent.

Restart flow: exit -> intensity check (give up if exceeded) -> stop the other affected children (strategy) ->
after a backoff delay, start the affected children again in start order. A crash with an outside cause skips the
intensity check and waits the longest backoff.
"""
from __future__ import annotations

import itertools
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import psutil
from thespian.actors import ActorExitRequest, ChildActorExited

from common.config import setting
from common.processes import process_start
from supervision.actor import GatewayActor
from supervision.describing import DescribesSubtree
from supervision.messages import (ActorRestarted, AddressesChanged, ChildReady, ChildStopping, ConfigChanged,
                                  CrashReport, RestartChild, Started, SupervisorGaveUp, TreeNode)
from supervision.spec import (ChildSpec, ChildStatus, Ending, Intensity, Restart, SupervisorFlags,
                              affected_children, backoff_delay, should_restart, wait_out_delay)
from runtime.child_addresses import forget_child_address



@dataclass(frozen=True)
class SupervisorArgs:
    """Start arguments of a supervisor whose children are all known up front: the tree as data."""
    flags: SupervisorFlags
    children: tuple = ()


@dataclass
class ChildState:
    spec: ChildSpec
    address: Any = None           # as createActor returned it (Thespian's local stand-in until the child is up)
    seen_as: Any = None           # the address its own messages come from (the sender of its ChildReady)
    pid: int = 0
    status: ChildStatus = ChildStatus.STOPPED
    started_at: float = 0.0
    ready_boot: float = 0.0       # when it answered Started, counted from boot (to tell its process from a newer one)
    restarts: int = 0
    last_exit: Optional[str] = None
    epoch: int = 0
    ending: Ending = Ending.UNANNOUNCED   # how its current incarnation is ending (a stop by us outranks its word)
    report: Optional[str] = None  # what the child (or its escalation) said before exiting
    outside_cause: bool = False   # ... and that it crashed on a cause outside the gateway (storage unavailable)
    outside_logged_at: float = 0.0
    vanished: bool = False        # its process was not found at the last liveness check
    asked_at: float = 0.0         # an unanswered DescribeTree is outstanding since then (0: none)
    last_asked: float = 0.0       # when it was last sent one (a question outstanding too long is asked again)
    last_pending: int = 0         # its pending work at its last answer: a slow child is not taken for idle
    last_node: Optional[TreeNode] = None  # its last answer: shown while it is still answering an earlier walk
    recent: Intensity = field(default_factory=lambda: Intensity(1_000_000, 60.0))


class Supervisor(DescribesSubtree, GatewayActor):
    """Subclasses provide ``child_specs()`` and ``flags()``; both may read ``self.config`` and the start args.
    A supervisor whose children other processes address directly names their Directory group in ``announces``:
    it tells its parent their addresses (AddressesChanged) whenever one comes up or goes away."""
    announces: Optional[str] = None

    def __init__(self):
        super().__init__()
        self.announcements = 0     # AddressesChanged sent by this incarnation (the parent keeps the newest)
        self.children: dict[str, ChildState] = {}
        self.order: list[str] = []
        self.intensity: Intensity | None = None
        self._flags = SupervisorFlags()
        self._groups: dict[int, list[str]] = {}
        self._group_ids = itertools.count(1)
        self._describe: dict[int, dict] = {}
        self._tokens = itertools.count(1)
        self.gave_up = False

    # ------------------------------------------------------------------------------------------- to override
    def child_specs(self, args) -> list[ChildSpec]:
        return list(getattr(args, "children", ()))

    def flags(self, args) -> SupervisorFlags:
        return getattr(args, "flags", None) or SupervisorFlags()

    # ------------------------------------------------------------------------------------------------ startup
    def on_start(self, args) -> None:
        self._flags = self.flags(args)
        self.intensity = Intensity(self._flags.max_restarts, self._flags.period_s)
        for spec in self.child_specs(args):
            self.start_child(spec)
        self.after(self.liveness_check_s(), "liveness")

    def start_child(self, spec: ChildSpec) -> ChildState:
        """Start a child from its spec (also used for dynamic children, e.g. sessions)."""
        child = self.children.get(spec.name)
        if child is None:
            # The child's own restart history (for its backoff) slides over the supervisor's intensity period.
            child = self.children[spec.name] = ChildState(spec, recent=Intensity(1_000_000, self._flags.period_s))
            self.order.append(spec.name)
        self._launch(child)
        return child

    def _launch(self, child: ChildState) -> None:
        child.address = self.createActor(child.spec.actor, targetActorRequirements=child.spec.placement) \
            if child.spec.placement else self.createActor(child.spec.actor)
        child.status, child.started_at, child.pid = ChildStatus.STARTING, time.time(), 0
        child.epoch += 1
        child.ending = Ending.UNANNOUNCED
        after_outside_cause = child.outside_cause
        child.report, child.asked_at, child.last_asked, child.outside_cause = None, 0.0, 0.0, False
        self.send(child.address, Started(child.spec.name, child.spec.kind_name, child.spec.args, self.config,
                                         after_outside_cause))
        if self.directory is not None:
            self.send(child.address, self.directory)

    def child_by_address(self, address) -> Optional[ChildState]:
        if address is None:
            return None
        for child in self.children.values():
            if child.address is not None and (child.address == address or
                                              (child.seen_as is not None and child.seen_as == address)):
                return child
        return None

    def on_directory(self, directory) -> None:
        for child in self.children.values():
            if child.address is not None:
                self.send(child.address, directory)

    def on_config_changed(self, old: dict) -> None:
        # A child starting now has been sent its Started with the old configuration: it takes this one after it.
        for child in self.children.values():
            if child.address is not None:
                self.send(child.address, ConfigChanged(self.config))

    # --------------------------------------------------------------------------------------- child life cycle
    def on_ChildReady(self, message: ChildReady, sender) -> None:
        child = self.children.get(message.name)
        if child is None or child.address is None:
            return
        # Matched by name, not only by address: createActor returns a local stand-in that Thespian associates
        # with the child's real address when it learns it, and under load the child's first message can arrive
        # before that. An address match alone then fails, for this message and for every later one (tree replies,
        # the exit notice): the child would look unresponsive forever and its exit would go unnoticed. Only the
        # incarnation we launched last is starting, and it is the only one that can answer Started.
        if child.address == sender or child.status is ChildStatus.STARTING:
            child.seen_as = sender
            # Uptime counts from here: the child has taken its Started and answered.
            child.pid, child.status, child.started_at = message.pid, ChildStatus.RUNNING, time.time()
            child.ready_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
            self.announce_children()

    def on_CrashReport(self, message: CrashReport, sender) -> None:
        child = self.children.get(message.name)
        if child is not None:
            child.report, child.outside_cause = message.reason, message.outside_cause

    def on_SupervisorGaveUp(self, message: SupervisorGaveUp, sender) -> None:
        child = self.children.get(message.name)
        if child is not None:
            child.report = f"gave up: {message.reason}"

    def on_ChildStopping(self, message: ChildStopping, sender) -> None:
        child = self.children.get(message.name)
        if child is not None and child.ending is not Ending.BY_SUPERVISOR:
            child.ending = Ending.ANNOUNCED

    def on_ChildActorExited(self, message: ChildActorExited, sender) -> None:
        child = self.child_by_address(message.childAddress)
        if child is None:
            return  # the second notice of a graceful exit, or a child we already replaced
        self.child_gone(child)

    def on_timer_liveness(self, _data) -> None:
        """Thespian can lose a child's exit notice: a child that exits before its own notice has left loses that one,
        and a notice that does arrive makes Thespian forget every child already dead, so the SIGCHLD that should
        have produced theirs finds nothing (a burst of replies ending together lost 3 of 100). A child whose process
        has been gone for two checks in a row is therefore taken as exited, exactly as if its notice had come."""
        for child in list(self.children.values()):
            # A child placed on another host has its pid there: only its host's loss tells (actors/hosts.py).
            if child.address is None or not child.pid or child.spec.placement \
                    or _process_alive(child.pid, child.ready_boot):
                child.vanished = False
            elif child.vanished:
                self.log.warning("%s: %s (pid %d) is gone but its exit was never announced; handling it now",
                                 self.name, child.spec.name, child.pid)
                self.child_gone(child)
            else:
                child.vanished = True   # its notice may still be on the way: look again next time
        self.after(self.liveness_check_s(), "liveness")

    def liveness_check_s(self) -> float:
        return float(setting(self.config, "supervision", "liveness_check_s"))

    def child_gone(self, child: ChildState) -> None:
        forget_child_address(self, child.address)   # Thespian's own record of it would otherwise stay for good
        child.address, child.seen_as, child.pid = None, None, 0
        self.announce_children()
        if child.ending is Ending.BY_SUPERVISOR:
            child.last_exit = child.report or "stopped by its supervisor"
            if self.gave_up and all(c.address is None for c in self.children.values()):
                self.on_timer_give_up(None)
            return
        abnormal = child.ending is not Ending.ANNOUNCED
        child.last_exit = child.report or ("stopped" if not abnormal else "killed (exited without a report)")
        self.child_exited(child, abnormal)
        if self.children.get(child.spec.name) is not child:
            return  # the hook forgot or replaced it
        if self._exiting or self.gave_up:
            child.status = ChildStatus.STOPPED
            return
        if not should_restart(child.spec.restart, abnormal):
            child.status = ChildStatus.STOPPED
            if child.spec.restart is Restart.TEMPORARY or not abnormal:
                self.forget_child(child.spec.name)
            return
        now = time.time()
        if abnormal and child.outside_cause:
            delay = wait_out_delay(self._flags)
            if now - child.outside_logged_at > 60.0:   # once a minute per child: a full disk lasts
                child.outside_logged_at = now
                self.log.warning("%s: %s stopped on a cause outside the gateway; retrying every ~%gs without "
                                 "counting it as a crash: %s", self.name, child.spec.name, self._flags.backoff_max_s,
                                 child.last_exit)
        elif not self.within_intensity(child, now):
            return
        else:
            child.recent.record(now)
            delay = backoff_delay(child.recent.recent(now) - 1, self._flags)
        child.restarts += 1
        # Counted here, where the restart is decided: once per restart, whether or not the ChildState survives it.
        self.report(ActorRestarted(child.spec.kind_name, child.last_exit or ""))
        self._schedule_restart(child.spec.name, delay)

    def within_intensity(self, child: ChildState, now: float) -> bool:
        """Count this restart against the supervisor's intensity; give up (and say no) when it is exceeded."""
        self.intensity.record(now)
        if self.intensity.exceeded(now):
            self.give_up(f"{child.spec.name} exited {self.intensity.recent(now)} times in "
                         f"{self._flags.period_s:g}s; last: {child.last_exit}")
            return False
        return True

    def child_exited(self, child: ChildState, abnormal: bool) -> None:
        """Hook for subclasses that keep routing tables (e.g. the session supervisor)."""

    def announce_children(self) -> None:
        """Tell the parent where the children of ``announces`` are now, in the order of the child specs, each by
        the address its own ChildReady came from (None while it is not running)."""
        if self.announces is None or self.parent is None:
            return
        self.announcements += 1
        addresses = tuple((name, c.seen_as if c.status is ChildStatus.RUNNING else None)
                          for name, c in self.children.items())
        self.send(self.parent, AddressesChanged(self.announces, addresses, self.started_at, self.announcements))

    def forget_child(self, name: str) -> None:
        self.children.pop(name, None)
        if name in self.order:
            self.order.remove(name)

    def _schedule_restart(self, failed: str, delay: float) -> None:
        names = affected_children(self._flags.strategy, self.order, failed)
        for name in names:
            other = self.children[name]
            other.status = ChildStatus.RESTARTING
            if name != failed and other.address is not None:
                self._stop(other)
        group = next(self._group_ids)
        self._groups[group] = names
        self.after(delay, "restart", group)

    def on_timer_restart(self, group: int) -> None:
        names = [n for n in self._groups.get(group, []) if n in self.children]
        if self._exiting or self.gave_up:
            return
        if any(self.children[n].address is not None for n in names):
            self.after(0.05, "restart", group)  # wait for the siblings we stopped; the kill timer bounds this
            return
        self._groups.pop(group, None)
        for name in names:
            self._launch(self.children[name])

    def _stop(self, child: ChildState) -> None:
        child.ending = Ending.BY_SUPERVISOR
        self.send(child.address, ActorExitRequest())
        self.after(child.spec.shutdown_timeout_s, "kill", (child.spec.name, child.epoch))

    def on_timer_kill(self, data) -> None:
        name, epoch = data
        child = self.children.get(name)
        if child is not None and child.epoch == epoch and child.address is not None:
            self._kill(child, f"did not stop within {child.spec.shutdown_timeout_s:g}s")

    def _kill(self, child: ChildState, reason: str) -> None:
        child.report = reason
        if child.pid and not child.spec.placement:   # a placed child's pid is its host's: not a process here
            try:
                os.kill(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        else:
            self.send(child.address, ActorExitRequest())

    def on_RestartChild(self, message: RestartChild, sender) -> None:
        child = self.children.get(message.name)
        if child is not None and child.address is not None and (not message.pid or message.pid == child.pid):
            self.log.warning("%s: restarting %s: %s", self.name, message.name, message.reason)
            self._kill(child, message.reason)

    def give_up(self, reason: str) -> None:
        """Stop every child (gracefully, bounded by its shutdown timeout), then escalate and exit."""
        self.log.error("%s gives up: %s", self.name, reason)
        self.gave_up, self._give_up_reason = True, reason
        alive = [self.children[n] for n in reversed(self.order) if self.children[n].address is not None]
        for child in self.children.values():
            child.status = ChildStatus.FAILED
        for child in alive:
            self._stop(child)
        if alive:
            self.after(max(c.spec.shutdown_timeout_s for c in alive), "give_up")
        else:
            self.on_timer_give_up(None)

    def on_timer_give_up(self, _data) -> None:
        if self._exiting:
            return
        for child in self.children.values():
            if child.address is not None:
                self._kill(child, "its supervisor gave up")
        if self.parent is not None:
            self.send(self.parent, SupervisorGaveUp(self.name, self._give_up_reason))
        self.stop_self(clean=False)

    # ---------------------------------------------------------------------------------------------- inspection
    def state_name(self) -> str:
        return "failed" if self.gave_up else "running"

    def counts(self) -> dict:
        statuses = [c.status.value for c in self.children.values()]   # plain strings, as the admin views had them
        return {s: statuses.count(s) for s in set(statuses)}


def _process_alive(pid: int, ready_boot: float) -> bool:
    """The child's process still runs: the pid exists, is not a zombie, and was not handed to a newer process (one
    created after the child said it was ready)."""
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and process_start(pid) <= ready_boot + 1.0
    except psutil.Error:
        return False
