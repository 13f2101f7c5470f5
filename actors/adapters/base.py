"""PlatformAdapter: one actor per platform connection (a leaf: it runs a thread, so it creates no actors).

The adapter kit: the contract a platform writes (contract.py: abstract where it must, a default that refuses
clearly where it may) with the machinery behind it, and the helpers a platform may call, public and documented
below. The guide, with a worked example, is docs/adapters.md; a platform subclasses one of the intake styles of
intake_styles.py (``PollingAdapter``, ``StreamingAdapter``, ``ServingAdapter``, ``MailboxAdapter``), which are this
class with the intake made concrete.

Threads. Every ``async`` method of the contract runs on the adapter's **bridge loop** (its own thread,
supervision/bridge.py); it may await network I/O and the adapter's store, and must never block that loop on a
synchronous call (a blocking library call goes through ``asyncio.to_thread``). Plain methods say where they run.
Only the **actor thread** calls Thespian, logging included (a log record is a Thespian message to the logger): loop
code logs with ``say`` and hands anything else to the actor thread with ``post_to_actor``.

The contract (abstract unless a default is named):

    normalise(raw) -> MessageEvent      pure, any thread; MalformedPayload(reason) for input that is no valid event
    normal_silence_s() -> float         the longest silence of a connected intake that is normal (liveness.py)
    async send_message(op) -> message id
    async connect() / disconnect()      open / close the inbound connection (default: nothing); disconnect is
                                        idempotent and may be called when not connected
    async fetch() -> (raws, offset)     PollingAdapter: one round from ``self.offset``; offset None = unchanged
    async run_intake(emit)              StreamingAdapter / ServingAdapter: ``await emit(raws, offset)`` per batch;
                                        it returns once the batch is durable: acknowledge the platform after it

Where the platform's ``Capabilities`` (platform.py) say it can, it overrides (the defaults refuse permanently, and
tests/actors/adapters/test_contract.py checks each platform's class against its capabilities):

    edit_message(op) [edit]   delete_message(op) [delete]   send_file(op) -> id [files_out]
    set_reaction(op) [reactions]   send_typing(op) [typing]   download_attachment(att, cap) -> bytes [files_in]
    find_lost_copy(op) [pacing finds_lost_copies]

and may override: ``close()`` (release outbound clients at stop), ``classify(exc)`` (default ``classify_error``,
the classes of actors.adapters.errors), ``served_url()``, ``event_profile(event)``. Not ``send``: that name is
Thespian's ``Actor.send``, and overriding it fails at class creation.

An adapter reads ``self.settings`` (its validated [adapters.NAME] table), ``self.name``, ``self.profile``,
``self.pacing`` and ``self.offset``. Outbound methods must work whether or not the intake is connected.

Idempotency keys (``PlatformOp.op_id``, and any key an adapter derives from it for the platform): one key names one
operation with one content, across every life of the daemon; a retry of the same operation uses the same key, a
different edit never does.

The helpers (public; loop thread unless said): ``say(level, fmt, *args)`` logs; ``clean_error(error)`` is an
error as one line of text with the adapter's secrets redacted (any thread); ``post_to_actor(item)`` hands an item to
the actor thread; ``report_progress()`` is the intake's proof of life (liveness.py); ``send_unasked(op)`` sends a
message nobody asked for (a pairing code, a notice) through the chat's lane and budget; ``ready_storage()``,
``record_feedback(reactions)``, ``file_bytes(file)``.

The base does the rest, identically for every platform:

* intake: normalise, key, store each round durably *before* the platform is acknowledged, ring doorbells;
  reconnect with backoff on retryable errors; on permanent ones (the platform refuses the configuration) stay up,
  reported down with the reason, and ask again every ``refused_retry_s``; an intake connected but silent past its
  bound is stalled: logged, counted, and the adapter restarted by its supervisor (liveness.py);
* outbound: ``PlatformOp`` -> one FIFO lane per chat, the chat's ``ChatBudget`` spent by sends, edits and deletes,
  429s waited out on that chat only, bounded retries, ``OpResult`` (redacted) to the sender; ids and platform keys
  by idempotency.py (an op id handed again for another operation is refused, as an unknown action is);
* fault injection, honoured only with ``[debug] fault_injection``: ``HoldNextSend`` holds a chat's next recorded
  send after the platform took it and before its id is in the ledger, until ``ReleaseSend`` (send_hold.py): the
  window the conformance suite's delivery case kills the daemon in, where no fake can hold the platform's answer.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import logging
import math
import time
from pathlib import Path
from typing import Any, Optional

from actors.adapters import registry
from actors.adapters.access import Gatekeeper, policy_of
from actors.adapters.sender_limits import SenderLimits, policy_of as limit_policy_of
from actors.adapters.budgets import ChatBudgets
from actors.adapters.connection import ConnectionView
from actors.adapters.errors import PermanentError
from actors.adapters.contract import PlatformContract
from actors.adapters.forwarding import WALK_S, Forwarding, InboundRoutes, Unforwarded
from actors.adapters.liveness import IntakeStalled, Liveness, probe_server, served_address, silence_bound
from actors.adapters.idempotency import KeyBook
from actors.adapters.send_records import SendRecords
from actors.adapters.send_hold import SendHold
from actors.adapters.intake import (Intake, IntakeFailed, IntakeConnected, Ingested, IntakeRetrying, LogLine, OpDone,
                                    _quietly)
from actors.adapters.operator_commands import OperatorCommands
from actors.adapters.outbound import ChatLanes, RetryPolicy, after_failure
from supervision.batching import Outbox
from supervision.bridge import TaskDone
from storage.location import store_location
from actors.messages import (AdapterConnected, AdapterConnection, FloodWaited, HoldNextSend, IntakeSilent,
                             MessageEvent, OpResult, PlatformOp, ReleaseSend, SendHeld)
from actors.hooks.points import tell_adapter_state
from common.redact import configured_secrets, redact
from actors.adapters.pacing import DEFAULT_PACING
from storage import MediaCache, Store
from storage.media import media_cache
from supervision.actor import GatewayActor
from common.config import setting

OP_METHODS = {"send": "send_message", "edit": "edit_message", "delete": "delete_message", "typing": "send_typing",
              "find_lost": "find_lost_copy", "react": "set_reaction"}
STOP_TIMEOUT_S = 3.0


@dataclasses.dataclass(frozen=True)
class SendHeldNow:
    """Loop -> actor thread: a send is held (send_hold.py); ``armer`` (if any) is told."""
    armer: Any
    held: SendHeld


# ---------------------------------------------------------------------------------------------- the actor

class PlatformAdapter(OperatorCommands, GatewayActor, PlatformContract):
    uses_bridge = uses_links = True   # links: doorbells, results and operations with the shards (direct_link.py)
    retry_policy = RetryPolicy()
    reconnect_base_s = 0.1
    reconnect_max_s = 30.0
    refused_retry_s = 300.0      # a platform that refused the configuration is asked again this often

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.send is not GatewayActor.send:  # it would silently break every message the actor sends
            raise TypeError(f"{cls.__name__} overrides Actor.send; implement send_message(op) instead")

    def __init__(self):
        super().__init__()
        self.settings: dict = {}
        self.profile = "default"
        self.pacing = DEFAULT_PACING
        self.secrets: list[str] = []
        self.configured_secrets: list[str] = []
        self.per_user_in_groups = False
        # loop thread only
        self.store: Optional[Store] = None   # one store for the inbound path and the outbound ledger records
        self.media_cache: Optional[MediaCache] = None   # under the state directory, opened with the store
        self.intake = Intake(self, post=self.post_to_actor, say=self.say, clean=self.clean_error)
        self.records = SendRecords(lambda: self.name, lambda: self.store, say=self.say, clean=self.clean_error)
        self._lanes = ChatLanes(self._run_op)
        self._budgets = ChatBudgets()   # replaced in on_start by one that honours earlier lives (budgets.py)
        # Fault injection only ([debug] fault_injection): a reply's send held before its record (send_hold.py).
        self.send_hold = SendHold(lambda armer, chat_id, message_id: self.post_to_actor(
            SendHeldNow(armer, SendHeld(chat_id, message_id))))
        # actor thread only
        self._loop_bridge = None
        self._tickets, self._keys = itertools.count(1), KeyBook()   # KeyBook: what each op id named in this life
        self._in_hand: dict[int, tuple[PlatformOp, Any]] = {}
        self._chat_load: collections.Counter = collections.Counter()
        self.routes = InboundRoutes()   # doorbells at this host's shards, rows forwarded to a worker's
        self.forwarding = Forwarding(lambda: self.name, lambda: self.store, self.post_to_actor, self.say)
        self._connection_reports = 0  # AdapterConnection reports sent by this incarnation
        self.connection = ConnectionView(time.time())   # what `status` shows of the platform connection
        # The intake's proof of life: progress written by the loop thread, checked by the actor thread (liveness.py).
        self.liveness = Liveness(bound_s=60.0)
        # What one drain of the bridge produced (answers, doorbells), sent per recipient when it is done.
        self.batched_out = Outbox()
        self._unannounced = False
        self._announced_to = None     # the sweeper our last AdapterConnected went to

    # ------------------------------------------------------------- what the contract's methods read (contract.py)
    @property
    def offset(self) -> Any:
        """The platform offset committed together with the last rows (what ``fetch`` asks from)."""
        return self.intake.offset

    def event_profile(self, event: MessageEvent) -> str:
        """The profile (part of the session key) an inbound event runs under (loop): the adapter's, unless a
        subclass lets each request choose among those it serves (the OpenAI-compatible endpoint does)."""
        return self.profile

    # ----------------------------------------------------------------------------- life cycle (actor thread)
    def on_start(self, args) -> None:
        self.settings = dict(args or {})
        self.profile = self.settings.get("profile") or "default"
        self.pacing = registry.pacing_of(self.settings)
        self.secrets = registry.secret_values(self.settings)
        self.configured_secrets = configured_secrets(self.config)   # the whole gateway's, for what users write
        self.per_user_in_groups = bool(setting(self.config, "sessions", "per_user_in_groups"))
        entry = registry.entry_of(self.settings)
        self.intake.gatekeeper = Gatekeeper(self.name, policy_of(self.settings, entry.access, entry.addresses))
        self.intake.sender_limits = SenderLimits(limit_policy_of(self.settings))
        self._budgets = ChatBudgets(started_at=time.monotonic())   # asyncio's loop.time() is time.monotonic()
        # Loop-side code posts through this reference: the actor thread drops ``self.bridge`` when it exits.
        self._loop_bridge = self.bridge
        self.liveness = Liveness(silence_bound(self.normal_silence_s(), self.settings.get("max_silence_s") or 0.0))
        self.start_intake()   # and an operator may pause, resume or reconnect it (operator_commands.py)
        if math.isfinite(self.liveness.bound_s):     # an adapter without a connection declares none
            self.after(self.liveness.check_every_s, "liveness")
        # A server's proof of life is that it still accepts a connection: probed where the adapter serves one.
        self.bridge.submit(probe_server(lambda: served_address(self.served_url()), self.report_progress,
                                        every_s=self.liveness.probe_every_s), tag="server_probe")
        if setting(self.config, "cluster", "enabled"):
            self.after(WALK_S, "forward_walk")

    def on_timer_forward_walk(self, _data) -> None:
        if self.routes.forwards:
            self.bridge.submit(self.forwarding.walk(), tag="forward_walk")
        self.after(WALK_S, "forward_walk")

    def on_timer_liveness(self, _data) -> None:
        """Is the intake a zombie? Connected (as it believes) and silent past its bound: log, count, crash; the
        supervisor starts a fresh adapter with fresh connections (liveness.py). A drained intake is left alone."""
        connected = self.intake.healthy and not self.intake_stopped
        if self.liveness.stalled(time.monotonic(), connected):
            silent = self.liveness.silent_for(time.monotonic())
            self.log.error("%s: the intake is connected but silent for %.1fs (normal: at most %.1fs): a zombie "
                           "connection; the adapter restarts", self.name, silent, self.liveness.bound_s)
            self.report(IntakeSilent(self.name, round(silent, 3)))
            raise IntakeStalled(f"intake stalled: no progress for {silent:.1f}s (bound {self.liveness.bound_s:g}s)")
        self.after(self.liveness.check_every_s, "liveness")

    def on_InboundStored(self, message, sender) -> None:
        self.bridge.submit(self.forwarding.mark(message), tag="forward_mark")

    def on_HoldNextSend(self, message: HoldNextSend, sender) -> None:
        if not self.debug_enabled():
            self.log.warning("%s: send hold refused (enable [debug] fault_injection)", self.name)
            return
        self.bridge.call(self.send_hold.arm, message.chat_id, sender)

    def on_ReleaseSend(self, message: ReleaseSend, sender) -> None:
        if self.debug_enabled():
            self.bridge.call(self.send_hold.release)

    def on_config_changed(self, old: dict) -> None:
        self.intake.take_config(self.config)   # a reload: what changes from the next inbound event on

    def on_StopIntake(self, message, sender) -> None:
        super().on_StopIntake(message, sender)
        if self._intake_task is not None:
            self._intake_task.cancel()  # between rounds or mid-poll: an ingest in progress is shielded and completes
        self.log.info("%s: intake stopped (outbound continues)", self.name)
        self.connection.stopped(time.time())
        self._report_connection(False)

    def on_stop(self) -> None:
        if self.bridge is None:
            return
        if self._intake_task is not None:
            self._intake_task.cancel()
        try:
            self.bridge.run_sync(self._shut_down(), STOP_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - on the way out; what was committed is on disk
            self.log.warning("%s: unclean stop: %s", self.name, self.clean_error(exc))

    def pending_work(self) -> int:
        return len(self._in_hand)

    def describe(self):
        note = self.status_note()
        return dataclasses.replace(n := super().describe(), facts=self.connection.facts(self.served_url()) +
                                   ((("note", self.clean_error(note)),) if note else ()) + n.facts)

    async def _shut_down(self) -> None:
        self._lanes.cancel()
        for step in (self.disconnect(), self.close()):
            await _quietly(step)
        if self.store is not None:
            store, self.store = self.store, None
            await store.close()

    # ------------------------------------------------------------------- items back from the loop (actor thread)
    def on_loop_LogLine(self, item: LogLine) -> None:
        self.log.log(item.level, "%s", item.text)

    def on_loop_Ingested(self, item: Ingested | Unforwarded) -> None:
        if type(item) is Ingested:   # the intake's new rows (not an inbox looked at again, not a forwarding walk's)
            self.connection.messages_in += len(item.rows)
        for address, message in self.routes.of_round(self.directory, item.rings, item.rows, time.monotonic()):
            self.batched_out.put(address, message)

    on_loop_Unforwarded = on_loop_Ingested   # rows a forwarding walk found: routed as a round's new rows are

    def on_loop_IntakeConnected(self, _item: IntakeConnected) -> None:
        self._unannounced = True
        self._announce_connected()

    def on_loop_OpDone(self, item: OpDone) -> None:
        self._answer(item)

    def on_loop_AdapterConnection(self, item: AdapterConnection) -> None:
        if item.connected:
            self.connection.connected(time.time())
        self._report_connection(item.connected)
        tell_adapter_state(self.config, self.bridge, self.name, self.settings, item.connected)

    def on_loop_IntakeRetrying(self, item: IntakeRetrying) -> None:
        self.connection.retrying(item.error, item.attempt, time.time())

    def on_loop_FloodWaited(self, item: FloodWaited) -> None:
        self.report(item)

    def on_loop_SendHeldNow(self, item: SendHeldNow) -> None:
        self.log.warning("%s: fault injection: the send of %s to chat %s is held before its record",
                         self.name, item.held.message_id, item.held.chat_id)
        if item.armer is not None:
            self.send(item.armer, item.held)

    def on_loop_TaskDone(self, item: TaskDone) -> None:
        if item.tag == "halted":
            self.intake_halted()
        if item.tag == "intake" and item.error is not None:
            self.log.error("%s: intake failed for good, the adapter restarts: %s", self.name,
                           self.clean_error(item.error))
            raise IntakeFailed(self.clean_error(item.error))

    def _report_connection(self, connected: bool) -> None:
        """Tell the metrics actor whether the platform connection is up, numbered in the order this thread learnt
        it (AdapterConnection.seq): a report that crosses a later one is not taken for the newest."""
        self._connection_reports += 1
        self.report(AdapterConnection(self.name, connected, self._connection_reports))

    def after_bridge_items(self) -> None:
        self.batched_out.flush(self.send)

    def on_directory(self, directory) -> None:
        for address, doorbell in self.routes.directory_changed(directory, time.monotonic()):
            self.send(address, doorbell)
        self._announce_connected()
        self._report_connection(self.intake.healthy and not self.intake_stopped)  # maybe a new metrics actor

    def _announce_connected(self) -> None:
        """Tell the sweeper the platform is reachable: after each (re)connection, and to each new sweeper (a
        restarted one starts knowing of no connected adapter and would sweep nothing until told)."""
        if (sweeper := self.directory.sweeper if self.directory is not None else None) is None:
            return
        if self._unannounced or (self.intake.healthy and sweeper != (self._announced_to or sweeper)):
            self._unannounced = False
            self._announced_to = sweeper
            self.send(sweeper, AdapterConnected(self.name))

    # ---------------------------------------------------------------------------------------------- outbound
    def on_PlatformOp(self, op: PlatformOp, sender) -> None:
        if (refused := f"unknown action {op.action!r}" if op.action not in OP_METHODS else self._keys.admit(op)):
            self.send(sender, OpResult(op.op_id, False, error_kind="permanent", error=refused))
            return
        if op.action == "typing" and self._chat_load[op.chat_id]:
            self.send(sender, OpResult(op.op_id, True, error="typing skipped: the chat is busy"))
            return
        ticket = next(self._tickets)
        self._in_hand[ticket] = (op, sender)
        self._chat_load[op.chat_id] += 1
        self.bridge.call(self._lanes.submit, op.chat_id, (ticket, op))

    def _answer(self, done: OpDone) -> None:
        op, sender = self._in_hand.pop(done.ticket, (None, None))
        if op is None:
            return
        self._chat_load[op.chat_id] -= 1
        if self._chat_load[op.chat_id] <= 0:
            del self._chat_load[op.chat_id]
        if op.action == "send" and done.result.ok:
            self.connection.messages_out += 1
        self.batched_out.put(sender, done.result)

    async def _run_op(self, item) -> None:
        ticket, op = item
        try:
            result = await self._perform(op)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug in a subclass must still answer the sender
            result = OpResult(op.op_id, False, error_kind="permanent", error=self.clean_error(exc))
        self._loop_bridge.post(OpDone(ticket, result))

    async def _perform(self, op: PlatformOp) -> OpResult:
        loop = asyncio.get_running_loop()
        await self._budgets.ready()   # the 429 bans of an earlier life bind before any operation goes
        budget = self._budgets.of(op.chat_id, op.chat_type, self.pacing)
        floods = failures = 0
        intent_recorded = False
        while True:
            if op.action == "typing":  # costs no budget, but never goes into a 429 ban
                if budget.blocked_until > loop.time():
                    return OpResult(op.op_id, False, error_kind="flood", error="typing skipped: rate limited",
                                    retry_after=budget.blocked_until - loop.time())
            else:
                await self._spend(budget)
            if op.ledger is not None and op.action == "send" and not intent_recorded:
                refused = await self.records.intent(op)
                if refused is not None:
                    return refused
                intent_recorded = True
            try:
                method = "send_file" if op.file is not None and op.action == "send" else OP_METHODS[op.action]
                message_id = await getattr(self, method)(op)
                if op.action == "find_lost":
                    return await self.records.lost_copy_found(op, message_id)
                if op.action != "send":
                    message_id = op.message_id
                if op.ledger is not None and op.action == "send" and message_id is not None:
                    await self.send_hold.after_send(op.chat_id, str(message_id))   # unarmed: returns at once
                    return OpResult(op.op_id, True, message_id=str(message_id),
                                    recorded=await self.records.part(op, str(message_id)))
                return OpResult(op.op_id, True, message_id=None if message_id is None else str(message_id))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below
                kind, retry_after = self.classify(exc)
                if (op.action == "send" and not op.idempotency_key and kind == "retryable"
                        and getattr(exc, "maybe_done", False)):
                    # The send may be in the chat already: repeating it here would show it twice, unmarked. The
                    # sender knows the reply and holds the ledger: it sends again with the visible re-sent mark.
                    return OpResult(op.op_id, False, error_kind="ambiguous", error=self.clean_error(exc))
                step, delay = after_failure(op.action, kind, retry_after, floods, failures, self.retry_policy)
                if step == "done":
                    return OpResult(op.op_id, True, message_id=op.message_id)
                if step == "fail":
                    if intent_recorded:   # the platform said no: nothing was sent, so nothing is ambiguous
                        await self.records.forget_intent(op)
                    return OpResult(op.op_id, False, error_kind=kind, error=self.clean_error(exc), retry_after=retry_after,
                                    reason=self.platform_words(exc))
                self.say(logging.INFO, "%s: %s %s in chat %s: %s; retrying in %.2fs", self.name, op.action,
                          op.op_id, op.chat_id, kind, delay)
                if step == "flood":
                    floods += 1
                    budget.flood(loop.time() + delay)  # the whole chat waits, so the op's successors do too
                    self._loop_bridge.post(FloodWaited(self.name, delay))
                    await self.records.ban(op.chat_id, delay)
                else:
                    failures += 1
                    await asyncio.sleep(delay)

    async def _spend(self, budget) -> None:
        """Wait for the chat's budget to allow one more operation, and spend it."""
        loop = asyncio.get_running_loop()
        while (wait := budget.wait_time(loop.time())) > 0:
            await asyncio.sleep(wait)
        budget.consume(loop.time())

    # ------------------------------------------------------------------------------------------------ helpers
    async def ready_storage(self) -> Store:
        """The store, opened on this loop the first time, and the chat budgets of earlier lives loaded."""
        if self.store is None:
            state_dir = Path(self.config["gateway"]["state_dir"])
            state_dir.mkdir(parents=True, exist_ok=True)
            # Inline on this loop (storage/inline.py), without aiosqlite's two thread hops per call (most of an
            # adapter's CPU per message). A write meeting the lock waits in asyncio sleeps, bounded by
            # INLINE_RETRY_BUDGET_S (SQLite's own busy wait once stalled a 10,000-chat burst's sends into timeouts).
            location = store_location(self.config.get("storage") or {}, state_dir / "gateway.db")
            self.store = await Store.open(location, setting(self.config, "storage", "durability"),
                                          inline=True, waits_on_loop=True)
            self.media_cache = media_cache(self.config)   # with its byte quota ([media] cache_max_bytes)
            # A kill -9 between a commit and its doorbells leaves rows nobody rang, and the session supervisor
            # scans only when it starts itself: ring every session with work once (a doorbell only says "look").
            waiting = await self.store.inbox.sessions_with_pending()
            if waiting:
                self.post_to_actor(Ingested(tuple((key, 0) for key in waiting)))
        if not self._budgets.loaded:
            if banned := await self._budgets.load(self.store, self.name):
                self.say(logging.INFO, "%s: %d chat(s) still under a rate-limit ban from before the restart",
                          self.name, banned)
        return self.store

    async def record_feedback(self, reactions: list) -> None:
        """Reactions users put on messages (storage/feedback.py), stored before the platform is acknowledged."""
        if reactions:
            await (await self.ready_storage()).feedback.record(reactions)

    async def file_bytes(self, file) -> bytes:
        """An OutgoingFile's bytes, from the media cache; one swept since (a reply recovered long after) cannot be
        sent: a permanent failure, and the reply says so in its place."""
        await self.ready_storage()
        if (data := await asyncio.to_thread(self.media_cache.read, file.cache_key)) is None:
            raise PermanentError("the file is no longer in the media cache")
        return data

    def send_unasked(self, op: PlatformOp) -> None:
        """A message the adapter sends on its own (a pairing code, a limit notice): through the chat's lane and
        budget, answered to no one (its ticket is in no actor's hands)."""
        self._lanes.submit(op.chat_id, (None, op))

    def post_to_actor(self, item) -> None:
        """Hand an item from the loop thread to the actor thread (``on_loop_<ItemType>``)."""
        self._loop_bridge.post(item)

    def say(self, level: int, fmt: str, *args) -> None:
        """Log from the loop thread: the actor thread writes the line (see the module docstring)."""
        self.post_to_actor(LogLine(level, fmt % args))

    def platform_words(self, error: Exception) -> str:
        """A refusal's own words (``PlatformError.description``), cleaned as by ``clean_error``; else "" (any thread)."""
        words = getattr(error, "description", "")
        return self.clean_error(words) if isinstance(words, str) and words.strip() else ""

    def clean_error(self, error: Any) -> str:
        """An error (or any text) as one line of at most 300 characters, the adapter's secrets redacted: what may
        go into a log line, an ``OpResult`` or ``status`` (any thread)."""
        text = str(error) or type(error).__name__
        return redact(" ".join(text.split()), self.secrets)[:300]

    def report_progress(self) -> None:
        """The intake's proof of life (loop thread): a heartbeat acknowledged, a pong, a line, a probe answered.
        Poll rounds and stored batches report it already (intake.py); a pushed intake calls it for what shows
        the platform still talks while no message comes (liveness.py)."""
        self.liveness.progress()
