"""The session shard: one process that hosts thousands of Session and StreamConsumer cells on its event loop.

Every Session and every StreamConsumer stays its own actor (docs/design.md §1): its own mailbox, state and child spec,
one message at a time, let it crash and be restarted fresh. They are cells (supervision/cell.py) run by this shard's
``CellHost`` on the shard's own thread; their async work (agent streams, storage) runs on the shard's loop.

State: the cells (through the host); per live session its last activity (for passivation), the keys waiting for a
free slot and the sessions asked to passivate (admission); which session asked for which consumer; which consumer
sent each platform operation still unanswered; one storage connection shared by every cell (one inline SQLite
connection per shard, storage/inline.py: its transactions are serialised because every cell's handler runs on this
one thread, and run on it without a thread hop; the handlers of one run of the cells are one transaction, each a
part that fails alone, and what they send out of the shard leaves after its commit: cell_host.py).

Admission ([sessions] max_live, per shard): at most that many session cells live at once. A chat whose session is
not live when every slot is taken waits, in arrival order; its rows are durable in the inbox, so waiting costs only
time. For each waiting chat one least recently active session is asked to passivate, and each slot that frees goes
to the chat that waited longest.

Messages it takes:
  Started            open storage, start a session cell for every key of this shard with inbox rows or an
                     interrupted turn (after a kill -9 of this shard nothing waits for a doorbell that will not come)
  InboxDoorbell      ring the key's session cell, starting it if passivated and a slot is free (an internal one,
                     for a scheduled run, does not count as the chat's activity)
  StoreInbound       rows an adapter on another host committed for keys of this shard (docs/distribution.md):
                     committed in this shard's own inbox (deduplicated), their sessions rung, InboundStored answered
                     once the commit is done, so the adapter's host keeps each row until this one has it
  OpResult           an adapter's answer: to the consumer cell that sent the operation
  StoreRead          the admin CLI reading this host's database (store_reads.py): answered StoreReadResult
  SessionCommand     an operator's stop or reset (operator_commands.py): to the key's live cell, else done here
  ApprovalAnswer     the operator's approve or deny of a tool call: answered in storage with the inbox row that
                     makes the session go on (approval_flow.py), then that row's doorbell
  SessionWanted, SessionHandover, SessionTaken, MovesDone, InboundStored   moving the sessions of keys whose
                     shard changed when a host joined (moves_out.py here as the source, moves_in.py as the
                     destination); a key moving out or held in is not served until its records are in one place
  Directory, StopIntake, Flush   kept or done here, and passed to every cell
  ConfigChanged      a reload: every session cell started from now on starts on it, and the live ones take it
                     for their next turn (a reply in flight keeps what its turn started with: consumers are not told)
                     and this process's MCP servers follow it at once where they run (actors/agents/mcp_hub.py)
  Fault(target=...)  fault injection aimed at one cell (the cell crashes, not the shard)
  timers             cells (the cells' timers and restarts), idle_scan (passivate idle sessions; start those with a
                     tool's question past its deadline), search_index (index what the sessions appended, in one
                     transaction: storage/search_index.py); on a host sharing the database (partitions.py),
                     partitions (lease its partitions: sessions of one lost stopped, of one gained started) and
                     waiting (ring the keys it serves with rows another host's adapter committed)
From its cells, as their supervisor: SpawnConsumer (start a consumer cell; answer ConsumerReady at once: the
consumer's Started is its first message, so nothing sent to it can overtake it); ModelOutcome (how a turn's model
service did: kept in memory for the status walk, model_health.py; a shard started again knows nothing until its next
turn); InboxDoorbell and TaskStop for a background task's session, which lives on its chat's shard (rung, or
stopped, as above: actors/sessions/tasks.py).
Messages it sends: InboundStored to adapters, InboxDoorbell / Passivate / ConsumerReady / ConsumerGone to cells,
the moves' messages to other shards, StoreReadResult, and what cells send out (PlatformOp to adapters, as one Batch
per adapter for each run of the cells; metrics facts).

Exits of cells: a consumer that is gone is reported to its session (ConsumerGone), which asks for a new one and
replays the turn; a session that is gone takes its consumers with it; one that stopped cleanly frees its slot and is
started again if rows came in meanwhile. Sessions are transient with their own restart intensity, consumers
temporary (cell_host.py). What survives kill -9 of the shard: everything durable (inbox, transcript, runtime state,
ledger); the SessionSupervisor starts the shard again and Started above re-creates the sessions that had work.
"""
from __future__ import annotations

