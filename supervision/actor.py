"""The process actor: one Thespian actor, one OS process, written on ``Behaviour`` (supervision/behaviour.py).

What it adds to the behaviour every actor and cell shares:

* ``Started`` is answered with ``ChildReady`` (with the pid) before ``on_start`` runs, and the process's log
  records are tagged with the actor's name (one actor per process).
* Let it crash: a handler that raises is logged with its traceback, reported to the parent (``CrashReport``), and
  the actor exits; a crash on ``StorageUnavailable`` is reported as having an outside cause, which its supervisor
  waits out (supervision/spec.py). Its supervisor restarts a fresh instance; no actor lives on with state a failed
  handler may have left half-changed. (Thespian by itself would retry the message once and keep the damaged
  instance.)
* Timers: ``self.after(seconds, tag, data)`` is a Thespian wakeup carrying ``(tag, data)``.
* The async bridge, for actors that set ``uses_bridge = True``: ``ThespianWatch`` is returned from every handler
  (if a single path forgets it, Thespian silently stops watching) and bridge items reach ``on_bridge(item)``.
  Its loop is part of the actor: a loop that dies (``LoopDied``) crashes the actor, and ``Ping`` is answered
  through the loop (a round trip on it), so a loop that is stuck misses the watchdog's pings as a stuck mailbox
  does, and the watchdog has the actor restarted.
* Direct links, for actors that set ``uses_links = True`` (supervision/direct_link.py): ``send`` to another such
  actor of this machine writes to a Unix socket instead of Thespian's TCP, and what arrives on one is handled like
  mail from its sender, in the WatchMessage that announced it (so after_bridge_items and a shard's run of its cells
  follow it as they follow any message).

Hooks, all on the actor's own thread: ``on_start(args)`` after Started; ``on_stop()`` when an
``ActorExitRequest`` arrives (after a crash too; never after a kill -9).
"""
from __future__ import annotations

import dataclasses
import gc
import os
import time
import traceback
from datetime import timedelta

from thespian.actors import (Actor, ActorExitRequest, ActorSystemMessage, ChildActorExited, PoisonMessage,
                             ThespianWatch, WakeupMessage, WatchMessage)

from supervision.messages import ChildReady, ChildStopping, CrashReport, Ping, Pong, Started
from supervision.behaviour import Behaviour, crash_reason
from supervision.bridge import AsyncBridge, LoopDied
from supervision.direct_link import LinkHub
from supervision.stepped_bridge import SteppedBridge
from common.logging_setup import tag_actor_process

LINK_RETRY_S = 0.005
SETTLE_ROUNDS = 16            # loop steps after one message; past them a wakeup of 0 s goes on (mail comes between)
LOOP_TIMER_SLACK_S = 0.001    # a loop timer this close after the wakeup already set waits for that one
_LOOP_POSTED = WatchMessage([])   # what the loop posted, handled as the bridge's drain is


class LoopGone(RuntimeError):
    """The actor's asyncio loop died: nothing serves its connections any more, so the actor crashes."""


@dataclasses.dataclass(frozen=True)
class PingThroughLoop:
    """A Ping on its way through the actor's loop: posted back by the loop itself, so it is answered only while
    the loop runs."""
    ping: Ping
    sender: object


