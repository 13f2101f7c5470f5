"""The stream consumer cell: one reply in flight, from the model's timeline to the platform's (docs/design.md
§2.5). A cell of the session's shard (supervision/cell.py), started when the turn begins.

Phase (``ReplyPhase``):
  STREAMING -> FINISHING   TurnEnd came: the final text is cut into its chunks, recorded, and shown part by part
  STREAMING | FINISHING -> DONE   delivered, given up, or another consumer took the reply over: ReplyDone to the
                           session (unless taken over), and the cell stops
Whether previews are shown is a mode beside the phase (``PreviewMode``), set at start and changed once at most:
  LIVE -> FALLBACK         edits keep failing (or a final edit was refused for good): the final text goes as new
  FINAL_ONLY -> FALLBACK   messages, and the previews it replaces are deleted at the end
FINAL_ONLY is a platform without edits or a profile that does not stream: the final text goes out whole.
PARAGRAPHS (no edits, the profile's ``stream_without_edits = "paragraphs"``): the answer goes in paragraph-sized
parts as it is written (what each shows recorded first: Claim.record_streamed), the rest at the end; tool progress
stays on the typing indicator. Resumed after a crash, the parts sent stay, and a new answer not beginning with them
is sent whole after them, marked (paragraph_parts.py; a keyed send's key names its content).

State: the answer, tool line, final text and files (``ReplyText``), the parts on the platform and what each shows
(``PlacedParts``), the operation in flight (``InFlight``: one at a time), the claim (``Claim``), edits failed in a
row, since when no adapter. Facts beside the phase, each independent of it: a pump asked to ignore the throttle
(``force``: Flush), the final chunks recorded in the ledger (``chunks_recorded``), a wake-up for the end of the edit
interval armed (``edit_due_armed``), pumps in a row held back by unavailable storage (``storage_waits``).

Messages it takes:
  StreamBatch   events of the turn, in batch order (Thespian does not order messages between actors: batches that
                arrive early are held until their turn)
  OpResult      the answer to the operation in flight (the adapter already waited out flood errors)
  Flush         drain / shutdown: show the latest text now, whatever the throttle says
  timers        pump (the throttle's next slot, or a retry), typing, op_timeout
Messages it sends: PlatformOp to the adapter (the reply's parts; typing and status reactions: reply_status.py),
ReplyDone to the session (a reply it delivered goes to plugins' on_delivery hooks too); then it stops.
DirectoryWanted to its shard when no adapter was named for it for [sessions] answer_bound_s (a StalledReply).

Delivery (G3): before its first message leaves, the reply is an obligation in the ledger; each part's message id is
recorded the moment the platform returns it. A consumer started again for the same turn (the previous one died)
finds those parts and edits them into place, so the chat never sees the reply twice. At the end the final text is
recorded (set_chunks) before the final edits, so the sweeper can finish them if this process dies now. Ledger
failures: reply_claim.py. A final edit refused for good sends the rest as new messages (the previews they replace
are deleted once all is shown); a file refused for good becomes a line in its place (reply_files.py).

The ambiguous send: each send's part index is committed as the obligation's send intent by the adapter just before
the request leaves, and the platform's id replaces it with the answer (PlatformOp.ledger). A consumer whose claim
finds an intent left by a dead owner, or whose adapter died with a send in flight, cannot know whether that message
exists: where the adapter can look for it (``Claim.lost``: Telegram private chats) it asks first (PlatformOp
"find_lost"); otherwise, where the platform has no idempotency key, it puts the one-line [sessions] resent_marker
on the reply's first part (every chunk is cut with room for it), so the reader can tell the re-sent answer from an
unfinished copy above it. A send unanswered for SEND_SILENCE_S is taken for lost the same way.
"""
from __future__ import annotations

import dataclasses
import enum
import itertools
import time
from dataclasses import dataclass
from typing import Any

