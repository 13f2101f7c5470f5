"""The base of every gateway actor: a plain class whose handlers are ``on_<MessageType>`` methods.

What every actor gets from here, so that no actor has to remember it:

* ``Started`` from its parent gives it its name, kind, arguments and the configuration; it answers ``ChildReady``
  with its pid, then ``on_start(args)`` runs.
* ``Ping`` is answered with ``Pong`` and ``DescribeTree`` with a ``TreeNode`` (supervisors extend it).
* Let it crash: a handler that raises is logged with its traceback, reported to the parent (``CrashReport``), and
  the actor exits; a crash on ``StorageUnavailable`` (full disk, lock held from outside) is reported as having an
  outside cause, which its supervisor waits out (supervision/spec.py). Its supervisor restarts a fresh instance; no actor lives on with state a failed handler may have
  left half-changed. (Thespian by itself would retry the message once and keep the damaged instance.)
* Timers: ``self.after(seconds, tag, data)`` calls ``on_timer_<tag>(data)`` later, on the actor's thread.
* The async bridge, for actors that set ``uses_bridge = True``: ``ThespianWatch`` is returned from every handler
  (if a single path forgets it, Thespian silently stops watching) and bridge items reach ``on_bridge(item)``.

Lifecycle hooks, in the order they can run: ``on_start(args)`` after Started; ``on_stop()`` when an
``ActorExitRequest`` arrives (best effort: never after a kill -9, so nothing that must survive may rely on it).
"""
from __future__ import annotations

import logging
import os
import time
import traceback
from datetime import timedelta

from thespian.actors import (Actor, ActorExitRequest, ChildActorExited, PoisonMessage, ThespianWatch,
                             WakeupMessage, WatchMessage)

from actors.messages import (ChildReady, ChildStopping, CrashReport, DescribeTree, Fault, Flush, Flushed, Ping, Pong,
                             Started, TreeNode, TreeReply)
from storage import StorageUnavailable
from supervision.logging_setup import tag_actor_process


