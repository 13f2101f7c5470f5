"""The cell host: mailboxes, timers and supervision for the cells of one process actor (a session shard).

Owned by the process actor that hosts the cells, and called only from that actor's own thread (docs/design.md §4): the
actor hands it what arrives for a cell (``deliver``), runs the mailboxes (``run``) before its handler returns, and
fires due timers when one of its Thespian wakeups comes (``fire_due``). Collaborators are passed in, so the host
runs without Thespian in a unit test: ``send_out(address, message, cell)`` for everything not addressed to a cell of
this host, ``arm(seconds, token)`` for a wakeup that hands ``token`` back to ``fire_due``, ``on_parent(message,
sender)`` for what cells send their parent (the host actor, as their supervisor), ``on_exit(state, abnormal,
restarting)`` after a cell is gone, ``atomic()`` for the scope each handler runs in (its storage calls commit
together: storage/inline.py).

A handler is atomic, and the handlers of one run are one transaction (a group, at most GROUP_HANDLERS handlers or
GROUP_S long): each handler is a part of it (storage/inline.py, ``part``) that fails alone. A handler that raises
crashes its cell with nothing of it written or sent, as if it had never run. What a handler that returned sent to a
cell of this host is delivered then (that cell's handler joins the same transaction); what it sent out of the host
leaves only once the group has committed. If the commit fails, nothing of the group was written: every cell that ran
in it, or got mail from one that did, crashes and restarts from what storage holds, and nothing the group sent
leaves. So every message that leaves the host is backed by what was committed before it, and kill -9 anywhere leaves
either a whole group or none of it (a group is about one commit where a turn's steps used to cost one each).

State: per cell (``CellState``) its child spec, instance and incarnation, its mailbox, status, start time, restart
count, last exit and recent restarts; the run queue (cells with mail, in the order mail arrived); the timers
(cell_timers.py).

Supervision is the OTP behaviour applied to cells, from their child specs (supervision/spec.py): a cell that crashes
(a handler raised) is logged with its traceback, its ``on_stop`` runs, and its restart type decides: transient and
permanent cells are started again fresh after a backoff, temporary ones are not. Each cell has its own intensity:
past ``max_restarts`` within ``period_s`` it is left stopped (``on_exit`` says so), and one bad conversation never
takes its host down. A crash on unavailable storage is an outside cause: retried at the longest backoff, uncounted.

What survives kill -9: nothing here. Mailboxes and timers are memory; every cell's durable state is in storage, and
the host's own supervisor re-creates the cells with work when it restarts the host.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import importlib
import logging
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from supervision.messages import Started, TreeNode
from supervision.behaviour import crash_reason
from supervision.cell import BridgeItem, Cell, CellAddress, CellBridge
from supervision.cell_timers import CellTimers
from common.logging_setup import acting_as
from supervision.spec import (ChildSpec, ChildStatus, Intensity, SupervisorFlags, backoff_delay, should_restart,
                              wait_out_delay)

RUN_BUDGET = 2000      # messages handled per run before the host actor lets Thespian transmit what was sent
# One transaction holds SQLite's write lock, which the adapters' inbox writes wait for: a group is kept short.
GROUP_HANDLERS = 64
GROUP_S = 0.05
SLOW_HANDLER_S = 0.5   # a handler that runs longer holds up every cell of the host: logged

log = logging.getLogger("gateway.cells")


@dataclass(frozen=True)
class CellTimer:
    tag: str
    data: Any = None


@dataclass
class BridgeRun:
    """Bridge items for one cell that arrived one after another, handled in one go (in order, as one handler: an
    agent streams dozens of deltas a turn, and each would otherwise be a handler run and a commit of its own)."""
    items: list


@dataclass
class Group:
    """The handlers of one transaction: its scope, what they sent out of the host (held until it commits) and the
    cells it touched (ran a handler in it, or got mail from one that did)."""
    scope: Any = None
    out: list = field(default_factory=list)
    touched: set = field(default_factory=set)
    handled: int = 0


@dataclass
class CellState:
    spec: ChildSpec
    cell: Optional[Cell] = None
    epoch: int = 0
    mailbox: collections.deque = field(default_factory=collections.deque)
    status: ChildStatus = ChildStatus.STARTING   # RUNNING once made; RESTARTING | STOPPED after it exits
    started_at: float = 0.0
    restarts: int = 0
    last_exit: Optional[str] = None
    stop_requested: bool = False
    clean_stop: bool = False
    outside_cause: bool = False   # its last crash was on unavailable storage
    recent: Optional[Intensity] = None


class CellHost:
    def __init__(self, host_id: str, *, send_out: Callable, arm: Callable[[float], None], on_parent: Callable,
                 on_exit: Callable = lambda state, abnormal, restarting: None,
                 flags: SupervisorFlags = SupervisorFlags(), bridge=None, config: Optional[dict] = None,
                 atomic: Callable = contextlib.nullcontext):
        self.id = host_id
        self.parent_address = CellAddress(host_id, "", 0)
        self._send_out, self._on_parent, self._on_exit = send_out, on_parent, on_exit
        self.flags, self.bridge, self.config = flags, bridge, config or {}
        self._atomic = atomic
        self._held: Optional[list] = None   # what the running handler sent, until it returns
        self._group: Optional[Group] = None  # the open transaction of this run's handlers
        self.store = None          # the host's storage connection, shared by its cells (set by the host actor) ...
        self.run_store = None      # ... and how a cell runs a call on it: run_store(coroutine) -> its result
        self.directory = None      # the latest Directory, handed to every cell that starts
        self.cells: dict[str, CellState] = {}
        self._run_queue: collections.deque = collections.deque()
        self._parent_mail: collections.deque = collections.deque()
        self.timers = CellTimers(arm)
        self._classes: dict[str, type] = {}

    # ------------------------------------------------------------------------------------------ life and death
    def start(self, spec: ChildSpec) -> CellState:
        """Start a cell from its spec (or start again the one of that name); its Started is its first message."""
        state = self.cells.get(spec.name)
        if state is None:
            state = self.cells[spec.name] = CellState(spec, recent=Intensity(self.flags.max_restarts,
                                                                             self.flags.period_s))
        elif state.cell is not None:
            return state
        state.spec = spec
        state.epoch += 1
        if self._group is not None:
            self._group.touched.add(spec.name)   # started on what the group wrote: lost with it if it is lost
        cell = self._class(spec.actor)()
        cell.host, cell.myAddress = self, CellAddress(self.id, spec.name, state.epoch)
        if cell.uses_bridge and self.bridge is not None:
            cell.bridge = CellBridge(self.bridge, cell.myAddress)
        state.cell, state.status, state.started_at = cell, ChildStatus.RUNNING, time.time()
        state.stop_requested = state.clean_stop = False
        after_outside_cause, state.outside_cause = state.outside_cause, False
        state.mailbox.clear()
        self._enqueue(state, Started(spec.name, spec.kind_name, spec.args, self.config, after_outside_cause),
                      self.parent_address)
        if self.directory is not None:
            self._enqueue(state, self.directory, self.parent_address)
        return state

    def stopping(self, cell: Cell, clean: bool) -> None:
        """A cell asked to stop (stop_self): it does once its running handler returns."""
        state = self._state_of(cell.myAddress)
        if state is not None:
            state.stop_requested, state.clean_stop = True, clean

    def stop(self, name: str, reason: str = "stopped by its supervisor") -> None:
        """Stop a cell now, from outside (its session stopped, the host stops): never restarted."""
        state = self.cells.get(name)
        if state is not None and state.cell is not None:
            state.clean_stop = True
            self._exit(state, abnormal=False, reason=reason, restart=False)

    def forget(self, name: str) -> None:
        state = self.cells.get(name)
        if state is not None and state.cell is None:
            del self.cells[name]

    def stop_all(self) -> None:
        for name in list(self.cells):
            self.stop(name, "its host stopped")

    # ----------------------------------------------------------------------------------------------- delivery
    def address_of(self, name: str) -> Optional[CellAddress]:
        state = self.cells.get(name)
        return state.cell.myAddress if state is not None and state.cell is not None else None

    def deliver(self, name: str, message, sender=None) -> bool:
        """Mail for the live cell ``name`` (from outside the host); False if there is none."""
        state = self.cells.get(name)
        if state is None or state.cell is None or state.stop_requested:
            return False
        self._enqueue(state, message, sender)
        return True

    def broadcast(self, message, sender=None) -> None:
        for state in self.cells.values():
            if state.cell is not None and not state.stop_requested:
                self._enqueue(state, message, sender)

    def send(self, cell: Cell, address, message) -> None:
        """What a cell sends: to a cell of this host (its mailbox), to its parent, or out through the host actor;
        once the handler sending it has committed."""
        if self._held is not None:
            self._held.append((cell, address, message))
            return
        self._route(cell, address, message)

    def _route(self, cell: Cell, address, message) -> None:
        group = self._group
        if isinstance(address, CellAddress) and address.host == self.id:
            if address.name == "":
                self._parent_mail.append((message, cell.myAddress))
                self._run_queue.append(None)
                return
            state = self.cells.get(address.name)
            if state is not None and state.cell is not None and state.epoch == address.epoch:
                self._enqueue(state, message, cell.myAddress)
                if group is not None:
                    group.touched.add(address.name)
            return   # mail for a cell that is gone is dropped, as Thespian drops mail for a dead actor
        if group is not None:
            group.out.append((cell, address, message))
        else:
            self._send_out(address, message, cell)

    def _enqueue(self, state: CellState, message, sender) -> None:
        if not state.mailbox:
            self._run_queue.append(state.spec.name)
        state.mailbox.append((message, sender))

    def post(self, item) -> None:
        """An item a cell's async work posted (through the host actor's bridge): a BridgeItem, or the outcome of a
        coroutine the cell submitted with a tag (a TaskDone whose tag is the BridgeItem CellBridge made of it)."""
        tag = getattr(item, "tag", None)
        if not isinstance(item, BridgeItem) and isinstance(tag, BridgeItem):
            item = BridgeItem(tag.name, tag.epoch, dataclasses.replace(item, tag=tag.item))
        state = self.cells.get(item.name)
        if state is not None and state.cell is not None and state.epoch == item.epoch:
            if state.mailbox and isinstance(state.mailbox[-1][0], BridgeRun):
                state.mailbox[-1][0].items.append(item.item)   # still unread: it joins the run before it
            else:
                self._enqueue(state, BridgeRun([item.item]), None)

    def flush_all(self) -> int:
        """Drain and shutdown: every live cell persists what it buffers now; how many items are still held."""
        held = 0
        for state in list(self.cells.values()):
            if state.cell is not None:
                held += self._guarded(state, "Flush", state.cell.flush) or 0
        return held

    # ------------------------------------------------------------------------------------------------ running
    def run(self, budget: int = RUN_BUDGET) -> bool:
        """Handle queued mail, one message at a time, in arrival order, in groups of one transaction each; True if
        mail is left (the host actor then lets Thespian transmit what was sent so far and runs again)."""
        while self._run_queue and budget > 0:
            budget = self._run_group(budget)
        return bool(self._run_queue)

    def _run_group(self, budget: int) -> int:
        group = self._group = Group()
        began = time.monotonic()
        scope = contextlib.ExitStack()
        try:
            group.scope = scope.enter_context(self._atomic())
            while self._run_queue and budget > 0 and group.handled < GROUP_HANDLERS and \
                    time.monotonic() - began < GROUP_S:
                budget -= self._run_one()
        except BaseException:
            self._group = None
            scope.__exit__(*sys.exc_info())   # rolled back: the host actor crashes, and every cell with it
            raise
        self._group = None
        try:
            scope.close()   # the commit
        except Exception as exc:  # noqa: BLE001 - the group is lost, not the host: its cells restart from storage
            self._lose(group, exc)
            return budget
        for cell, address, message in group.out:
            self._send_out(address, message, cell)
        return budget

    def _run_one(self) -> int:
        name = self._run_queue.popleft()
        if name is None:
            if self._parent_mail:   # none left when a lost group took its messages back
                message, sender = self._parent_mail.popleft()
                self._on_parent(message, sender)
            return 1
        state = self.cells.get(name)
        if state is None or not state.mailbox:
            return 0
        message, sender = state.mailbox.popleft()
        if state.mailbox:
            self._run_queue.append(name)
        if state.cell is not None:
            self._group.touched.add(name)
            self._group.handled += 1
            self._handle(state, message, sender)
        return 1

    def _lose(self, group: Group, exc: Exception) -> None:
        """The group's commit failed: none of its handlers happened. Each cell it touched restarts from what is
        committed (its memory, its mailbox and what it asked of the host may rest on what was not), and nothing the
        group sent leaves."""
        reason, outside = crash_reason(exc)
        log.warning("%s: a transaction of %d handlers failed (%s); %d cells restart from what was committed",
                    self.id, group.handled, reason, len(group.touched))
        self._parent_mail = collections.deque(
            (message, sender) for message, sender in self._parent_mail if sender.name not in group.touched)
        for name in group.touched:
            state = self.cells.get(name)
            if state is not None and state.cell is not None:
                state.outside_cause = outside
                self._exit(state, abnormal=True, reason=reason[:500])

    def _handle(self, state: CellState, message, sender) -> None:
        cell = state.cell
        if isinstance(message, CellTimer):
            self._guarded(state, f"timer {message.tag}", cell.fire_timer, message.tag, message.data)
        elif isinstance(message, BridgeRun):
            self._guarded(state, "bridge item", _each_bridge_item, cell, message.items)
        else:
            self._guarded(state, type(message).__name__, cell.handle, message, sender)

    def _guarded(self, state: CellState, what: str, fn, *args):
        """Run one of a cell's handlers: a crash ends that cell (and is supervised), never its host."""
        cell = state.cell
        began = time.monotonic()
        held = self._held = []
        try:
            with acting_as(state.spec.kind_name, state.spec.name), self._handler_scope():
                result = fn(*args)
        except Exception as exc:  # noqa: BLE001 - let it crash, on purpose and in one place
            self._held = None    # nothing it sent leaves: none of what it wrote was committed
            reason, outside = crash_reason(exc)
            if outside:   # not a bug: the traceback says nothing the reason does not
                cell.log.warning("%s stops on %s: %s", state.spec.name, what, reason)
            else:
                cell.log.error("%s crashed on %s: %s\n%s", state.spec.name, what, reason, traceback.format_exc())
            state.outside_cause = outside
            if state.cell is cell:
                self._exit(state, abnormal=True, reason=reason[:500])
            return None
        finally:
            self._held = None
        for sender, address, message in held:
            self._route(sender, address, message)
        took = time.monotonic() - began
        if took > SLOW_HANDLER_S:
            cell.log.warning("%s: its handler of %s ran %.2fs, holding up every cell of this shard", state.spec.name,
                             what, took)
        if state.stop_requested and state.cell is cell:
            self._exit(state, abnormal=not state.clean_stop, reason="stopped")
        return result

    def _handler_scope(self):
        """A handler in a group is a part of its transaction; one run outside a group (a flush) has its own."""
        group = self._group
        if group is None:
            return self._atomic()
        return group.scope.part() if hasattr(group.scope, "part") else contextlib.nullcontext()

    def _exit(self, state: CellState, abnormal: bool, reason: str, restart: bool = True) -> None:
        cell, state.cell = state.cell, None
        state.mailbox.clear()
        cell._exiting = True
        try:
            cell.on_stop()
        except Exception:  # noqa: BLE001 - best effort on the way out; the crash is already on record
            log.exception("%s: on_stop failed", state.spec.name)
        state.last_exit = reason
        restarting = restart and should_restart(state.spec.restart, abnormal) and self._may_restart(state)
        state.status = ChildStatus.RESTARTING if restarting else ChildStatus.STOPPED
        self._on_exit(state, abnormal, restarting)
        if not restarting and self.cells.get(state.spec.name) is state and state.cell is None:
            del self.cells[state.spec.name]

    def _may_restart(self, state: CellState) -> bool:
        now = time.time()
        if state.outside_cause:
            delay = wait_out_delay(self.flags)
        else:
            state.recent.record(now)
            if state.recent.exceeded(now):
                log.error("%s crashed %d times in %gs; leaving it stopped", state.spec.name,
                          state.recent.recent(now), self.flags.period_s)
                return False
            delay = backoff_delay(state.recent.recent(now) - 1, self.flags)
        state.restarts += 1
        self.timers.schedule(delay, ("", state.epoch, CellTimer("restart", state.spec.name)))
        return True

    # ------------------------------------------------------------------------------------------------- timers
    def after(self, cell: Cell, seconds: float, tag: str, data=None) -> None:
        self.timers.schedule(seconds, (cell.myAddress.name, cell.myAddress.epoch, CellTimer(tag, data)))

    def fire_due(self, token: float | None = None) -> None:
        """A wakeup of the host came (``token``: the due time it was asked for): every due timer becomes mail for
        its cell (or restarts a cell)."""
        for name, epoch, timer in self.timers.due(token):
            if name == "":
                self._restart_due(timer.data, epoch)
                continue
            state = self.cells.get(name)
            if state is not None and state.cell is not None and state.epoch == epoch:
                self._enqueue(state, timer, None)

    def _restart_due(self, name: str, epoch: int) -> None:
        state = self.cells.get(name)
        if state is not None and state.cell is None and state.epoch == epoch \
                and state.status is ChildStatus.RESTARTING:
            self.start(state.spec)

    # ------------------------------------------------------------------------------------------------- views
    def live(self, prefix: str = "") -> list[CellState]:
        return [s for n, s in self.cells.items() if s.cell is not None and n.startswith(prefix)]

    def nodes(self) -> tuple:
        out = []
        for state in self.cells.values():
            if state.cell is not None:
                node = state.cell.describe()
                out.append(TreeNode(kind=node.kind, name=node.name, pid=node.pid, address=node.address,
                                    state=node.state, started_at=state.started_at, restarts=state.restarts,
                                    last_exit=state.last_exit, pending=node.pending))
            else:
                out.append(TreeNode(kind=state.spec.kind_name, name=state.spec.name, pid=os.getpid(), address="",
                                    state=state.status.value, started_at=state.started_at, restarts=state.restarts,
                                    last_exit=state.last_exit))
        return tuple(out)

    def _state_of(self, address: CellAddress) -> Optional[CellState]:
        state = self.cells.get(address.name)
        return state if state is not None and state.epoch == address.epoch else None

    def _class(self, path: str) -> type:
        cls = self._classes.get(path)
        if cls is None:
            module, _, name = path.rpartition(".")
            cls = self._classes[path] = getattr(importlib.import_module(module), name)
        return cls


def _each_bridge_item(cell: Cell, items: list) -> None:
    for item in items:
        if cell._exiting:
            return   # it asked to stop: what came after is not for it (as mail after a stop is not)
        cell.take_bridge_item(item)
