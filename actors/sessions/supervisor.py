"""The session supervisor: routes session keys to Session actors and forks their stream consumers.

State: the live sessions (children named ``session:<key>``) and the last activity of each (for the LRU cap), the
keys waiting for a free slot, and which session asked for which consumer.

Admission ([sessions] max_live): at most that many Session processes live at once. A chat whose session is not
live when every slot is taken waits, in arrival order; its rows are durable in the inbox, so waiting costs nothing
but time. For each waiting chat one least recently active session is asked to passivate (an idle one stops at once,
a busy one after its turn), and each slot that frees goes to the chat that waited longest. A burst of new chats
therefore runs max_live at a time instead of forking a process per chat at once.

Messages it takes:
  InboxDoorbell(key)     ring the session, spawning it if passivated and a slot is free, else the key waits (the
                         inbox is the truth: a doorbell only says "look"). Sent by adapters.
  SpawnConsumer          fork a StreamConsumer for a session's reply; answer ConsumerReady once it is up
  ChildActorExited       (through the supervisor behaviour) a session that stopped cleanly frees its slot for the
                         longest-waiting chat, and is re-spawned (or waits) if rows are still in its inbox: a
                         doorbell that reached a stopping session is never lost.
                         A consumer that died is reported to its session (ConsumerGone).
  timer idle_scan        passivate sessions idle for longer than [sessions] idle_s
Messages it sends: Started / InboxDoorbell / Passivate to sessions, ConsumerReady / ConsumerGone to sessions.

At start it re-spawns every session that has inbox rows waiting or an interrupted turn: after a crash of the
daemon (or of this supervisor, which takes its children with it) nothing waits for a doorbell that will not come.
Sessions and consumers do not count against this supervisor's restart intensity (one bad conversation must not
take down every other); each session has its own limit instead.
"""
from __future__ import annotations

import heapq
import time

from thespian.actors import ActorExitRequest

from actors.messages import ConsumerGone, ConsumerReady, InboxDoorbell, Passivate, SpawnConsumer
from actors.storage_access import transient_call
from storage import StorageUnavailable
from supervision.logging_setup import key_hash
from supervision.spec import ChildSpec, Restart, flags_from_config
from supervision.supervisor import ChildState, Supervisor

SESSION_ACTOR = "actors.sessions.session.Session"
CONSUMER_ACTOR = "actors.sessions.stream_consumer.StreamConsumer"
SESSION_PREFIX, CONSUMER_PREFIX = "session:", "consumer:"


def session_child_name(key: str) -> str:
    return SESSION_PREFIX + key


