"""The delivery sweeper: finishes the replies a crash left behind (docs/design.md §2.6, G3).

State: the adapters known to be connected, the obligations it is delivering (each: its rows, fence, next part, the
operation in flight), the ledger counts shown as its pending work, the recovery totals and the late inbox rows
(shown in status).

Messages it takes: AdapterConnected (sweep for that adapter now), OpResult (its operations), timers sweep and
housekeeping. Messages it sends: PlatformOp to adapters; InboxDoorbell to the shard of a session whose message is
past the liveness bound (``check_liveness``, every sweep). A reply it delivers goes to plugins' on_delivery hooks.

A sweep claims, atomically, obligations whose owner process is dead (or that nobody claimed) on connected adapters
(``Ledger.sweep_recoverable``). For each: parts already on the platform are edited to their final text (an edit to
the same text is a no-op), parts never sent are sent and recorded, extra parts are deleted; then it is delivered.
An obligation without final text belongs to a turn that was cut short: it is left (as failed) for its session,
which resumes the turn (up to [sessions] max_resumes times) and edits the same messages. A failed attempt has no
owner (``Ledger.mark_failed``), so the sweep tries it again, spaced by ``retry_spacing_s``, whoever failed it.

On a worker host (docs/distribution.md) one sweeper runs per host, beside its shards (``sweeper:<host>``), and
sweeps that host's ledger, which the leader's adapters do not see: it records each send's intent itself before the
op leaves and its id from the answer, and never asks for a lost copy to be looked for (that search reads the
adapter's ledger): such a part goes again under the re-sent mark. The leader's sweeper passes every
AdapterConnected on to the worker sweepers the Directory lists (``sweepers``), and tells each new one which
adapters are connected.

On hosts sharing one database (``[cluster] shared``, docs/distribution.md) every host runs a sweeper over the one
ledger, and each takes only the replies of the partitions its shards hold by lease (actors/sessions/partitions.py):
a dead host's replies are finished by the host that took its partitions, once its leases expired.

Every send's intent is committed by the adapter just before the request leaves; the id replaces it. One that is
ambiguous (a dead owner's send never came back: ``Obligation.ambiguous`` or an intent still there) may have an
unaddressable copy in the chat, so its first part carries the [sessions] resent_marker line, unless the platform
deduplicates sends by key (pacing ``idempotent_send``), in which case the send carries that key and the part is
then edited to its final text.
"""
from __future__ import annotations

import dataclasses
import itertools
import time
from functools import partial

from actors.messages import AdapterConnected, InboxDoorbell, LostSend, OpResult, PlatformOp
from common.cluster import host_name, on_worker, runs_here
from common.host_map import runs_on
from actors.adapters.pacing import resent_marker
from actors.adapters.registry import reply_pacing
from actors.adapters.idempotency import op_id as numbered_op
from actors.hooks.points import hooks_for, sweeper_delivery
from actors.sessions.reply_files import has_marker, is_file, marked_at, marker_index, send_fields
from actors.sessions.paragraph_parts import part_key
from actors.sessions.partitions import PARTITION_PREFIX, held_by
from storage import MediaCache
from storage import IllegalTransition, StaleFence
from supervision.storage_access import StoreUser, store_path
from supervision.actor import GatewayActor
from common.config import setting
from common.logging_setup import key_hash

RETENTION_DAYS = 30.0
MAX_ROWS = 200_000
STALE_JOB_S = 60.0
LATE_LOGGED_KEPT = 10_000   # late inbox rows already logged (each is logged once)
# Attempts at one reply before the sweep gives it up (abandoned: the operator can retry it). Each restart, adapter
# crash or dropped connection costs one; five were spent by one minute of such faults (the short chaos run).
SWEEP_MAX_ATTEMPTS = 12
FREE_RETRIES = 3           # attempts retried at the next sweep; later ones wait longer and longer:
RETRY_SPACING_CAP_S = 120.0