import dataclasses
import heapq
import time

from actors.agents.mcp_hub import apply_reload as apply_mcp_reload, process_summary as mcp_summary
from actors.messages import (ApprovalAnswer, ConsumerGone, ConsumerReady, InboundStored, InboxDoorbell, ModelOutcome,
                             MovesDone,
                             OpResult, Passivate, PlatformOp, RunCells, SessionHandover, SessionTaken, SessionWanted,
                             SessionArgs, SessionCommand, ShardArgs, SpawnConsumer, StoreInbound, StoreRead, TaskStop)
from actors.sessions.model_health import ModelHealth
from actors.sessions.moves_in import MovesIn
from actors.sessions.moves_out import MovesOut
from actors.sessions.partitions import SharedPartitions
from actors.sessions import approval_flow, operator_commands, store_reads
from actors.sessions.store_reads import keys_with_work
from supervision.messages import ActorRestarted, ConfigChanged, DirectoryWanted, Fault, Ping, StopIntake
from common.cluster import host_name, runs_here
from common.host_map import place_named, place_of
from common.shard_map import shard_name
from supervision.batching import Outbox
from supervision.storage_access import InlineStoreUser
from supervision.actor import GatewayActor
from supervision.cell_host import CellHost
from common.logging_setup import key_hash
from supervision.loop_monitor import LoopMonitor
from supervision.spec import ChildSpec, Restart, flags_from_config
from common.config import setting
from storage import StorageError, search_index

SESSION_ACTOR = "actors.sessions.session.Session"
CONSUMER_ACTOR = "actors.sessions.stream_consumer.StreamConsumer"
SESSION_PREFIX, CONSUMER_PREFIX = "session:", "consumer:"
# Metrics facts of the cells (a TurnFinished per turn) go out together this often: a Thespian message per turn to
# the metrics actor costs both processes more than the rest of the fact, and a scrape comes every few seconds.
FACTS_INTERVAL_S = 0.5
WAITING_SCAN_S = 0.25   # hosts sharing the database: how often a shard looks for rows other hosts committed
MOVES_TICK_S = 2.0   # while sessions move: unanswered handovers and asks go again (moves_out.py, moves_in.py)


def session_cell_name(key: str) -> str:
    return SESSION_PREFIX + key