class GatewayActor(Behaviour, Actor):
    uses_links = False
    loop_on_actor_thread = False   # the bridge's loop steps on the actor thread (supervision/stepped_bridge.py)
    links: LinkHub | None = None

    # ------------------------------------------------------------------------------------------------- helpers
    def send(self, address, message) -> None:
        if self.links is not None and not isinstance(message, ActorSystemMessage) and self.links.send(address, message):
            return
        super().send(address, message)

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

    # -------------------------------------------------------------------------------------------- the dispatch
    def receiveMessage(self, message, sender):
        if not GatewayActor._heap_frozen:
            # Once per process, before this actor forks any child (createActor from its first handlers): what the
            # process holds now, inherited or imported, moves out of the collector's sight. A collection in a
            # forked child otherwise writes to the header of every object it inherited and copies those pages:
            # ~1 MiB a process, 8-10 MiB of the idle tree (docs/design.md §4: gc.freeze before forking). Nothing made
            # later is frozen; what was frozen is small and lives as long as the process anyway.
            GatewayActor._heap_frozen = True
            gc.freeze()
        try:
            self._dispatch(message, sender)
            if self.bridge is not None and self.bridge.steps_on_actor_thread and not self._exiting:
                self._settle_loop()
        except Exception as exc:  # noqa: BLE001 - let it crash, on purpose and in one place
            self._crash(message, exc)
        if self._exiting:
            return None
        if self.links is not None and self.links.flush() and not self._link_retry_armed:
            self._link_retry_armed = True   # a busy peer had no room: try again soon (a socket's room is not watched)
            self.after(LINK_RETRY_S, "link_retry")
        watched = [self.bridge.fileno()] if self.bridge is not None else []
        if self.links is not None:
            watched += self.links.fds()
        return ThespianWatch(watched) if watched else None

    _link_retry_armed = False
    _heap_frozen = False   # per process: a class attribute, set on the process's first message
    _loop_timer_due: float | None = None

    def _settle_loop(self) -> None:
        """A loop on this thread (supervision/stepped_bridge.py), after each message: step it, hand what it posted
        to the handlers as a drain of the bridge does (a shard runs its cells after it), and again while that made
        more, at most SETTLE_ROUNDS times; then a Thespian wakeup for its next timer."""
        for _ in range(SETTLE_ROUNDS):
            self.bridge.step()
            if not self.bridge.has_items() or self._exiting:
                break
            self._dispatch(_LOOP_POSTED, None)
        if self._exiting:
            return
        delay = 0.0 if self.bridge.has_work() else self.bridge.next_timer()
        if delay is None:
            return
        due = time.monotonic() + delay
        if self._loop_timer_due is None or due < self._loop_timer_due - LOOP_TIMER_SLACK_S:
            self._loop_timer_due = due
            self.after(delay, "loop_step")

    def on_timer_loop_step(self, _data) -> None:
        self._loop_timer_due = None   # receiveMessage steps the loop after this, and sets the next one

    def on_timer_link_retry(self, _data) -> None:
        self._link_retry_armed = False   # receiveMessage flushes after every message, this one included

    def _dispatch(self, message, sender) -> None:
        if isinstance(message, ActorExitRequest):
            self._exiting = True
            try:
                self.on_stop()
            finally:
                self._close_io()
            return
        if self._exiting and not isinstance(message, ChildActorExited):
            return
        if isinstance(message, WakeupMessage):
            tag, data = message.payload if isinstance(message.payload, tuple) else (message.payload, None)
            self.fire_timer(tag, data)
        elif isinstance(message, WatchMessage):
            if self.links is not None:
                for linked, sender in self.links.readable(message.ready):
                    if self._exiting:
                        break
                    self.handle(linked, sender)
            if self.bridge is not None:
                for item in self.bridge.drain():
                    self.take_bridge_item(item)
            self.after_bridge_items()
        elif isinstance(message, PoisonMessage):
            self.log.warning("%s: a message we sent could not be handled: %s", self.name,
                             type(message.poisonMessage).__name__)
        else:
            self.handle(message, sender)

    def handle(self, message, sender) -> None:
        if isinstance(message, Ping) and self.bridge is not None and not self.bridge.steps_on_actor_thread:
            self.bridge.call(self.bridge.post, PingThroughLoop(message, sender))   # answered when it comes back
            return
        super().handle(message, sender)

    # Items any process actor's loop may hand back, whatever the actor (dispatched as supervision/behaviour.py says).
    def on_loop_PingThroughLoop(self, item: PingThroughLoop) -> None:
        self.send(item.sender, Pong(item.ping.nonce, self.name, os.getpid()))

    def on_loop_LoopDied(self, item: LoopDied) -> None:
        if item.trace:
            self.log.error("%s: its asyncio loop died:\n%s", self.name, item.trace)
        raise LoopGone(f"its asyncio loop died ({item.reason})")

    def describe(self):
        node = super().describe()
        if self.links is None:
            return node
        return dataclasses.replace(node, facts=node.facts + (("links", len(self.links.by_peer)),))

    def _close_io(self) -> None:
        if self.bridge is not None:
            self.bridge.close()
            self.bridge = None
        if self.links is not None:
            self.links.close()
            self.links = None

    def after_bridge_items(self) -> None:
        """After each drain of the bridge, once its items have all gone through ``on_bridge``, on the actor's own
        thread: the place to send what they produced in one go (supervision/batching.py)."""

    def take_started(self, message: Started, sender) -> None:
        super().take_started(message, sender)
        tag_actor_process(self.kind, self.name)  # one actor per process: every record of it names this actor
        if self.uses_bridge and self.bridge is None:
            self.bridge = (SteppedBridge if self.loop_on_actor_thread else AsyncBridge)(self.name)
        if self.uses_links and self.links is None:
            self.links = LinkHub(self.myAddress, self.name)
        self.send(sender, ChildReady(self.name, os.getpid()))

    def _crash(self, message, exc: Exception) -> None:
        reason, outside = crash_reason(exc)
        if outside:   # not a bug: the traceback says nothing the reason does not
            self.log.warning("%s stops on %s: %s", self.name, type(message).__name__, reason)
        else:
            self.log.error("%s crashed on %s: %s\n%s", self.name, type(message).__name__, reason,
                           traceback.format_exc())
        if self.parent is not None:
            self.send(self.parent, CrashReport(self.name, reason[:500], outside_cause=outside))
        self._close_io()
        self._exiting = True
        self.send(self.myAddress, ActorExitRequest())