def retry_spacing_s(attempts: int) -> float:
    """How long after its last change a reply that failed ``attempts`` times waits for the next sweep to claim it.
    The first retries follow at once (a restart must not delay the replies it cut); then 2 s, 4 s, ... up to two
    minutes, so the twelve attempts span six minutes of trying or more: a burst of faults (an adapter crash-looping,
    a flapping connection) exhausts them only if it lasts that long, and then the reply is abandoned, logged and
    counted, not retried for a day."""
    if attempts <= FREE_RETRIES:
        return 0.0
    return min(RETRY_SPACING_CAP_S, 2.0 ** (attempts - FREE_RETRIES))


class DeliverySweeper(StoreUser, GatewayActor):
    uses_bridge = True
    # Placed by host in a convention (a worker's sweeper: ChildSpec.placement); without a placement, on the leader.
    actorSystemCapabilityCheck = staticmethod(runs_here)

    def __init__(self):
        super().__init__()
        self.connected: set[str] = set()
        self.jobs: dict[str, dict] = {}          # op id -> job
        self.ops = itertools.count(1)
        self.pending = 0
        self.late = 0                            # inbox rows past the liveness bound at the last sweep
        self.late_logged: dict[int, None] = {}   # their seqs, oldest first
        self.records_sends = on_worker()         # this host's ledger is not the adapters': sends recorded here
        self.told: list = []                     # worker sweepers told of the connected adapters

    def on_start(self, args) -> None:
        self.open_store()
        self.refresh_counts()
        self.after(self.sweep_interval_s(), "sweep")
        self.after(5.0, "housekeeping")

    def on_stop(self) -> None:
        self.close_store()

    def pending_work(self) -> int:
        return self.pending

    def refresh_counts(self) -> None:
        counts = self.db(self.store.ledger.counts())
        self.pending = counts["pending"] + counts["attempting"] + counts["failed"]
        self.recovery = self.db(self.store.sessions.recovery_totals())

    def describe(self):
        node = super().describe()
        recovery = getattr(self, "recovery", None) or {}
        # status: turns resumed, notices given, messages past the liveness bound
        return dataclasses.replace(node, facts=tuple(recovery.items()) + (("late", self.late),))

    # ------------------------------------------------------------------------------------------------ sweeps
    def on_AdapterConnected(self, message: AdapterConnected, sender) -> None:
        self.connected.add(message.name)
        for _name, sweeper in self.sweepers():
            self.send(sweeper, message)
        self.sweep()

    def sweepers(self) -> list:
        """The worker hosts' sweepers running now (none on a worker: only the leader's relays)."""
        if self.records_sends or self.directory is None:
            return []
        return [(name, address) for name, address in self.directory.sweepers if address is not None]

    def on_directory(self, directory) -> None:
        for name, sweeper in self.sweepers():
            if (name, sweeper) not in self.told:   # a new one (or restarted): it knows of no connected adapter
                for adapter in sorted(self.connected):
                    self.send(sweeper, AdapterConnected(adapter))
        self.told = self.sweepers()

    def sweep_interval_s(self) -> float:
        return float(setting(self.config, "delivery", "sweep_interval_s"))

    def on_timer_sweep(self, _data) -> None:
        self.sweep()
        self.after(self.sweep_interval_s(), "sweep")

    def sweep(self) -> None:
        self.check_liveness()
        for op_id, job in list(self.jobs.items()):
            if time.time() - job["sent_at"] > STALE_JOB_S:  # its adapter died with the operation: claim it again
                del self.jobs[op_id]
                self.db(self.store.ledger.mark_failed(job["ob"].obligation_id, job["fence"], "no answer"))
        if not self.connected:
            return
        busy = {job["ob"].obligation_id for job in self.jobs.values()}
        serves = self.serves
        if setting(self.config, "cluster", "shared"):   # hosts sharing the database: the partitions this host holds
            serves = partial(held_by(self.db(self.store.leases.all(PARTITION_PREFIX)), host_name(self.config)),
                             partitions=setting(self.config, "cluster", "partitions"))
        for ob in self.db(self.store.ledger.sweep_recoverable(
                self.connected, max_attempts=SWEEP_MAX_ATTEMPTS, spacing_s=retry_spacing_s, serves=serves)):
            if ob.obligation_id in busy:
                continue
            if not ob.chunks:
                self.db(self.store.ledger.mark_failed(ob.obligation_id, ob.fence, "turn cut short before its "
                                                      "answer was complete; its session resumes it"))
                continue
            self.log.warning("sweeper: finishing reply %s (%d part(s) recorded of %d)", ob.obligation_id[:12],
                             len(ob.parts), len(ob.chunks))
            self.next_op(self.new_job(ob))
        self.refresh_counts()

    def serves(self, session_key: str) -> bool:
        """Whether a shard of this host serves ``session_key`` in the shard map now. A key moving to another
        host's shard (actors/sessions/moves_out.py) keeps its open replies here until that shard has imported
        them and finishes them itself: finishing one here as well would send it twice."""
        place, _address = self.directory.place_for(session_key) if self.directory is not None else (None, None)
        return runs_on(place, host_name(self.config) if on_worker() else None)

    def check_liveness(self) -> None:
        """The liveness bound ([sessions] answer_bound_s): a stored message no turn has taken that long after it
        arrived, while its session runs no turn, has lost its doorbell or waits on a session that does not pump.
        Each is logged once with its age; its session is rung again (a doorbell only says "look": a session that
        is fine takes it, one that was not live is started)."""
        late = self.db(self.store.inbox.late(setting(self.config, "sessions", "answer_bound_s")))
        self.late = len(late)
        now, rung = time.time(), set()
        for key, seq, received_at in late:
            if seq not in self.late_logged:
                self.late_logged[seq] = None
                self.log.warning("sweeper: inbox #%d is not taken %.0fs after it arrived and its session runs no "
                                 "turn; ringing the session again", seq, now - received_at,
                                 extra={"session": key_hash(key)})
            if key not in rung and self.directory is not None:
                rung.add(key)
                _name, shard = self.directory.shard_for(key)
                if shard is not None:
                    self.send(shard, InboxDoorbell(key, seq))
        while len(self.late_logged) > LATE_LOGGED_KEPT:
            self.late_logged.pop(next(iter(self.late_logged)))

    def new_job(self, ob) -> dict:
        pacing = reply_pacing(self.config, ob.target.platform, ob.target.platform)
        chunks = list(ob.chunks)
        unresolved = ob.send_intent is not None and not ob.ambiguous
        # Where the adapter can look for the copy a lost send left, that part's first operation is the search.
        lost = ob.send_intent if (unresolved and pacing.finds_lost_copies and not self.records_sends
                                  and ob.send_intent < len(chunks)
                                  and not is_file(chunks[ob.send_intent])) else None
        job = {"ob": ob, "fence": ob.fence, "index": 0, "parts": dict(ob.parts), "chunks": chunks,
               "idempotent": pacing.idempotent_send, "ambiguous": ob.ambiguous, "lost": lost,
               "editable": pacing.supports_edit, "streamed": ob.streamed is not None}
        if unresolved and lost is None:
            self.mark(job)
        elif ob.ambiguous:
            self.add_marker(job)
        return job

    def mark(self, job: dict) -> None:
        """The reply may have a copy nobody can address in the chat: marked as re-sent, in the ledger first (before
        the marked copy leaves, so any later owner marks its copies too)."""
        job["ambiguous"] = True
        self.db(self.store.ledger.mark_ambiguous(job["ob"].obligation_id, job["fence"]))
        self.report(LostSend(job["ob"].target.platform, "marked"))
        self.add_marker(job)

    def add_marker(self, job: dict) -> None:
        marker = resent_marker(self.config)
        if not job["idempotent"] and not any(has_marker(c, marker) for c in job["chunks"]):
            # The consumer cut every chunk with room for this line (actors/adapters/pacing.chunk_limit); where the
            # platform has no edits it goes on the first part sent again (reply_files.marker_index).
            at = marker_index(len(job["chunks"]), job["parts"], job["editable"])
            job["chunks"] = marked_at(job["chunks"], at, marker)
            # Recorded before the marked part leaves: an attempt that fails after it (a later part refused, the
            # connection lost) leaves the mark where it went, and the next sweep finds it there instead of putting
            # a second one on the next part it sends (which is no re-sent copy). A kill -9 before this commits sent
            # nothing yet; the next sweep decides the same place.
            self.db(self.store.ledger.set_chunks(job["ob"].obligation_id, job["fence"], job["chunks"]))

    def next_op(self, job: dict) -> None:
        ob, index = job["ob"], job["index"]
        adapter = self.directory.adapter(ob.target.platform) if self.directory is not None else None
        if adapter is None:
            self.db(self.store.ledger.mark_failed(ob.obligation_id, job["fence"], "adapter not running"))
            return
        # Numbered under this sweep's claim of the obligation: a later sweep, or another sweeper's life, claims with a
        # new fence, so its ids (and the platform keys made from them) are new (actors/adapters/idempotency.py).
        op_id = numbered_op(f"sweep:{ob.obligation_id[:16]}", job["fence"], next(self.ops))
        t = ob.target
        if index < len(job["chunks"]):
            text = job["chunks"][index]
            if index in job["parts"] and (is_file(text) or not job["editable"]):   # never edited (placed_parts.py)
                job["index"] += 1
                return self.next_op(job)
            if index in job["parts"]:
                op = PlatformOp(op_id, "edit", t.chat_id, text, message_id=job["parts"][index], thread_id=t.thread_id,
                                final=True)
            elif index == job["lost"]:
                op = PlatformOp(op_id, "find_lost", t.chat_id, text, thread_id=t.thread_id, final=True,
                                ledger=(ob.obligation_id, job["fence"], index))
            else:
                key = None
                if job["idempotent"]:   # a reply sent as it was written keys its parts by content as well
                    key = part_key(ob.obligation_id, index, text) if job["streamed"] else \
                        f"{ob.obligation_id[:16]}.{index}"
                # The adapter commits the send's intent just before the request leaves, and the returned id with
                # the platform's answer (PlatformOp.ledger): a refused send leaves no intent behind.
                op = PlatformOp(op_id, "send", t.chat_id, thread_id=t.thread_id, **send_fields(text),
                                reply_to=t.reply_to if index == 0 else None, final=True, idempotency_key=key,
                                ledger=None if self.records_sends else (ob.obligation_id, job["fence"], index))
                if self.records_sends:   # committed before the op leaves; the id is recorded from its answer
                    try:
                        self.db(self.store.ledger.record_send_intent(ob.obligation_id, job["fence"], index))
                    except (StaleFence, IllegalTransition):
                        self.log.warning("sweeper: reply %s was taken over", ob.obligation_id[:12])
                        return
        else:
            extra = sorted(i for i in job["parts"] if i >= len(job["chunks"]))
            if not extra:
                self.db(self.store.ledger.mark_delivered(ob.obligation_id, job["fence"]))
                self.refresh_counts()
                hooks_for(self.config).fire(self.bridge, "on_delivery",
                                            sweeper_delivery(ob, job["chunks"], job["parts"]))
                return
            job["index"] = extra[0]
            op = PlatformOp(op_id, "delete", t.chat_id, message_id=job["parts"][extra[0]], thread_id=t.thread_id)
        job["op"], job["sent_at"] = op, time.time()
        self.jobs[op_id] = job
        self.send(adapter, op)

    def on_OpResult(self, result: OpResult, sender) -> None:
        job = self.jobs.pop(result.op_id, None)
        if job is None:
            return
        ob, op = job["ob"], job["op"]
        if result.error_kind == "lost_claim":   # nothing was sent: another owner holds the reply now
            self.log.warning("sweeper: reply %s was taken over: %s", ob.obligation_id[:12], result.error)
            return
        if op.action == "find_lost":
            self.lost_copy_answered(job, result)
            return
        if not result.ok and not (op.action == "delete" or (op.action == "edit" and result.error_kind == "not_found")):
            self.log.error("sweeper: reply %s: %s failed: %s", ob.obligation_id[:12], op.action, result.error)
            if op.action == "send" and self.records_sends and result.error_kind != "ambiguous":
                self.db(self.store.ledger.clear_send_intent(ob.obligation_id, job["fence"], job["index"]))
            self.db(self.store.ledger.mark_failed(ob.obligation_id, job["fence"], result.error or "send failed"))
            self.refresh_counts()
            return
        if not result.ok and op.action == "edit":   # the message is gone: send that part again
            job["parts"].pop(job["index"], None)
            self.next_op(job)
            return
        if op.action == "send":
            job["parts"][job["index"]] = str(result.message_id)
            if not result.recorded:
                self.db(self.store.ledger.record_part(ob.obligation_id, job["fence"], job["index"],
                                                      str(result.message_id), replace=True))
            if job["ambiguous"] and job["idempotent"]:
                self.next_op(job)        # the key may have returned the earlier copy: edit it to the final text
                return
        if op.action == "delete":
            job["parts"].pop(job["index"], None)
        else:
            job["index"] += 1
        self.next_op(job)

    def lost_copy_answered(self, job: dict, result: OpResult) -> None:
        """Found: the copy shows the part's text and is the part. Never landed: the part is sent. Not known: the
        reply is marked, and every part from the first is shown again (the first carries the marker)."""
        if not result.ok and result.error_kind in ("retryable", "flood"):
            # The search is edits, safe to repeat: the reply fails this attempt and the next sweep looks again
            # (its intent is still there), rather than marking it for a dropped connection.
            self.log.warning("sweeper: reply %s: the search for a lost copy failed: %s", job["ob"].obligation_id[:12],
                             result.error)
            self.db(self.store.ledger.mark_failed(job["ob"].obligation_id, job["fence"], result.error or "failed"))
            self.refresh_counts()
            return
        job["lost"] = None
        if result.ok:
            self.report(LostSend(job["ob"].target.platform, "never_landed" if result.message_id is None else "found"))
        if result.ok and result.message_id is not None:
            job["parts"][job["index"]] = str(result.message_id)
            if not result.recorded:
                self.db(self.store.ledger.record_part(job["ob"].obligation_id, job["fence"], job["index"],
                                                      str(result.message_id), replace=True))
            job["index"] += 1
        elif not result.ok:
            self.mark(job)
            job["index"] = 0
        self.next_op(job)

    # ----------------------------------------------------------------------------------------- housekeeping
    def on_timer_housekeeping(self, _data) -> None:
        removed = self.db(self.store.ledger.purge(RETENTION_DAYS, MAX_ROWS))
        if removed:
            self.log.info("sweeper: retention removed %d finished obligation(s)", removed)
        expired = self.db(self.store.ledger.drop_expired_receipts())
        if expired:
            self.log.info("sweeper: dropped %d status report(s) kept for sends never recorded (expired)", expired)
        kept_s = setting(self.config, "storage", "inbox_retention_days") * 86400
        answered = self.db(self.store.inbox.purge(kept_s))
        if answered:
            self.log.info("sweeper: retention removed %d answered inbox row(s)", answered)
        # A tool call's approval is kept as long as the messages that asked and answered it (docs/approvals.md).
        settled = self.db(self.store.approvals.purge(kept_s))
        if settled:
            self.log.info("sweeper: retention removed %d settled tool approval(s)", settled)
        # A finished background task's row (its result, a kept one's too) as long as its prompt's inbox row.
        finished = self.db(self.store.tasks.purge(kept_s))
        if finished:
            self.log.info("sweeper: retention removed %d finished background task(s)", finished)
        # After the rows: a file goes once no inbox row or transcript event names it (storage/media.py).
        swept = MediaCache(store_path(self.config).parent / "media").sweep(
            self.db(self.store.media.referenced()))
        if swept:
            self.log.info("sweeper: retention removed %d unreferenced media file(s)", swept)
        self.refresh_counts()
        self.after(setting(self.config, "delivery", "housekeeping_interval_s"), "housekeeping")
