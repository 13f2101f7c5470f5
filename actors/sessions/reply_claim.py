"""The ledger side of a reply: ``Claim``, a component its stream consumer owns. It holds which obligation the reply
is, under which fence, and whether a copy of it may be in the chat unaddressed; it claims the obligation and runs
every ledger call of the consumer by the rules below. The consumer's pacing and platform operations are its own
(stream_consumer.py); what the claim needs of it is passed in: the cell's storage call, its log, its name, its
``report`` to the metrics actor.

* The claim gates every send (a send's intent is the adapter's to record, PlatformOp.ledger): when storage is
  unavailable (a full disk, a lock held from outside) it raises WaitForStorage and the consumer tries again later,
  so nothing leaves unrecorded.
* A write refused for a stale fence (or a state that moved on) means another consumer holds the reply now: it raises
  LostClaim, and the consumer stops without a word (``steps_aside``).
* Any other ledger failure is logged loudly and the reply goes on without it.
"""
from __future__ import annotations

import functools
import os

from actors.adapters.idempotency import life_token, op_id as numbered_op
from actors.messages import ConsumerArgs, LostSend
from actors.sessions.paragraph_parts import part_key
from actors.sessions.turn import REPLY_SLOT
from storage import IllegalTransition, StaleFence, StorageUnavailable, Target, is_owner_alive
from storage.ledger import ObligationState

CLAIM_WAITS = 20       # half-second waits for a live owner of the obligation before taking it over
_LOST = object()       # a claim step that another claimer won


class WaitForStorage(Exception):
    """A ledger write a send depends on could not be made: nothing leaves until it can."""


class LostClaim(Exception):
    """The ledger says another consumer has claimed this reply since (a newer fence) or finished it: this one must
    not send or edit anything more."""


def steps_aside(handler):
    """For handlers that write to the ledger: a LostClaim stops the consumer quietly instead of crashing it. (A send
    whose id could not be recorded left its intent behind: the new owner marks its own copy as re-sent.)"""
    @functools.wraps(handler)
    def guarded(self, *args):
        try:
            return handler(self, *args)
        except LostClaim as exc:
            self.step_aside(exc)
    return guarded


