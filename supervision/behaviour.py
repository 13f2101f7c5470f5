"""What every actor and every cell is written on: handlers named ``on_<MessageType>``, the lifecycle hooks, and the
messages every one of them answers the same way.

Two kinds of actor share this (docs/design.md §1.1): a process actor (``supervision/actor.py``: one Thespian actor,
one OS process) and a cell (``supervision/cell.py``: a lightweight actor hosted on a session shard's loop). A class
written on either is written the same way; only where it runs differs. The class that runs it provides ``send(address,
message)``, ``after(seconds, tag, data)``, ``stop_self(clean)`` and ``myAddress``.

What every actor gets from here:

* ``Started`` from its parent gives it its name, kind, arguments and the configuration; then ``on_start(args)``.
* ``Ping`` is answered with ``Pong``, ``DescribeTree`` with a ``TreeNode``, ``Flush`` with ``Flushed``.
* ``Directory`` (the well-known addresses) is kept when it is newer than the one held, then ``on_directory`` runs;
  one of the same version is taken again (the root re-sends its directory when asked: ``DirectoryWanted``).
* ``DirectoryWanted`` goes on to the parent, at most once per DIRECTORY_ASK_INTERVAL_S from each actor.
* ``StopIntake`` (drain) sets ``intake_stopped``.
* ``ConfigChanged`` (a reload) replaces ``config`` when its generation is newer, then ``on_config_changed(old)``.
* ``Fault`` (fault injection, only with ``[debug] fault_injection``) crashes, hangs or exits the actor, or stops
  or blocks its loop (``loop_exit``, ``loop_hang``).
* Timers: ``on_timer_<tag>(data)`` runs when a timer set with ``after(seconds, tag, data)`` is due.

One dispatch style (docs/design.md §1.7), by name, with no isinstance chains: mail goes to
``on_<MessageType>(message, sender)``, a timer to ``on_timer_<tag>(data)``, and an item the actor's async work
posted (it comes back from the loop) to ``on_loop_<ItemType>(item)``. Items have their own names so that a type that
is both mail and an item never reaches the wrong handler. An item of a type with no handler goes to
``on_bridge(item)``, the catch-all (a ``TaskDone`` the actor does not wait for, say).

Lifecycle hooks, on the thread that runs the actor's handlers (the Thespian actor's own thread, for a cell too):
``on_start(args)`` right after Started; ``on_bridge(item)`` for each item the actor's async work posted that no
``on_loop_<ItemType>`` takes;
``on_stop()`` when the actor stops on purpose or after a crash (best effort: never after a kill -9, so nothing that
must survive may rely on it).
"""
from __future__ import annotations

import logging
import os
import sys
import time

from supervision.messages import (Batch, DescribeTree, DirectoryWanted, Fault, Flush, Flushed, Ping, Pong, Started,
                                  TreeNode, TreeReply)
from storage import StorageUnavailable
from common.config import setting


DIRECTORY_ASK_INTERVAL_S = 10.0   # however many of an actor's cells ask, its parent hears it this often at most