class SessionSupervisor(Supervisor):
    def __init__(self):
        super().__init__()
        self.last_active: dict[str, float] = {}
        self.consumer_owner: dict[str, object] = {}   # consumer child name -> the session that asked
        self.passivating: set[str] = set()   # keys asked to passivate (a busy session stops once idle)
        self.waiting: dict[str, None] = {}   # keys with work but no free slot, oldest first ([sessions] max_live)

    def flags(self, args):
        return flags_from_config(self.config)

    def on_start(self, args) -> None:
        super().on_start(args)
        cfg = self.config.get("sessions", {})
        self.idle_s = cfg.get("idle_s", 600.0)
        self.max_live = cfg.get("max_live", 200)
        for key in transient_call(self.config, _keys_with_work):
            self._ensure_session(key)
        self.after(min(self.idle_s, 30.0), "idle_scan")

    # ---------------------------------------------------------------------------------------------- routing
    def on_InboxDoorbell(self, message: InboxDoorbell, sender) -> None:
        child = self._ensure_session(message.session_key)
        if child is not None and child.address is not None:
            self.send(child.address, message)

    def _ensure_session(self, key: str) -> ChildState | None:
        """The key's session, started if it is not live; None if every slot is taken: the key then waits its turn
        (its rows are durable in the inbox, and the session reads them all when it starts)."""
        name = session_child_name(key)
        child = self.children.get(name)
        if child is not None and not (child.address is None and child.status == "stopped"):
            self.last_active[key] = time.time()
            return child
        if self._live_count() >= self.max_live:
            if key not in self.waiting:
                self.waiting[key] = None
                if len(self.waiting) in (1, 100, 1000) or len(self.waiting) % 10_000 == 0:
                    self.log.warning("%s: %d chat(s) wait for a free session slot ([sessions] max_live = %d)",
                                     self.name, len(self.waiting), self.max_live)
            self._make_room()
            return None
        self.waiting.pop(key, None)
        self.last_active[key] = time.time()
        return self.start_child(ChildSpec(name, SESSION_ACTOR, kind="Session", args={"session_key": key},
                                          restart=Restart.TRANSIENT, shutdown_timeout_s=5.0))

    def _live_count(self) -> int:
        return sum(1 for name in self.children if name.startswith(SESSION_PREFIX))

    def _make_room(self) -> None:
        """Ask as many of the least recently active sessions to passivate as there are chats waiting for a slot,
        each once: an idle one stops now, a busy one when its work is done, and its slot goes to the next chat.
        (Asking again on every doorbell made a burst quadratic: hundreds of Passivates per new chat.)"""
        live = [k for k in self.last_active if self.children.get(session_child_name(k)) is not None]
        asked = self.passivating.intersection(live)
        wanted = min(len(self.waiting), len(live)) - len(asked)
        if wanted > 0:
            for key in heapq.nsmallest(wanted, (k for k in live if k not in asked), key=self.last_active.get):
                child = self.children[session_child_name(key)]
                if child.address is not None:
                    self.passivating.add(key)
                    self.send(child.address, Passivate())

    def _admit_waiting(self) -> None:
        """Slots freed: start the chats that waited longest."""
        while self.waiting and self._live_count() < self.max_live and not self._exiting and not self.intake_stopped:
            key = next(iter(self.waiting))
            self._ensure_session(key)
            self.waiting.pop(key, None)
        if self.waiting:
            self._make_room()   # the sessions just started are asked too: no doorbell may come to ask them

    def on_timer_idle_scan(self, _data) -> None:
        cutoff = time.time() - self.idle_s
        for key, seen in list(self.last_active.items()):
            child = self.children.get(session_child_name(key))
            if child is not None and child.address is not None and seen < cutoff:
                self.send(child.address, Passivate())
        self.after(min(self.idle_s, 30.0), "idle_scan")

    # -------------------------------------------------------------------------------------------- consumers
    def on_SpawnConsumer(self, message: SpawnConsumer, sender) -> None:
        name = f"{CONSUMER_PREFIX}{message.turn_id}"
        old = self.children.get(name)
        if old is not None and old.address is not None:
            self.send(sender, ConsumerReady(message.turn_id, old.address))
            return
        owner = self.child_by_address(sender)
        self.consumer_owner[name] = (sender, owner.spec.name if owner is not None else "")
        self.start_child(ChildSpec(name, CONSUMER_ACTOR, kind="StreamConsumer", args=message.args,
                                   restart=Restart.TEMPORARY, shutdown_timeout_s=5.0))

    def on_ChildReady(self, message, sender) -> None:
        super().on_ChildReady(message, sender)
        owner = self.consumer_owner.get(message.name)
        if owner is not None:
            self.send(owner[0], ConsumerReady(message.name[len(CONSUMER_PREFIX):], sender))

    # ------------------------------------------------------------------------------------------- exits
    def within_intensity(self, child: ChildState, now: float) -> bool:
        if not child.spec.name.startswith(SESSION_PREFIX):
            return super().within_intensity(child, now)
        if child.recent.recent(now) >= self._flags.max_restarts:
            self.log.error("a session crashed %d times in %gs; leaving it stopped until its next message",
                           child.recent.recent(now) + 1, self._flags.period_s,
                           extra={"session": key_hash(child.spec.name[len(SESSION_PREFIX):])})
            child.status = "stopped"
            self._forget_session(child)
            self._admit_waiting()
            return False
        return True

    def child_exited(self, child: ChildState, abnormal: bool) -> None:
        name = child.spec.name
        if name.startswith(CONSUMER_PREFIX):
            owner = self.consumer_owner.pop(name, None)
            if owner is not None and self.children.get(owner[1]) is not None:
                self.send(owner[0], ConsumerGone(name[len(CONSUMER_PREFIX):], child.last_exit or "",
                                                 outside_cause=abnormal and child.outside_cause))
            return
        if name.startswith(SESSION_PREFIX):
            self._stop_consumers_of(name)
            self.passivating.discard(name[len(SESSION_PREFIX):])   # a new incarnation has not been asked
        if name.startswith(SESSION_PREFIX) and not abnormal:
            key = name[len(SESSION_PREFIX):]
            self._forget_session(child)
            self._admit_waiting()
            if not self._exiting and not self.intake_stopped and _rows_waiting(self.config, key):
                self._ensure_session(key)  # a doorbell reached it while it was stopping

    def _stop_consumers_of(self, session_name: str) -> None:
        """A session's consumers die with it: its next incarnation replays the turn into a new one."""
        for consumer, (_addr, owner) in list(self.consumer_owner.items()):
            child = self.children.get(consumer)
            if owner == session_name and child is not None and child.address is not None:
                self.consumer_owner.pop(consumer, None)
                self.send(child.address, ActorExitRequest())

    def _forget_session(self, child: ChildState) -> None:
        self.last_active.pop(child.spec.name[len(SESSION_PREFIX):], None)
        self.forget_child(child.spec.name)

    def pending_work(self) -> int:
        return 0


def _rows_waiting(config: dict, key: str) -> bool:
    try:
        return bool(transient_call(config, lambda store: store.inbox.rows_in_state(key)))
    except StorageUnavailable:
        return True   # cannot tell: a session started for nothing finds its inbox empty and stops


async def _keys_with_work(store) -> list[str]:
    keys = set(await store.inbox.sessions_with_pending())
    for state in await store.sessions.pending_resumes():
        info = await store.sessions.get(state.session_id)
        if info is not None:
            keys.add(info.session_key)
    return sorted(keys)