class Claim:
    """State: ``oid`` (None until claimed; "unrecorded" when the ledger failed and the reply goes on without it),
    ``fence`` (this claim's, for every later write), ``ambiguous`` (marked as re-sent), ``lost`` (a part whose
    lost send the adapter is to look for), ``intent`` (the part whose send intent the ledger may hold for us),
    ``waits`` (looks at a live owner's claim so far), ``parts`` (what the ledger knew was sent), ``streamed`` (what
    the parts sent as the answer was written show: Ledger.set_streamed)."""

    def __init__(self, args: ConsumerArgs, store, run, log, name: str, report=lambda fact: None, pacing=None,
                 records_sends: bool = False):
        self.args, self.store, self.run, self.log, self.name, self.report = args, store, run, log, name, report
        # Where the platform deduplicates sends by key (pacing idempotent_send) no mark is shown: the key keeps the
        # reply to one copy, and a reply "marked" in the ledger only has its parts edited again after each send.
        self.shows_mark = pacing is None or not pacing.idempotent_send
        finds_lost = pacing is not None and pacing.finds_lost_copies and args.chat_type == "dm"
        self.life = life_token()   # numbers this consumer's operations while it holds no fence (op_id)
        # This host's ledger is not the adapter's (a shard on a worker host: docs/distribution.md): a send's intent
        # and id are recorded here, not by the adapter, and its search for a lost copy (which reads the ledger it
        # has) is not asked for: a lost send is sent again under the re-sent mark.
        self.records_sends = records_sends
        self.finds_lost = finds_lost and not records_sends   # the adapter can find a lost copy (lost_copies.py)
        self.oid: str | None = None
        self.fence: int | None = None
        self.ambiguous = False                  # a copy of this reply we cannot address may be in the chat
        self.lost: int | None = None            # a part whose send's outcome is unknown, to be looked for first
        self.intent: int | None = None
        self.waits = 0
        self.parts: dict[int, str] = {}
        self.streamed: dict | None = None       # what the parts sent as the answer was written show (set_streamed)

    @property
    def recorded(self) -> bool:
        return self.oid not in (None, "unrecorded") and self.fence is not None

    def claim(self) -> str:
        """Claim the reply's obligation: "claimed" (``parts`` holds what is on the platform already), "delivered" or
        "abandoned" (finished before: nothing to do), "look_again" (another owner may still run, or won a race:
        try again in a moment). Raises WaitForStorage while storage is unavailable."""
        try:
            return self._claim()
        except WaitForStorage:
            self.oid, self.fence = None, None   # claim again from the start next time
            raise

    def _claim(self) -> str:
        a = self.args
        target = Target(a.adapter, a.chat_id, a.thread_id, a.reply_to)
        # Sends record their own intent, in the adapter just before they leave (PlatformOp.ledger).
        ob = self.call("record_obligation", self.store.ledger.record_obligation(
            a.session_key, a.inbound_ref, target, REPLY_SLOT, chunks=[], claim=True),
            needs_fence=False, gates_send=True)
        if ob is None:
            self.oid = "unrecorded"          # the ledger failed: deliver anyway, without it
            return "claimed"
        self.oid = ob.obligation_id
        if ob.state in (ObligationState.DELIVERED, ObligationState.ABANDONED):
            return ob.state
        # Someone else's claim: this call did not make it. Another process's owner (the sweeper, a consumer of a
        # shard on its way out) may still run: let it finish first. A claim of this very process that this call
        # did not make belongs to an earlier consumer cell of the turn, and that one is gone (a session asks for a
        # new consumer only once the old one has exited): its claim is taken over at once.
        others = ob.state == ObligationState.ATTEMPTING and not ob.claimed and ob.owner is not None
        if others and ob.owner.pid != os.getpid() and is_owner_alive(ob.owner) and self.waits < CLAIM_WAITS:
            self.waits += 1
            return self._look_again()
        if others:
            # A consumer of this turn died holding the claim: take it over through failed -> attempting, fenced by
            # the claim we saw. Another claimer (the sweeper) may win the race for it: then this consumer waits.
            if self._contested("mark_failed", self.store.ledger.mark_failed(self.oid, ob.fence, "taken over")) \
                    is _LOST:
                return self._look_again()
            ob = self.call("get", self.store.ledger.get(self.oid), False, True) or ob
        if ob.state in (ObligationState.PENDING, ObligationState.FAILED):
            # An intent the dead owner left is unresolved for good (the claim records it so in the ledger too).
            fence = self._contested("mark_attempting", self.store.ledger.mark_attempting(self.oid))
            if fence is _LOST:
                return self._look_again()
            self.fence = fence
        elif ob.state == ObligationState.ATTEMPTING and ob.claimed:
            self.fence = ob.fence   # our own claim, made just now
        else:
            return self._look_again()   # claimed by another meanwhile, or finished: never adopt a claim not ours
        self.parts = {int(i): str(m) for i, m in ob.parts.items()}
        self.streamed = ob.streamed
        self.ambiguous = ob.ambiguous
        if ob.send_intent is not None and not ob.ambiguous:
            self.send_unresolved(ob.send_intent, "an earlier attempt at this reply sent a message it never heard "
                                                 "back about")
        return "claimed"

    def op_id(self, owner: str, number: int) -> str:
        """The id of the consumer's operation ``number``: under this claim's fence, which every claim of the
        obligation increments, so a later life that edits the same reply never repeats it (a platform would take
        its edit for a retry of this one's: actors/adapters/idempotency.py); without a fence, under this life's
        token."""
        return numbered_op(owner, self.fence if self.recorded else self.life, number)

    def recorded_part(self, index: int) -> str | None:
        """The platform's id of part ``index`` if the ledger has it: a send whose answer reached its adapter, which
        recorded the id (send_records.py) and died before the answer reached this consumer. That message is the
        part, to be edited into place: neither looked for nor sent again."""
        if not self.recorded:
            return None
        ob = self.call("get", self.store.ledger.get(self.oid), needs_fence=False)
        found = None if ob is None else ob.parts.get(index)
        return None if found is None else str(found)

    def send_key(self, index: int, part, keyed: bool, by_content: bool) -> str | None:
        """The idempotency key of a send of ``part`` as part ``index`` where the platform deduplicates (``keyed``):
        the obligation's and the index, and the content too for a reply sent as it is written (``by_content``:
        paragraph_parts.part_key); None where there is none, or the reply is unrecorded."""
        if not keyed or not self.recorded:
            return None
        return part_key(self.oid, index, part) if by_content else f"{self.oid[:16]}.{index}"

    def record_streamed(self, parts) -> None:
        """What each part of a reply sent as it is written shows (``parts``: its ParagraphParts, or None for a reply
        that is not), committed before a new part leaves (a send waits for storage rather than leave unrecorded): a
        consumer started again for the turn learns from it what the chat may already have."""
        record = None if parts is None else parts.record()
        if record is not None and self.fence is not None and record != self.streamed:
            self.call("set_streamed", self.store.ledger.set_streamed(self.oid, self.fence, record), gates_send=True)
            self.streamed = record

    def send_ledger(self, index: int) -> tuple | None:
        """``PlatformOp.ledger`` of a send of part ``index``: the adapter records its intent and id (send_records.py);
        None where it cannot (the reply is unrecorded, or ``records_sends``: the id comes back unrecorded)."""
        return (self.oid, self.fence, index) if self.recorded and not self.records_sends else None

    def before_send(self, index: int) -> None:
        """From here until the answer the ledger may hold a send intent for part ``index``: the adapter's, or with
        ``records_sends`` this one, committed with the handler's transaction before the op leaves the shard
        (supervision/cell_host.py). A stale fence raises LostClaim (nothing is sent); storage down, WaitForStorage."""
        if self.records_sends:
            self.call("record_send_intent", self.store.ledger.record_send_intent(self.oid, self.fence, index),
                      gates_send=True)
        self.intent = index

    def send_refused(self, index: int) -> None:
        """The platform refused the send: nothing was sent, so the intent recorded here goes (the adapter clears its
        own)."""
        if self.records_sends and self.intent == index:
            self.call("clear_send_intent", self.store.ledger.clear_send_intent(self.oid, self.fence, index))

    def send_unresolved(self, index: int, why: str, searchable: bool = True) -> None:
        """A send of part ``index`` may or may not be in the chat. Where the adapter can look (and the part is
        text: a file's copy cannot be found by its text), the part's next operation is that search (``lost``);
        otherwise the reply is marked as re-sent from now on, in the ledger first (before a marked copy leaves, so
        a later owner marks its copies too)."""
        if self.ambiguous or self.lost is not None:
            return
        if self.finds_lost and self.recorded and searchable:
            self.log.info("%s: %s; looking for that copy in the chat", self.name, why)
            self.lost = index
            return
        self.mark(why)

    def mark(self, why: str) -> None:
        if self.ambiguous:
            return
        if self.shows_mark:
            self.log.warning("%s: %s; the reply is marked as re-sent", self.name, why)
        else:
            self.log.warning("%s: %s; the send goes again under the part's key, so the chat keeps one copy",
                             self.name, why)
        self.ambiguous = True
        self.call("mark_ambiguous", self.store.ledger.mark_ambiguous(self.oid, self.fence))
        self.report(LostSend(self.args.adapter, "marked"))

    def _contested(self, what: str, coro):
        """A claim step another claimer may win (a stale fence, a state that moved on): _LOST if it did."""
        try:
            return self.run(coro)
        except (StaleFence, IllegalTransition) as exc:
            self.log.info("%s: ledger %s lost a race for the claim (%s); looking again", self.name, what, exc)
            return _LOST
        except StorageUnavailable as exc:
            raise WaitForStorage(f"ledger {what}: {exc}") from None

    def _look_again(self) -> str:
        self.oid, self.fence = None, None
        return "look_again"

    def call(self, what: str, coro, needs_fence: bool = True, gates_send: bool = False):
        """One ledger call. ``gates_send``: a send must not leave without it, so unavailable storage raises
        WaitForStorage (the consumer tries again later) instead of letting the reply go on unrecorded."""
        if self.oid == "unrecorded" or (needs_fence and self.fence is None):
            coro.close()
            return None
        try:
            return self.run(coro)
        except (StaleFence, IllegalTransition) as exc:
            if needs_fence:   # the claim we held is no longer ours
                raise LostClaim(f"ledger {what}: {exc}") from None
            self.log.error("%s: ledger %s failed, continuing without it: %s: %s", self.name, what,
                           type(exc).__name__, exc)
            return None
        except StorageUnavailable as exc:
            if gates_send:
                raise WaitForStorage(f"ledger {what}: {exc}") from None
            self.log.error("%s: ledger %s failed, continuing without it: %s: %s", self.name, what,
                           type(exc).__name__, exc)
            return None
        except Exception as exc:  # noqa: BLE001 - a ledger failure never blocks a send (logged loudly)
            self.log.error("%s: ledger %s failed, continuing without it: %s: %s", self.name, what,
                           type(exc).__name__, exc)
            return None