class Behaviour:
    uses_bridge = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.name = self.__class__.__name__
        self.kind = self.__class__.__name__
        self.config: dict = {}
        self.parent = None
        self.started_at = time.time()
        self.bridge = None
        self.intake_stopped = False
        self.after_outside_cause = False   # our previous incarnation stopped on unavailable storage
        self.directory = None      # the latest Directory: where the sessions, sweeper and adapters are
        self._directory_asked_at = -DIRECTORY_ASK_INTERVAL_S
        self._exiting = False
        self.log = logging.getLogger("gateway." + self.kind)

    # ------------------------------------------------------------------------------------------- for every kind
    def report(self, fact) -> None:
        """Tell the metrics actor a fact (``actors/messages/metrics.py``), if the directory names one.
        Never raises, never waits: a fact sent while the metrics actor restarts is lost, as metrics may be."""
        target = getattr(self.directory, "metrics", None) if self.directory is not None else None
        if target is not None:
            self.send(target, fact)

    # ---------------------------------------------------------------------------------------- overridable hooks
    def on_start(self, args) -> None:
        """After Started: the actor knows its name, parent and configuration."""

    def on_stop(self) -> None:
        """On a graceful stop or after a crash. Not called after a kill -9."""

    def on_bridge(self, item) -> None:
        """An item posted by this actor's async work that no ``on_loop_<ItemType>`` takes, on the actor's thread."""

    def take_bridge_item(self, item) -> None:
        """Where the bridge hands each item: a fact for the metrics actor (``metric_fact``, e.g. a plugin's hook
        that failed on the loop, which may not log) is logged with its ``log_line`` and reported; anything else
        goes to its ``on_loop_<ItemType>(item)``, else to ``on_bridge``."""
        if getattr(item, "metric_fact", False):
            self.log.warning("%s", getattr(item, "log_line", item))
            self.report(item)
            return
        handler = getattr(self, "on_loop_" + type(item).__name__, None)
        if handler is None:
            self.on_bridge(item)
        else:
            handler(item)

    def on_directory(self, directory) -> None:
        """The well-known addresses changed (one of them was restarted)."""

    def on_config_changed(self, old: dict) -> None:
        """A reload landed: ``self.config`` is the new configuration, ``old`` the one before. An actor that keeps
        something it derived from the configuration derives it again here (what it has started stays as it is)."""

    def pending_work(self) -> int:
        """How much work this actor holds right now (admin views, drain)."""
        return 0

    def state_name(self) -> str:
        return "running"

    def flush(self) -> int:
        """Persist whatever this actor buffers; return how many items it wrote. Drain and shutdown call it."""
        return 0

    def describe(self) -> TreeNode:
        return TreeNode(kind=self.kind, name=self.name, pid=os.getpid(), address=str(self.myAddress),
                        state=self.state_name(), started_at=self.started_at, pending=self.pending_work(),
                        ref=self.myAddress)

    def debug_enabled(self) -> bool:
        return bool(setting(self.config, "debug", "fault_injection"))

    # -------------------------------------------------------------------------------------------- the dispatch
    def handle(self, message, sender) -> None:
        """One message, on the actor's own thread; an exception is the caller's to turn into a crash."""
        if isinstance(message, Started):
            self.take_started(message, sender)
            debug = self.config.get("debug", {})
            if debug.get("fault_injection") and debug.get("crash_on_start") == self.name:
                raise RuntimeError(f"{self.name} crashes on start ([debug] crash_on_start)")
            self.on_start(message.args)
        elif isinstance(message, Ping):
            self.send(sender, Pong(message.nonce, self.name, os.getpid()))
        elif isinstance(message, DescribeTree):
            self.on_DescribeTree(message, sender)
        elif isinstance(message, Fault):
            self.fault(message)
        elif isinstance(message, Batch):
            for item in message.items:   # each as if it had come alone, in the order they were sent
                self.handle(item, sender)
        else:
            handler = getattr(self, "on_" + type(message).__name__, None)
            if handler is None:
                self.log.warning("%s: no handler for %s", self.name, type(message).__name__)
                return
            handler(message, sender)

    def fire_timer(self, tag: str, data) -> None:
        getattr(self, f"on_timer_{tag}")(data)

    def take_started(self, message: Started, sender) -> None:
        self.name, self.kind = message.name, message.kind or self.kind
        started_on = message.config or {}
        # A reload's ConfigChanged may overtake the Started sent just before it: the newer configuration is kept.
        if int(started_on.get("_generation", 0)) >= int(self.config.get("_generation", 0)):
            self.config = started_on
        self.after_outside_cause = message.after_outside_cause
        self.parent = sender
        self.log = logging.getLogger("gateway." + self.kind)

    def on_DescribeTree(self, message: DescribeTree, sender) -> None:
        self.send(sender, TreeReply(message.token, self.describe()))

    def on_Flush(self, message: Flush, sender) -> None:
        self.send(sender, Flushed(message.token, self.flush()))

    def on_ConfigChanged(self, message, sender) -> None:
        new = message.config or {}
        if int(new.get("_generation", 0)) <= int(self.config.get("_generation", 0)):
            return   # one we started on already, or overtaken by a newer reload
        old, self.config = self.config, new
        if self.parent is not None:   # before its Started, an actor has derived nothing yet
            self.on_config_changed(old)

    def on_Directory(self, message, sender) -> None:
        if self.directory is None or message.version >= self.directory.version:
            self.directory = message
            self.on_directory(message)

    def want_directory(self, why: str) -> None:
        """Ask the root, through the parents, for its directory again (rate-limited here)."""
        now = time.monotonic()
        if self.parent is None or now - self._directory_asked_at < DIRECTORY_ASK_INTERVAL_S:
            return
        self._directory_asked_at = now
        self.send(self.parent, DirectoryWanted(why))

    def on_DirectoryWanted(self, message: DirectoryWanted, sender) -> None:
        self.want_directory(message.why)

    def on_StopIntake(self, message, sender) -> None:
        """Drain: take no new work from now on (adapters stop polling, sessions start no new turn)."""
        self.intake_stopped = True

    def fault(self, fault: Fault) -> None:
        if not self.debug_enabled():
            self.log.warning("%s: fault injection refused (enable [debug] fault_injection)", self.name)
            return
        if fault.action == "hang":
            time.sleep(fault.seconds)  # deliberately blocks the mailbox: this is what the watchdog must catch
        elif fault.action == "crash":
            raise RuntimeError("injected crash")
        elif fault.action == "exit":
            os._exit(3)
        elif fault.action == "loop_exit" and self.bridge is not None:
            self.bridge.call(sys.exit, "injected: the loop exits")   # what a plugin's sys.exit() on the loop did
        elif fault.action == "loop_hang" and self.bridge is not None:
            self.bridge.call(time.sleep, fault.seconds)   # blocks the loop, not the mailbox


def crash_reason(exc: BaseException) -> tuple[str, bool]:
    """What a crash is reported as, and whether its cause lies outside the gateway (storage unavailable: a full
    disk, a lock held from outside), which supervisors wait out instead of counting (supervision/spec.py)."""
    return f"{type(exc).__name__}: {exc}", isinstance(exc, StorageUnavailable)