from actors.messages import ConsumerArgs, LostSend, OpResult, PlatformOp, ReplyDone, StalledReply, StreamBatch
from actors.adapters.pacing import LENGTH_FUNCTIONS, chunk_limit, resent_marker
from actors.media.outgoing import unsent_line
from actors.sessions.paragraph_parts import ParagraphParts
from actors.sessions.placed_parts import SUPERSEDED, PlacedParts
from actors.sessions.reply_files import FinalCut, file_of, is_file, marked_at, marker_index, send_fields
from actors.sessions.chunking import split_message
from actors.sessions.reply_text import ReplyText
from actors.hooks.points import tell_delivered
from actors.sessions.op_failures import (MAX_OP_RETRIES, OP_TIMEOUT_S, RETRY_STEP_S, SEND_SILENCE_S, AdapterWait,
                                        after_op_failure, after_silence)
from common.redact import configured_secrets, redact
from actors.adapters import registry
from actors.sessions.edit_throttle import EditThrottle
from actors.sessions.reply_claim import Claim, LostClaim, WaitForStorage, steps_aside
from actors.sessions.reply_status import ReplyStatus, reply_reactions
from supervision.storage_access import CellStoreUser
from supervision.cell import Cell
from common.config import setting
from common.cluster import on_worker

STORAGE_WAIT_S = (0.5, 5.0)   # retry delays while storage is unavailable: first, then the longest


class ReplyPhase(enum.StrEnum):   # str-valued: the value is what the logs say
    STREAMING = "streaming"
    FINISHING = "finishing"
    DONE = "done"


class PreviewMode(enum.StrEnum):
    LIVE = "live"               # previews of the answer so far, edited into place as the throttle allows
    FINAL_ONLY = "final_only"   # no previews: the platform has no edits, or the turn's profile does not stream
    FALLBACK = "fallback"       # edits kept failing: no more previews; the final text goes as new messages
    PARAGRAPHS = "paragraphs"   # no edits: each complete paragraph goes as a message of its own as it is written


@dataclass(frozen=True)
class InFlight:
    """The one operation sent to the adapter and not answered yet."""
    op_id: str
    action: str       # PlatformOp.action: send | edit | delete | find_lost
    index: int        # the part it is about (SUPERSEDED: the oldest superseded preview)
    text: Any         # what the part shows once it succeeds (None for a delete)
    adapter: Any      # the adapter's address it went to: a restarted adapter never answers it