class GatewayActor(Actor):
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
        self._exiting = False
        self.log = logging.getLogger("gateway." + self.kind)

    # ---------------------------------------------------------------------------------------- overridable hooks
    def on_start(self, args) -> None:
        """After Started: the actor knows its name, parent and configuration."""

    def on_stop(self) -> None:
        """On a graceful ActorExitRequest. Not called after a kill -9."""

    def on_bridge(self, item) -> None:
        """An item posted by this actor's async bridge, on the actor's own thread."""

    def pending_work(self) -> int:
        """How much work this actor holds right now (admin views, drain)."""
        return 0

    def state_name(self) -> str:
        return "running"

    def describe(self) -> TreeNode:
        return TreeNode(kind=self.kind, name=self.name, pid=os.getpid(), address=str(self.myAddress),
                        state=self.state_name(), started_at=self.started_at, pending=self.pending_work(),
                        ref=self.myAddress)

    # ------------------------------------------------------------------------------------------------- helpers
    def after(self, seconds: float, tag: str, data=None) -> None:
        self.wakeupAfter(timedelta(seconds=max(0.0, seconds)), payload=(tag, data))

    def stop_self(self, clean: bool = True) -> None:
        """Exit on our own. A clean stop tells the parent first, so a transient child is not restarted."""
        if self._exiting:
            return
        self._exiting = True
        if clean and self.parent is not None:
            self.send(self.parent, ChildStopping(self.name))
        self.send(self.myAddress, ActorExitRequest())

    def debug_enabled(self) -> bool:
        return bool(self.config.get("debug", {}).get("fault_injection", False))

    # -------------------------------------------------------------------------------------------- the dispatch
    def receiveMessage(self, message, sender):
        try:
            self._dispatch(message, sender)
        except Exception as exc:  # noqa: BLE001 - let it crash, on purpose and in one place
            self._crash(message, exc)
        return ThespianWatch([self.bridge.fileno()]) if self.bridge is not None and not self._exiting else None

    def _dispatch(self, message, sender) -> None:
        if isinstance(message, ActorExitRequest):
            self._exiting = True
            try:
                self.on_stop()
            finally:
                if self.bridge is not None:
                    self.bridge.close()
                    self.bridge = None
            return
        if self._exiting and not isinstance(message, ChildActorExited):
            return
        if isinstance(message, Started):
            self._on_started(message, sender)
        elif isinstance(message, WakeupMessage):
            tag, data = message.payload if isinstance(message.payload, tuple) else (message.payload, None)
            getattr(self, f"on_timer_{tag}")(data)
        elif isinstance(message, WatchMessage):
            if self.bridge is not None:
                for item in self.bridge.drain():
                    self.on_bridge(item)
        elif isinstance(message, Ping):
            self.send(sender, Pong(message.nonce, self.name, os.getpid()))
        elif isinstance(message, DescribeTree):
            self.on_DescribeTree(message, sender)
        elif isinstance(message, Fault):
            self._fault(message)
        elif isinstance(message, PoisonMessage):
            self.log.warning("%s: a message we sent could not be handled: %s", self.name,
                             type(message.poisonMessage).__name__)
        else:
            handler = getattr(self, "on_" + type(message).__name__, None)
            if handler is None:
                self.log.warning("%s: no handler for %s", self.name, type(message).__name__)
                return
            handler(message, sender)

    def _on_started(self, message: Started, sender) -> None:
        self.name, self.kind = message.name, message.kind or self.kind
        self.config = message.config or {}
        self.after_outside_cause = message.after_outside_cause
        self.parent = sender
        self.log = logging.getLogger("gateway." + self.kind)
        tag_actor_process(self.kind, self.name)  # one actor per process: every record of it names this actor
        if self.uses_bridge and self.bridge is None:
            from actors.bridge import AsyncBridge
            self.bridge = AsyncBridge(self.name)
        self.send(sender, ChildReady(self.name, os.getpid()))
        debug = self.config.get("debug", {})
        if debug.get("fault_injection") and debug.get("crash_on_start") == self.name:
            raise RuntimeError(f"{self.name} crashes on start ([debug] crash_on_start)")
        self.on_start(message.args)

    def on_DescribeTree(self, message: DescribeTree, sender) -> None:
        self.send(sender, TreeReply(message.token, self.describe()))

    def on_Flush(self, message: Flush, sender) -> None:
        self.send(sender, Flushed(message.token, self.flush()))

    def on_Directory(self, message, sender) -> None:
        if self.directory is None or message.version >= self.directory.version:
            self.directory = message
            self.on_directory(message)

    def on_directory(self, directory) -> None:
        """The well-known addresses changed (one of them was restarted)."""

    def on_StopIntake(self, message, sender) -> None:
        """Drain: take no new work from now on (adapters stop polling, sessions start no new turn)."""
        self.intake_stopped = True

    def flush(self) -> int:
        """Persist whatever this actor buffers; return how many items it wrote. Drain and shutdown call it."""
        return 0

    def _fault(self, fault: Fault) -> None:
        if not self.debug_enabled():
            self.log.warning("%s: fault injection refused (enable [debug] fault_injection)", self.name)
            return
        if fault.action == "hang":
            time.sleep(fault.seconds)  # deliberately blocks the mailbox: this is what the watchdog must catch
        elif fault.action == "crash":
            raise RuntimeError("injected crash")
        elif fault.action == "exit":
            os._exit(3)

    def _crash(self, message, exc: Exception) -> None:
        reason = f"{type(exc).__name__}: {exc}"
        outside = isinstance(exc, StorageUnavailable)
        if outside:   # not a bug: the traceback says nothing the reason does not
            self.log.warning("%s stops on %s: %s", self.name, type(message).__name__, reason)
        else:
            self.log.error("%s crashed on %s: %s\n%s", self.name, type(message).__name__, reason,
                           traceback.format_exc())
        if self.parent is not None:
            self.send(self.parent, CrashReport(self.name, reason[:500], outside_cause=outside))
        if self.bridge is not None:
            self.bridge.close()
            self.bridge = None
        self._exiting = True
        self.send(self.myAddress, ActorExitRequest())