class SessionShard(InlineStoreUser, GatewayActor):
    uses_bridge = True
    uses_links = True   # its adapters' doorbells and results, its operations to them (supervision/direct_link.py)
    loop_on_actor_thread = True   # its cells' agent streams step on the thread that runs them (stepped_bridge.py)
    # Placed by host in a convention (ChildSpec.placement); without a placement, on the leader.
    actorSystemCapabilityCheck = staticmethod(runs_here)

    def __init__(self):
        super().__init__()
        self.cells: CellHost | None = None
        self.index, self.count = 0, 1
        self.last_active: dict[str, float] = {}
        self.waiting: dict[str, None] = {}       # keys with work but no free slot, oldest first
        self.passivating: set[str] = set()       # keys asked to passivate (a busy session stops once idle)
        self.consumer_owner: dict[str, str] = {}  # consumer cell name -> the session cell that asked for it
        self.op_routes: dict[str, str] = {}      # op_id of an operation not yet answered -> the consumer cell
        self.ops_out = Outbox()          # the operations cells sent in this run, per adapter
        self.facts_out = Outbox()        # the metrics facts cells sent since the last FACTS_INTERVAL_S
        self.moves_armed = False         # a "moves" timer is set (while keys move out or are held in)
        self.index_waits = 0             # search index catch-ups in a row that storage refused (a full disk)
        self.moves_out: MovesOut | None = None   # keys another shard wins now, moving there (moves_out.py)
        self.partitions: SharedPartitions | None = None   # hosts sharing the database: what it leases
        self.moves_in: MovesIn | None = None     # keys won here whose records may be elsewhere (moves_in.py)
        self.model_health = ModelHealth()        # how its sessions' model services did (model_health.py)

    # ------------------------------------------------------------------------------------------------- start
    def on_start(self, args: ShardArgs) -> None:
        self.index, self.count = args.index, args.count
        self.idle_s = setting(self.config, "sessions", "idle_s")
        self.max_live = setting(self.config, "sessions", "max_live")
        self.open_store()
        self.loop_monitor = LoopMonitor(self.bridge.loop)
        # Cells reach only cells of their own process, so the shard's name tells hosts apart.
        self.cells = CellHost(self.name, send_out=self._send_out,
                              arm=lambda seconds, token: self.after(seconds, "cells", token), on_parent=self._from_cell,
                              on_exit=self._cell_exited, flags=flags_from_config(self.config), bridge=self.bridge,
                              config=self.config, atomic=self.store.atomic)
        self.cells.store, self.cells.run_store, self.cells.directory = self.store, self.db, self.directory
        # Every shard of the convention when this one was started (common/host_map.py): the keys it wins are its.
        places = [place_named(n) for n in args.places or [shard_name(i) for i in range(self.count)]]
        me = place_named(self.name)
        self.moves_out = MovesOut(me, self.db, self.store, self.send, self.log)
        self.moves_in = MovesIn(me, self.db, self.store, self.send, self.log)
        self.moves_in.on_map(places, {})
        self.moves_out.start_on(places)   # what it wins; the keys it holds and does not are looked over below
        self.partitions = SharedPartitions(self.config, self.name, self.store, self.db, self.log) \
            if setting(self.config, "cluster", "shared") else None
        if self.partitions is not None:   # hosts sharing the database: the keys of the partitions it leases
            self.store.fence_with(self.partitions.fences)
            self.on_timer_partitions(None)
            self.on_timer_waiting(None)
        for key in self.db(keys_with_work(self.store)) if self.partitions is None else ():
            if place_of(key, places).child_name == self.name:
                self._ensure_session(key)
        if self.directory is not None:
            self.on_directory(self.directory)
        self.after(min(self.idle_s, 30.0), "idle_scan")
        self.after(search_index.CATCH_UP_S, "search_index")

    def on_stop(self) -> None:
        self.facts_out.flush(self.send)
        if self.cells is not None:
            self.cells.stop_all()
        if self.partitions is not None:
            self.partitions.release_all()   # the other hosts take them now, not after the lease time
        self.close_store()

    # ------------------------------------------------------------------ hosts sharing the database
    def on_timer_partitions(self, _data) -> None:
        """Renew, take and release partition leases (partitions.py): the sessions of a partition lost are stopped
        (their writes would be refused now: another host runs them), those of a partition gained with work are
        started (an interrupted turn resumes)."""
        self.after(self.partitions.tick_s, "partitions")
        gained, lost = self.partitions.tick()
        for key in self.partitions.keys_in(lost, self._live_keys()):
            self.cells.stop(session_cell_name(key), "its partition went to another host")
            self.last_active.pop(key, None)
            self.waiting.pop(key, None)
        for key in self.partitions.keys_in(gained, self.db(keys_with_work(self.store)) if gained else ()):
            self._ensure_session(key)

    def on_timer_waiting(self, _data) -> None:
        """Rows another host's adapter committed for keys of this shard's partitions: their sessions rung."""
        self.after(WAITING_SCAN_S, "waiting")
        for key, seq in self.partitions.waiting_keys():
            self.on_InboxDoorbell(InboxDoorbell(key, seq), None)

    # ------------------------------------------------------------------------------------ running the cells
    def _dispatch(self, message, sender) -> None:
        super()._dispatch(message, sender)
        more = self.cells is not None and not self._exiting and self.cells.run()
        self.ops_out.flush(self.send)   # one Thespian message per adapter for what this run's cells sent it
        if more:
            self.send(self.myAddress, RunCells())   # more mail: let Thespian transmit what was sent, then go on

    def on_RunCells(self, message, sender) -> None:
        """Nothing to do here: _dispatch runs the cells after every message."""

    def on_timer_cells(self, token) -> None:
        self.cells.fire_due(token)

    def on_bridge(self, item) -> None:
        self.cells.post(item)

    def _send_out(self, address, message, cell) -> None:
        if isinstance(message, PlatformOp):
            self.op_routes[message.op_id] = cell.myAddress.name
            self.ops_out.put(address, message)
            return
        if self.directory is not None and address == getattr(self.directory, "metrics", None):
            if not self.facts_out:
                self.after(FACTS_INTERVAL_S, "facts")
            self.facts_out.put(address, message)
            return
        self.send(address, message)

    def on_timer_facts(self, _data) -> None:
        self.facts_out.flush(self.send)

    def _from_cell(self, message, sender) -> None:
        if isinstance(message, SpawnConsumer):
            self._spawn_consumer(message, sender)
        elif isinstance(message, DirectoryWanted):
            self.want_directory(message.why)   # rate-limited here: a thousand waiting cells are one question
        elif isinstance(message, ModelOutcome):
            self.model_health.record(message)
        elif isinstance(message, InboxDoorbell):   # a chat's /bg rings its task's session (on this shard)
            self.on_InboxDoorbell(message, sender)
        elif isinstance(message, TaskStop):        # a chat's /cancel N: to its task's session, if it is live
            self.cells.deliver(session_cell_name(message.session_key), message)

    # ------------------------------------------------------------------------------------------------ routing
    def on_InboxDoorbell(self, message: InboxDoorbell, sender) -> None:
        state = self._ensure_session(message.session_key, internal=message.internal)
        if state is not None:
            self.cells.deliver(state.spec.name, message)

    def on_StoreInbound(self, message: StoreInbound, sender) -> None:
        # Rows of a key another shard wins now (the sender's map was older) are not taken: left out of the
        # answer, they stay received on the sender's host, whose walk sends them to that shard.
        rows = [row for row in message.rows if self.moves_out is None or self.moves_out.wins(row[1])]
        latest = self.db(store_reads.store_forwarded(self.store, rows))
        self.send(sender, InboundStored(tuple(seq for seq, *_rest in rows), self.name))
        for key, seq in latest.items():
            self.on_InboxDoorbell(InboxDoorbell(key, seq), sender)

    def on_OpResult(self, message: OpResult, sender) -> None:
        name = self.op_routes.pop(message.op_id, None)
        if name is not None:
            self.cells.deliver(name, message, sender)

    def on_directory(self, directory) -> None:
        if self.cells is not None:
            self.cells.directory = directory
            self.cells.broadcast(directory)
        if self.moves_out is not None and directory.shards and self.partitions is None:   # shared: no moves
            places, addresses = [place_named(n) for n, _a in directory.shards], dict(directory.shards)
            self.moves_in.on_map(places, addresses)
            self.moves_out.plan(places, addresses, self._live_keys(), self._is_live, self._passivate)
            self._arm_moves()

    # ------------------------------------------------------------------------------------- moving sessions
    def _live_keys(self) -> list[str]:
        return [n[len(SESSION_PREFIX):] for n in self.cells.cells if n.startswith(SESSION_PREFIX)]

    def _is_live(self, key: str) -> bool:
        return session_cell_name(key) in self.cells.cells

    def _passivate(self, key: str) -> bool:
        return self.cells.deliver(session_cell_name(key), Passivate())

    def _arm_moves(self) -> None:
        if (self.moves_out.moving or self.moves_in.held) and not self.moves_armed:
            self.moves_armed = True
            self.after(MOVES_TICK_S, "moves")

    def on_timer_moves(self, _data) -> None:
        self.moves_armed = False
        self.moves_out.tick(self._is_live, self._passivate)
        self.moves_in.ask_again()
        self._arm_moves()

    def on_SessionWanted(self, message: SessionWanted, sender) -> None:
        self.moves_out.wanted(message, sender, self._is_live, self._passivate)
        self._arm_moves()

    def on_SessionHandover(self, message: SessionHandover, sender) -> None:
        if self.moves_in.handover(message, sender):
            self._start_if_waiting(message.key)

    def on_SessionTaken(self, message: SessionTaken, sender) -> None:
        self.moves_out.taken(message.key, message.refused)
        self.moves_out.refill(self._is_live, self._passivate)

    def on_MovesDone(self, message: MovesDone, sender) -> None:
        for key in self.moves_in.moves_done(message):
            self._start_if_waiting(key)

    def on_StoreRead(self, message: StoreRead, sender) -> None:
        self.send(sender, store_reads.answer(message, self.db, self.store, self.name))

    def on_SessionCommand(self, message: SessionCommand, sender) -> None:
        self.log.info("%s: session %s %s by %s", self.name, key_hash(message.session_key), message.action[:40],
                      message.by)
        operator_commands.at_shard(self, message, session_cell_name(message.session_key), sender)

    def on_ApprovalAnswer(self, message: ApprovalAnswer, sender) -> None:
        """The operator's approve or deny of a tool call (docs/approvals.md): answered here, the session rung."""
        self.log.info("%s: session %s: tool approval %s by %s", self.name, key_hash(message.session_key),
                      message.action[:40], message.by)
        done, seq = approval_flow.operator_answer(self, message)
        self.send(sender, done)
        if seq is not None:
            self.on_InboxDoorbell(InboxDoorbell(message.session_key, seq), sender)

    def on_InboundStored(self, message: InboundStored, sender) -> None:
        """Rows of a moving key without a session, stored by the shard that wins it now."""
        self.moves_out.mark_stored(message.seqs, message.shard)

    def _start_if_waiting(self, key: str) -> None:
        """A key freed to start here: its session starts if rows wait for it or the records came with a turn to
        resume (moved while a crash had cut it)."""
        info = self.db(self.store.sessions.current(key))
        resume = info is not None and self.db(self.store.sessions.runtime(info.session_id)).resume_pending
        if resume or self._rows_waiting(key):
            self._ensure_session(key)

    def on_config_changed(self, old: dict) -> None:
        apply_mcp_reload(self.config)   # this process's MCP servers follow the reload now, not at the next new chat
        if self.cells is not None:
            self.cells.config = self.config
            for name in [n for n in self.cells.cells if n.startswith(SESSION_PREFIX)]:
                self.cells.deliver(name, ConfigChanged(self.config))

    def on_StopIntake(self, message, sender) -> None:
        super().on_StopIntake(message, sender)
        if self.cells is not None:
            self.cells.broadcast(StopIntake())

    def flush(self) -> int:
        return self.cells.flush_all() if self.cells is not None else 0

    def fault(self, fault: Fault) -> None:
        if fault.target and self.cells is not None:
            if self.debug_enabled() and not self.cells.deliver(fault.target, fault):
                self.log.warning("%s: no cell %s to inject a fault into", self.name, fault.target)
            elif not self.debug_enabled():
                super().fault(fault)   # refused, and says so
            return
        super().fault(fault)

    def _ensure_session(self, key: str, internal: bool = False):
        """The key's session cell, started if it is not live; None if every slot is taken: the key then waits its
        turn (its rows are durable in the inbox, and the session reads them all when it starts). ``internal``: for
        the gateway's own row (a scheduled run), which is no activity of the chat: a live session's idle clock is
        left as it was, and one started for it counts as idle already, so it passivates once its turn is done."""
        name = session_cell_name(key)
        state = self.cells.cells.get(name)
        if state is not None:
            if not internal:
                self.last_active[key] = time.time()
            return state
        if self.partitions is not None:
            if not self.partitions.serves(key):
                return None   # another shard's partition (or none's yet): its holder rings it
        elif self.moves_out is not None and (not self.moves_out.wins(key) or key in self.moves_out.moving
                                             or not self.moves_in.admit(key)):
            return None   # another shard wins it now, or its records may be elsewhere yet: its rows wait
        if len(self.last_active) >= self.max_live:
            if key not in self.waiting:
                self.waiting[key] = None
                if len(self.waiting) in (1, 100, 1000) or len(self.waiting) % 10_000 == 0:
                    self.log.warning("%s: %d chat(s) wait for a free session slot ([sessions] max_live = %d)",
                                     self.name, len(self.waiting), self.max_live)
            self._make_room()
            return None
        self.waiting.pop(key, None)
        self.last_active[key] = time.time() - (self.idle_s if internal else 0.0)
        return self.cells.start(ChildSpec(name, SESSION_ACTOR, kind="Session", args=SessionArgs(key),
                                          restart=Restart.TRANSIENT))

    def _make_room(self) -> None:
        """Ask as many of the least recently active sessions to passivate as there are chats waiting, each once:
        an idle one stops now, a busy one when its work is done, and its slot goes to the next chat."""
        live = [k for k in self.last_active if k not in self.passivating]
        wanted = min(len(self.waiting), len(self.last_active)) - len(self.passivating & self.last_active.keys())
        for key in heapq.nsmallest(max(0, wanted), live, key=self.last_active.get):
            if self.cells.deliver(session_cell_name(key), Passivate()):
                self.passivating.add(key)

    def _admit_waiting(self) -> None:
        while self.waiting and len(self.last_active) < self.max_live and not self._exiting \
                and not self.intake_stopped:
            key = next(iter(self.waiting))
            self.waiting.pop(key, None)
            self._ensure_session(key)
        if self.waiting:
            self._make_room()

    def on_timer_idle_scan(self, _data) -> None:
        cutoff = time.time() - self.idle_s
        for key, seen in list(self.last_active.items()):
            if seen < cutoff:
                self.cells.deliver(session_cell_name(key), Passivate())
        # A question past its deadline whose session is not running (passivated, or not started since a restart):
        # its session starts and expires it (actors/sessions/approval_flow.py); one running does so on its own timer.
        for key in self.db(self.store.approvals.sessions_due()):
            self._ensure_session(key, internal=True)
        self.after(min(self.idle_s, 30.0), "idle_scan")

    def on_timer_search_index(self, _data) -> None:
        """A batch of the events appended since the last tick goes into the search index; a backlog (a long outage
        of this timer, an import) goes a short batch per tick, one right after the other. Storage that cannot be written
        now (a full disk) is asked again at the next tick: a search catches up on its own anyway."""
        try:
            taken = self.db(self.store.sessions.index_pending(search_index.TICK_BATCH))
            self.index_waits = 0
        except StorageError as exc:
            self.index_waits += 1
            if self.index_waits % 30 == 1:   # the first, then once a minute: a long full disk is not a log flood
                self.log.warning("%s: the search index waits for storage (%d tries): %s", self.name,
                                 self.index_waits, exc)
            taken = 0
        self.after(0.0 if taken >= search_index.TICK_BATCH else search_index.CATCH_UP_S, "search_index")

    # -------------------------------------------------------------------------------------------- consumers
    def _spawn_consumer(self, message: SpawnConsumer, session) -> None:
        name = f"{CONSUMER_PREFIX}{message.turn_id}"
        address = self.cells.address_of(name)
        if address is None:
            self.consumer_owner[name] = session.name
            address = self.cells.start(ChildSpec(name, CONSUMER_ACTOR, kind="StreamConsumer", args=message.args,
                                                 restart=Restart.TEMPORARY)).cell.myAddress
        self.cells.deliver(session.name, ConsumerReady(message.turn_id, address))

    # ------------------------------------------------------------------------------------------------ exits
    def _cell_exited(self, state, abnormal: bool, restarting: bool) -> None:
        name = state.spec.name
        if restarting:
            self.report(ActorRestarted(state.spec.kind_name, state.last_exit or ""))
        if name.startswith(CONSUMER_PREFIX):
            for op_id in [op for op, cell in self.op_routes.items() if cell == name]:
                del self.op_routes[op_id]
            owner = self.consumer_owner.pop(name, None)
            if owner is not None:
                self.cells.deliver(owner, ConsumerGone(name[len(CONSUMER_PREFIX):], state.last_exit or "",
                                                       outside_cause=abnormal and state.outside_cause))
            return
        key = name[len(SESSION_PREFIX):]
        for consumer, owner in list(self.consumer_owner.items()):
            if owner == name:   # a session's consumers die with it: its next incarnation replays the turn
                self.consumer_owner.pop(consumer, None)
                self.cells.stop(consumer, "its session stopped")
        self.passivating.discard(key)
        if restarting:
            return
        self.last_active.pop(key, None)
        if self.moves_out is not None:
            self.moves_out.drained(key, self._passivate)
        if abnormal:
            self.log.error("a session crashed too often; leaving it stopped until its next message",
                           extra={"session": key_hash(key)})
        self._admit_waiting()
        if not abnormal and not self._exiting and not self.intake_stopped and self._rows_waiting(key):
            self._ensure_session(key)   # a doorbell reached it while it was stopping

    def _rows_waiting(self, key: str) -> bool:
        return bool(self.db(self.store.inbox.rows_in_state(key)))

    # --------------------------------------------------------------------------------------------- views
    def describe(self):
        node = super().describe()
        if self.cells is None:
            return node
        sessions = len(self.last_active)
        facts = (("sessions", sessions), ("consumers", len(self.consumer_owner)), ("waiting", len(self.waiting)),
                 ("loop_lag_ms", round(self.loop_monitor.take_max(), 1))) + self.moves_out.facts() + \
            self.moves_in.facts()
        if self.model_health.rows:
            facts += (("models", self.model_health.as_fact()),)   # the root merges every shard's (model_health.py)
        if setting(self.config, "cluster", "enabled"):
            facts += (("host", host_name(self.config)),)   # which host of the convention runs it
        if mcp := mcp_summary(self.config):
            facts += (("mcp", mcp),)                        # this shard's MCP servers and tools (docs/mcp.md)
        return dataclasses.replace(node, children=self.cells.nodes(), facts=facts + node.facts)

    def handle(self, message, sender) -> None:
        if isinstance(message, Ping) and self.cells is not None and self.loop_monitor.stuck(
                setting(self.config, "watchdog", "ping_deadline_s"), self.log, self.name):
            return   # unanswered: the watchdog restarts a shard whose loop is stuck (its sessions recover)
        super().handle(message, sender)

    def pending_work(self) -> int:
        return 0     # the work is the cells': each reports its own