class StreamConsumer(CellStoreUser, Cell):
    uses_bridge = True

    def __init__(self):
        super().__init__()
        self.expected, self.held = 0, {}
        self.text = ReplyText()                 # the answer so far, the tool line, the final text (reply_text.py)
        self.placed = PlacedParts()             # the reply's parts on the platform, and what each shows
        self.in_flight: InFlight | None = None
        self.ops = itertools.count(1)
        self.claim: Claim | None = None           # the ledger side of this reply (reply_claim.py)
        self.edit_failures, self.retries = 0, 0
        self.session, self.phase, self.mode = None, ReplyPhase.STREAMING, PreviewMode.LIVE
        # force: the next pump ignores the throttle; chunks_recorded: the final chunks are in the ledger as shown
        self.force, self.chunks_recorded = False, False
        self.storage_waits = 0                  # pumps in a row held back by unavailable storage
        self.edit_due_armed = False             # a wake-up for the end of the edit interval is coming
        self.adapter_wait: AdapterWait | None = None   # since when the directory names no adapter for this reply
        self.refused_files: dict[int, str] = {}  # file parts the platform refused -> the line shown in their place
        self.marker_at: int | None = None        # the part that carries the re-sent mark (reply_files.marker_index)
        self.final_cut = FinalCut()              # the final text's parts, cut once for every pump that wants them
        self.paragraphs: ParagraphParts | None = None   # PARAGRAPHS mode: the parts as the answer is written

    def on_start(self, args: ConsumerArgs) -> None:
        self.args = args
        self.text.tool_progress = args.tool_progress
        self.pacing = registry.reply_pacing(self.config, args.adapter, args.platform, stream=args.stream)
        self.mode = PreviewMode.LIVE if self.pacing.supports_edit else PreviewMode.FINAL_ONLY
        self.length, self.marker = LENGTH_FUNCTIONS[self.pacing.length], resent_marker(self.config)
        self.chunk_limit = chunk_limit(self.pacing, self.length, self.marker)
        self.throttle = EditThrottle(self.pacing)
        if (paragraphs := ParagraphParts.for_reply(args, self.pacing, self.length, self.marker)) is not None:
            self.mode, self.paragraphs = PreviewMode.PARAGRAPHS, paragraphs
        self.adapter_wait = AdapterWait(setting(self.config, "sessions", "answer_bound_s"))
        self.secrets = configured_secrets(self.config)
        self.open_store()
        self.claim = Claim(args, self.store, self.db, self.log, self.name, self.report, records_sends=on_worker(),
                           pacing=self.pacing)
        self.status = ReplyStatus(args, self.pacing, reply_reactions(args))
        if (first := self.status.first_typing_after()) is not None:
            self.after(first, "typing")
        self.to_adapter(self.status.started())

    def on_stop(self) -> None:
        self.close_store()

    # ---------------------------------------------------------------------------------------------- events
    def on_StreamBatch(self, batch: StreamBatch, sender) -> None:
        self.session = sender
        self.held[batch.seq] = batch.events
        while self.expected in self.held:
            for event in self.held.pop(self.expected):
                self.apply(event)
            self.expected += 1
        self.pump()

    def apply(self, event) -> None:
        if self.text.apply(event):
            self.phase = ReplyPhase.FINISHING

    # ----------------------------------------------------------------------------------------------- pacing
    def wanted_chunks(self) -> list | None:
        if self.phase is ReplyPhase.FINISHING:   # the text's chunks, then a part per file (reply_files.py)
            if self.paragraphs is not None:   # the parts sent as it was written, then the rest
                parts = self.paragraphs.finished(self.text.final_text(), self.text.files, self.pacing, self.placed.ids)
            else:
                parts = self.final_cut.parts(self.text.final_text(), self.text.files, self.pacing, self.length,
                                             self.chunk_limit)
            return self.marked([self.refused_files.get(i, part) for i, part in enumerate(parts)])
        if self.paragraphs is not None:   # the complete paragraphs so far
            return self.marked(self.paragraphs.streaming(redact(self.text.answer, self.secrets),
                                                         self.placed.ids)) or None
        if self.mode is not PreviewMode.LIVE:
            return None  # no previews: the final text goes out whole
        preview = self.text.preview(self.secrets)
        return None if preview is None else self.marked(split_message(preview, self.chunk_limit, self.length))

    def marked(self, chunks: list) -> list:
        if not self.claim.ambiguous or self.pacing.idempotent_send or not chunks:
            return chunks
        self.marker_at = marker_index(len(chunks), self.placed.ids, self.pacing.supports_edit, self.marker_at)
        return marked_at(chunks, self.marker_at, self.marker)

    def pump(self) -> None:
        try:
            self._pump()
            self.storage_waits = 0
        except LostClaim as exc:
            self.step_aside(exc)
        except WaitForStorage as exc:
            self.wait_for_storage(exc)

    def wait_for_storage(self, why) -> None:
        self.storage_waits += 1
        if self.storage_waits == 1 or self.storage_waits % 20 == 0:
            self.log.warning("%s: the reply waits for storage (%d tries): %s", self.name, self.storage_waits, why)
        self.after(min(STORAGE_WAIT_S[1], STORAGE_WAIT_S[0] * self.storage_waits), "pump")

    def _pump(self) -> None:
        if self.in_flight is not None or self.phase is ReplyPhase.DONE or self._exiting:
            return
        final = self.phase is ReplyPhase.FINISHING
        throttled = not final and not self.force and self.placed.ids and self.paragraphs is None   # edits only
        if throttled and (wait := self.throttle.next_edit_at() - time.monotonic()) > 0:
            # Too soon after the last edit: one wake-up when the interval is over (not one per batch that comes in
            # meanwhile), and nothing rendered until then.
            if not self.edit_due_armed:
                self.edit_due_armed = True
                self.after(wait, "edit_due")
            return
        chunks = self.wanted_chunks()
        if chunks is None:
            return
        if throttled and not self.throttle.should_edit(time.monotonic(), "".join(chunks)):
            return   # not enough new to show: the stream's next batch pumps again (a timer here would spin)
        if self.claim.oid is None:
            if not self.take_claim():
                return
            chunks = self.wanted_chunks() or []   # drawn again: the claim may have found it marked, or sent in part
        if final and self.claim.lost is not None and self.claim.lost >= len(chunks):
            # The final text has no part where the lost copy was: nothing to find it for, so it stays, marked.
            self.claim.lost = None
            self.claim.mark("a lost send's copy may be in the chat beyond the final text's parts")
            self.after_marking()
            chunks = self.wanted_chunks()
        if final and self.claim.fence is not None and not self.chunks_recorded:
            self.claim.call("set_chunks",
                            self.store.ledger.set_chunks(self.claim.oid, self.claim.fence, chunks))
            self.chunks_recorded = True
        self.claim.record_streamed(self.paragraphs)   # PARAGRAPHS: what each part shows, before a new one leaves
        step = self.placed.next_step(chunks, final, self.pacing.supports_edit)
        if step is not None:
            self.start_op(*step)
        elif final:
            self.finish(True, "delivered")

    def start_op(self, index: int, text: str | None) -> None:
        a, finishing = self.args, self.phase is ReplyPhase.FINISHING
        op_id = self.claim.op_id(a.turn_id, next(self.ops))   # never one an earlier life used (Claim.op_id)
        if text is None:
            target = self.placed.superseded[0] if index == SUPERSEDED else self.placed.ids[index]
            op = PlatformOp(op_id, "delete", a.chat_id, message_id=target, thread_id=a.thread_id)
        elif index in self.placed.ids and not (self.mode is PreviewMode.FALLBACK and finishing):
            op = PlatformOp(op_id, "edit", a.chat_id, text, message_id=self.placed.ids[index],
                            thread_id=a.thread_id, chat_type=a.chat_type, final=finishing)
        elif self.claim.lost == index and is_file(text):   # a file's lost copy cannot be found by its text
            self.claim.lost = None
            return self.send_unresolved(index, "a file's send is unresolved", text) or self.pump()
        elif self.claim.lost == index:
            # Before this part goes again: is the copy its lost send left in the chat? (lost_copies.py)
            op = PlatformOp(op_id, "find_lost", a.chat_id, text, thread_id=a.thread_id,
                            chat_type=a.chat_type, final=finishing,
                            ledger=(self.claim.oid, self.claim.fence, index))
        else:
            key = self.claim.send_key(index, text, self.pacing.idempotent_send, self.paragraphs is not None)
            op = PlatformOp(op_id, "send", a.chat_id, thread_id=a.thread_id, chat_type=a.chat_type,
                            reply_to=a.reply_to if index == 0 else None, final=finishing,
                            idempotency_key=key, **send_fields(text),
                            ledger=self.claim.send_ledger(index))
        if finishing and op.action in ("send", "edit") and self.text.kind():   # a failed turn's text says so
            op = dataclasses.replace(op, kind=self.text.kind())
        adapter = self.directory.adapter(a.adapter) if self.directory is not None else None
        if adapter is None:
            self.without_adapter()
            return
        self.adapter_wait.found()
        if op.action == "send":   # the intent is committed (by the adapter: op.ledger), the id with the answer
            self.claim.before_send(index)
        self.in_flight, self.force = InFlight(op_id, op.action, index, text, adapter), False
        self.send(adapter, op)
        self.after(OP_TIMEOUT_S, "op_timeout", (op_id, 1))

    def without_adapter(self) -> None:
        """The adapter is restarting (the next directory names it) or, past the liveness bound, something is lost."""
        step = self.adapter_wait.missing(time.monotonic())
        if step == "report":
            self.log.warning("%s: the reply has waited %.0fs for adapter %r, which the directory does not name "
                             "(claim %s, parts %d, %s); asking for the directory again", self.name,
                             self.adapter_wait.bound_s, self.args.adapter, (self.claim.oid or "none")[:12],
                             len(self.placed.ids), self.phase.value)
            self.report(StalledReply(self.args.adapter, "no_adapter"))
        if step != "wait":
            self.want_directory(f"a reply waits for adapter {self.args.adapter!r}")
        self.after(0.5, "pump")

    def on_timer_op_timeout(self, data) -> None:
        """No answer yet (op_failures.after_silence): a send taken for lost is unresolved (send_unresolved)."""
        op_id, waited = data   # waited: OP_TIMEOUT_S periods so far
        if self.in_flight is None or self.in_flight.op_id != op_id:
            return
        step = after_silence(self.in_flight.action, waited * OP_TIMEOUT_S)
        if step == "wait":
            self.after(OP_TIMEOUT_S, "op_timeout", (op_id, waited + 1))
            return
        index, part, self.in_flight = self.in_flight.index, self.in_flight.text, None
        if step == "lost":
            self.log.warning("%s: no answer to the send of part %d in %gs (claim %s, parts %d, %s); taking it "
                             "for lost", self.name, index, SEND_SILENCE_S, (self.claim.oid or "none")[:12],
                             len(self.placed.ids), self.phase.value)
            self.report(LostSend(self.args.adapter, "unanswered"))
            self.send_unresolved(index, "a send got no answer", part)
        else:
            self.log.warning("%s: no answer to %s within %gs; sending it again", self.name, op_id, OP_TIMEOUT_S)
        self.pump()

    @steps_aside
    def on_directory(self, directory) -> None:
        """The adapter was restarted: what it had not answered is lost with it and goes again (a send: see below)."""
        self.to_adapter(None)
        if self.in_flight is not None and directory.adapter(self.args.adapter) != self.in_flight.adapter:
            if self.in_flight.action == "send":
                self.send_unresolved(self.in_flight.index, "the adapter died with a send in hand", self.in_flight.text)
            self.in_flight = None
            self.pump()
        elif self.adapter_wait.since is not None and directory.adapter(self.args.adapter) is not None:
            self.pump()   # a reply that waited for this directory (a fresh shard's first) goes now, not at its retry

    def send_unresolved(self, index: int, why: str, part) -> None:
        """A send of ``part`` may be in the chat: edited if its id reached the ledger, else looked for or marked."""
        if (message_id := self.claim.recorded_part(index)) is not None:
            self.placed.ids[index] = message_id   # shows what it showed when sent: the pump edits it into place
        else:
            self.claim.send_unresolved(index, why, searchable=not is_file(part))
            self.after_marking()

    def after_marking(self) -> None:   # a marked reply's recorded final chunks gain the marker, for the sweeper
        self.chunks_recorded = self.chunks_recorded and not self.claim.ambiguous

    def lost_copy_answered(self, index: int, text: str, result: OpResult) -> None:
        """The adapter looked for the copy a lost send of part ``index`` left: found (it shows ``text`` now, and is
        the part), never landed (the part goes as a plain send), or it could not tell (the reply is marked)."""
        if not result.ok and result.error_kind in ("retryable", "flood") and self.retries < MAX_OP_RETRIES:
            # The search is edits, safe to repeat: a dropped connection or a 429 storm is waited out, not marked.
            self.retries += 1
            self.after(max(result.retry_after, RETRY_STEP_S * self.retries), "pump")
            return
        self.claim.lost = None
        if not result.ok:
            self.claim.mark(f"the copy a lost send left could not be looked for ({result.error})")
            self.after_marking()
            self.pump()
            return
        self.report(LostSend(self.args.adapter, "never_landed" if result.message_id is None else "found"))
        if result.message_id is not None:
            self.placed.ids[index], self.placed.shown[index] = str(result.message_id), text
            if not result.recorded:
                self.claim.call("record_part", self.store.ledger.record_part(
                    self.claim.oid, self.claim.fence, index, str(result.message_id), replace=True))
        self.pump()

    @steps_aside
    def on_OpResult(self, result: OpResult, sender) -> None:
        if self.in_flight is None or result.op_id != self.in_flight.op_id:
            return
        action, index, text = self.in_flight.action, self.in_flight.index, self.in_flight.text
        self.in_flight = None
        if action == "find_lost" and result.error_kind not in ("lost_claim", "storage"):
            self.lost_copy_answered(index, text, result)
            return
        if result.ok:
            self.retries = 0
            if action == "send":
                replaced = self.placed.ids.get(index)
                if replaced is not None and replaced != str(result.message_id):
                    self.placed.superseded.append(replaced)   # the fallback sent anew: the preview goes at the end
                self.placed.ids[index] = str(result.message_id)
                if not result.recorded:   # the adapter could not record it (storage unavailable there)
                    self.claim.call("record_part", self.store.ledger.record_part(
                        self.claim.oid, self.claim.fence, index, str(result.message_id), replace=True))
                self.claim.intent = None
            if action == "delete" and index < 0:
                self.placed.superseded.pop(0)
            elif action == "delete":
                self.placed.ids.pop(index, None)
                self.placed.shown.pop(index, None)
            else:
                self.placed.shown[index] = text
                if not is_file(text):
                    self.throttle.record(time.monotonic(), text)
                self.edit_failures = 0
            if action == "send" and self.claim.ambiguous and self.pacing.idempotent_send:
                self.placed.shown.pop(index, None)   # the platform may have answered with the earlier copy: edit it
            self.pump()
            return
        self.failed(action, index, result, text)

    def failed(self, action: str, index: int, result: OpResult, part) -> None:
        if action == "send" and result.error_kind != "ambiguous":
            self.claim.send_refused(index)
        decision = after_op_failure(action, index, result.error_kind, result.retry_after, self.retries,
                                    self.phase is ReplyPhase.FINISHING, self.edit_failures, is_file(part))
        step = decision.step
        if step == "step_aside":
            raise LostClaim(f"{action} of part {index}: {result.error}")   # nothing was sent
        if step == "wait_storage":
            self.wait_for_storage(result.error)   # the adapter could not record the intent: nothing was sent
            return
        self.log.warning("%s: %s of part %d failed: %s %s", self.name, action, index, result.error_kind,
                         result.error)
        if step in ("retry", "retry_marked"):
            self.retries += 1
            if step == "retry_marked":
                # Looked for first where the platform allows; else the copy that goes now carries the re-sent mark
                # (the intent stays in the ledger until an id comes back, so any later owner marks its copy too).
                self.send_unresolved(index, "a send's outcome is unknown", part)
            self.after(decision.delay, "pump")
            return
        if step == "give_up":
            self.claim.call("mark_failed", self.store.ledger.mark_failed(
                self.claim.oid, self.claim.fence, result.error or str(result.error_kind)))
            self.finish(False, f"{action} failed: {result.error_kind}: {result.error}", ledger_done=True)
            return
        if step == "file_as_line":
            # The chat reads the platform's words only (never our method name or the HTTP status of the log line).
            why = f"the platform refused it ({result.reason})" if result.reason else "the platform refused it"
            self.refused_files[index] = unsent_line(file_of(part), why)
            self.chunks_recorded = False   # recorded again with the line in the file's place
        elif step == "drop_preview":
            self.placed.superseded.pop(0)
        elif step == "drop_part":
            self.placed.ids.pop(index, None)
        elif step == "resend_part":
            self.placed.ids.pop(index, None)
            self.placed.shown.pop(index, None)
        elif step == "edit_failed":
            self.edit_failures += 1
            if decision.fall_back:
                self.log.warning("%s: edits keep failing; the answer will be sent once, complete", self.name)
                self.mode = PreviewMode.FALLBACK
        elif step == "fall_back":
            self.mode = PreviewMode.FALLBACK   # the final text goes out as new messages
            self.placed.superseded.append(self.placed.ids.pop(index))
            self.placed.shown.pop(index, None)
        self.pump()

    def on_timer_pump(self, _data) -> None:
        self.pump()

    def on_timer_edit_due(self, _data) -> None:
        self.edit_due_armed = False
        self.pump()

    def on_timer_typing(self, _data) -> None:
        if (not self.placed.ids or self.paragraphs is not None) and self.phase is ReplyPhase.STREAMING:
            self.to_adapter(self.status.typing())
            self.after(self.status.typing_interval(), "typing")

    def to_adapter(self, hint: PlatformOp | None) -> None:
        """A hint beside the reply, held until the directory names the adapter (ReplyStatus.due)."""
        adapter = self.directory.adapter(self.args.adapter) if self.directory is not None else None
        for op in self.status.due(hint, adapter is not None):
            self.send(adapter, op)

    def take_claim(self) -> bool:
        """Claim the reply's obligation (Claim.claim); False if this consumer has nothing to send now."""
        outcome = self.claim.claim()
        if outcome == "claimed":
            if self.claim.oid != "unrecorded":
                self.placed.ids = dict(self.claim.parts)   # what an earlier attempt put on the platform
                self.marker_at = self.paragraphs and self.paragraphs.resume(self.claim.streamed, self.placed.ids)
            return True
        if outcome in ("delivered", "abandoned"):
            self.finish(outcome == "delivered", f"already {outcome}", ledger_done=True)
            return False
        self.after(0.5, "pump")   # another owner may still run, or won a race: look again in a moment
        return False

    def step_aside(self, exc: LostClaim) -> None:
        """Stop without a word to the session: the consumer that holds the claim now answers for this reply."""
        self.log.warning("%s: another consumer has taken this reply over; stopping: %s", self.name, exc)
        self.phase = ReplyPhase.DONE
        self.stop_self(clean=True)

    def finish(self, ok: bool, detail: str, ledger_done: bool = False) -> None:
        if self.phase is ReplyPhase.DONE:
            return
        self.phase = ReplyPhase.DONE
        ids = tuple(self.placed.ids[i] for i in sorted(self.placed.ids))
        if ok and not ledger_done and self.claim.fence is not None:
            try:
                self.claim.call("mark_delivered", self.store.ledger.mark_delivered(self.claim.oid, self.claim.fence))
            except LostClaim as exc:   # shown whole all the same; the new owner finds it so and says delivered
                self.log.warning("%s: %s", self.name, exc)
            tell_delivered(self.config, self.bridge, self.args, self.text.final_text(), ids)   # plugins' hooks
        self.to_adapter(self.status.finished(ok and self.text.reason in ("complete", "")))
        if self.session is not None:
            self.send(self.session, ReplyDone(self.args.turn_id, ok, detail, ids))
        self.stop_self(clean=True)

    def flush(self) -> int:
        self.force = True
        self.pump()
        return self.pending_work()

    def pending_work(self) -> int:
        return 0 if self.phase is ReplyPhase.DONE else 1
