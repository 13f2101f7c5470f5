"""A session's tool approvals (docs/approvals.md): a turn whose model calls a guarded tool ends with the question,
and the answer (a typed ``approve CODE`` / ``deny CODE``, the operator's, or the deadline) starts the turn that goes
on from the paused step. A part of the Session cell (session.py), kept apart; its functions take the cell (and
``operator_answer`` its shard).

  turn T1 (inbox row U) --ApprovalNeeded, TurnEnd(awaiting_approval)--> the approval is asked (a pending row) in
      the same handler as T1's answer (its text so far, then the question) is written: one transaction, so a crash
      leaves both or neither (neither: T1 is resumed as any cut turn, G8)
  T1's answer is delivered as U's reply (the ledger, G3); U is done; the session is idle while the question waits
  an answer row V (typed, or the gateway's own for the deadline or the operator's answer) --answer (first wins)-->
      turn T2 answers V: the approved call's execution is claimed (start_execution) and the agent goes on from
      the step (OpenStep), or the refusal is written as the call's result (finish, with its transcript event)
      and the agent goes on with it

What survives kill -9: the approval row and the transcript. T2 is a turn like any other (begin_turn on V): a restart
resumes it (``resume``) from what storage says: an approved call not yet claimed runs; one claimed (``executing``)
is never run again, the model is told its outcome is unknown (``finish(cut)``: once). A deadline timer is lost with
the cell and armed again from the stored deadlines when the session next starts (``arm``); its shard starts it
once a deadline is past (shard.py). The operator's answer and its inbox row commit together (``operator_answer``).
"""
from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from typing import Optional

from actors.adapters.registry import REGISTRY
from actors.agents.base import ApprovalGuard, OpenStep
from actors.approvals.answers import (Answerer, answer_notice, model_result, parse_text_answer, question_text,
                                      refusal_for)
from actors.approvals.rules import needs_approval
from actors.messages import (APPROVAL_VERDICTS, AWAITING_APPROVAL, ApprovalAnswer, ApprovalAnswerDone, ApprovalNeeded,
                             MessageEvent, Source, ToolCallFinished)
from actors.sessions import turn as turns
from storage import Approval, ApprovalRequest, InboundItem
from storage.approvals import ApprovalState

ANSWER_EVENT = "approval_answer"        # transcript kind: the answer a turn goes on from (role user)
EXPIRY_PLATFORM = "approval"            # the inbox rows the deadline writes: platform and message id prefix
DEADLINE_TIMER = "approval_deadline"


@dataclass(frozen=True)
class Continuation:
    """What a turn goes on from: the approval (as settled) and, when its call runs now, its id (``runs``)."""
    approval: Approval
    runs: bool


def guard_for(profile, approved=()) -> Optional[ApprovalGuard]:
    """The agent's guard for a turn of ``profile`` (None: it guards no tool)."""
    if not profile.approvals.enabled:
        return None
    return ApprovalGuard(functools.partial(needs_approval, profile.approvals), frozenset(approved))


def open_step(approval: Approval, transcript: list) -> OpenStep:
    """The paused step, to go on from: the stored message that asked for the calls; every call of it whose result
    the transcript holds (it ran before the question, or its refusal was written) is answered, the others run, in
    the model's order."""
    message = json.loads(approval.step)
    calls = [(c["id"], c["function"]["name"], c["function"].get("arguments") or "{}")
             for c in message.get("tool_calls") or ()]
    ids = {call_id for call_id, _name, _arguments in calls}
    results = {e.payload.get("call_id"): e.payload.get("result", "") for e in transcript
               if e.kind == "tool_result" and e.payload.get("call_id") in ids}
    return OpenStep(message, tuple((c, results[c]) for c, _n, _a in calls if c in results),
                    tuple(call for call in calls if call[0] not in results))


def request_fields(profile, continuation: Optional[Continuation], transcript: list) -> dict:
    """What a turn's agent request takes of approvals: the guard, and the step it goes on from."""
    if continuation is None:
        return {"approvals": guard_for(profile)}
    approval = continuation.approval
    return {"approvals": guard_for(profile, [approval.call_id] if continuation.runs else []),
            "open_step": open_step(approval, transcript)}


def expiry_message_id(approval_id: str, why: str = "expired") -> str:
    """The message id of the inbox row the gateway writes for an approval (``why``: its deadline passed, or the
    operator ``answered``): one per approval and why, so a repeat is the inbox's duplicate."""
    return f"{EXPIRY_PLATFORM}:{approval_id}:{why}"


def expired_approval(message_id: str) -> Optional[str]:
    """The approval id an inbox row of the gateway's own for an approval names, or None for any other row."""
    kind, _, rest = message_id.partition(":")
    approval_id, _, suffix = rest.partition(":")
    return approval_id if kind == EXPIRY_PLATFORM and suffix in ("expired", "answered") and approval_id else None


def own_row(info, approval_id: str, why: str) -> InboundItem:
    """The inbox row of the gateway's own that makes a session go on from an approval, in its chat (``info``: the
    session's record, whose source says where the chat is)."""
    known = {name: value for name, value in dict(info.source).items() if name in Source.__dataclass_fields__}
    message_id = expiry_message_id(approval_id, why)
    event = MessageEvent(Source(**known), "", message_id, time.time(), internal=True)
    return InboundItem(info.session_key, EXPIRY_PLATFORM, message_id, event.to_payload())


# ------------------------------------------------------------------------------------------------- asking
def needed(turn: turns.Turn, event: ApprovalNeeded) -> None:
    """The agent stopped before a held call: asked about once its TurnEnd comes (``paused``), with the answer."""
    turn.question = event


def paused(session, turn: turns.Turn, answer: str) -> None:
    """The run ended awaiting approval: ask (the row) and write the answer so far with the question, together."""
    event: ApprovalNeeded = turn.question
    source = turn.event.source
    settings = session.profiles.get(source.profile).approvals
    request = ApprovalRequest(session.key, turn.turn_id, event.call_id, event.name, event.arguments, source.platform,
                              source.chat_id, settings.timeout_s, settings.approvers, json.dumps(event.step))
    try:
        asked = session.db(session.store.approvals.ask(request))
        refused = asked.refused
    except ValueError as exc:   # out of bounds: the call is refused, and said so
        asked, refused = None, str(exc)
    if asked is None or asked.approval is None:
        text = model_result(event.name, "refused", reason=refused)
        not_run(session, turn.turn_id, ToolCallFinished(event.call_id, event.name, event.arguments, text, ok=False))
        session.end_turn(turns.with_note(answer, text), "complete")
        return
    question = question_text(asked.approval, buttons=has_buttons(session.config, source), secrets=session.secrets)
    session.end_turn(turns.with_note(answer, question), AWAITING_APPROVAL)
    arm(session)


def has_buttons(config: dict, source: Source) -> bool:
    """Whether the chat's platform shows Approve / Deny buttons (its capabilities): the question then says "Press
    Approve or Deny, or reply ...", and the adapter puts the buttons on the message that ends with it (the text is
    what the ledger keeps, so a send after a crash carries them too: actors/approvals/answers.py pressable_code)."""
    entry = REGISTRY.get(turns.platform_type(config, source))
    return entry is not None and entry.capabilities.buttons


def not_run(session, turn_id: str, refused: ToolCallFinished) -> None:
    """A call that will not run, with the result the model reads, in the transcript as every call is (redacted)."""
    session.db(session.store.sessions.append(session.info.session_id, turns.tool_events(
        turn_id, turns.redacted_tool_call(refused, session.secrets))))


def arm(session) -> None:
    """The timer for the earliest deadline of the session's waiting questions (none: no timer). One timer at a time
    (``approval_due``: when the one set fires), so asking often does not pile timers up."""
    waiting = session.db(session.store.approvals.pending_for(session.key))
    if not waiting:
        return
    due = min(a.deadline for a in waiting)
    if session.approval_due is None or due < session.approval_due:
        session.approval_due = due
        session.after(max(0.0, due - time.time()), DEADLINE_TIMER)


def deadline(session) -> None:
    """The timer: each question past its deadline is expired, and a row of the gateway's own put in the inbox for
    it (in the same handler: one transaction), so that its turn goes on like an answered one, even after a crash."""
    session.approval_due = None
    if session.info is None:
        return   # no conversation: no question can wait
    for approval in session.db(session.store.approvals.expire_due(session_key=session.key)):
        row = own_row(session.info, approval.approval_id, "expired")
        session.db(session.store.inbox.put(row.session_key, row.platform, row.platform_message_id, row.payload))
    arm(session)
    session.pump()


def operator_answer(shard, message: ApprovalAnswer) -> tuple[ApprovalAnswerDone, Optional[int]]:
    """The operator's answer, at the shard that hosts the session (its cell live or not): the answer and, when it
    wins, the inbox row that makes the session go on, in one transaction; the row's seq is the doorbell to ring."""
    key = message.session_key

    def done(ok: bool, detail: str) -> ApprovalAnswerDone:
        return ApprovalAnswerDone(key, message.action, ok, detail)
    if message.action not in APPROVAL_VERDICTS:
        return done(False, f"no such answer {message.action[:40]!r}; try one of {', '.join(APPROVAL_VERDICTS)}"), None
    approval = shard.db(shard.store.approvals.get(message.approval_id))
    info = shard.db(shard.store.sessions.current(key))
    if approval is None or approval.session_key != key or info is None:
        return done(False, f"no tool call {message.approval_id!r} waits for approval here"), None
    answered = shard.db(shard.store.approvals.answer(approval.approval_id, message.action, Answerer(operator=True).name,
                                                     enqueue=own_row(info, approval.approval_id, "answered")))
    return done(answered.won, answer_notice(answered)), answered.inbox_seq


# ------------------------------------------------------------------------------------------------ answering
def take_answer(session, seqs: list, event: MessageEvent) -> bool:
    """Whether the row is an answer to a question (then it is handled here: a turn goes on, or the answerer is
    told why not); False for any other message, which goes its usual way."""
    if event.internal:
        approval_id = expired_approval(event.platform_message_id)
        if approval_id is None:
            return False   # a row of the gateway's own that names no approval (a scheduled run)
        approval = session.db(session.store.approvals.get(approval_id))
        if approval is None or approval.session_key != session.key:
            session.db(session.store.inbox.done(seqs[-1]))
            return True
        go_on(session, seqs, event, approval)
        return True
    parsed = parse_text_answer(event.text)
    if parsed is None:
        return False
    waiting = session.db(session.store.approvals.pending_for(session.key))
    approval = session.db(session.store.approvals.by_code(session.key, parsed.code)) if parsed.code else None
    if approval is None:
        if not waiting:
            return False   # no question here: an ordinary message that starts with the word
        session.reply_turn(seqs, event, parsed.refusal or f"No question with the code {parsed.code} is waiting here.")
        return True
    source = event.source
    answerer = Answerer(source.platform, source.chat_id, source.user_id or "")
    if why := refusal_for(approval, answerer):
        session.reply_turn(seqs, event, why)
        return True
    answered = session.db(session.store.approvals.answer(approval.approval_id, parsed.verdict, answerer.name))
    if not answered.won:
        session.reply_turn(seqs, event, answer_notice(answered))
        return True
    go_on(session, seqs, event, answered.approval)
    return True


def go_on(session, seqs: list, event: MessageEvent, approval: Approval, turn_id: Optional[str] = None) -> None:
    """Start the turn that goes on from ``approval``'s step (``turn_id``: the turn a restart cut, resumed)."""
    resumed = turn_id is not None
    turn_id = turn_id or turns.new_turn_id()
    if not resumed:
        session.db(session.store.sessions.append(session.info.session_id, [
            {"role": "user", "kind": ANSWER_EVENT, "turn_id": turn_id,
             "payload": {"approval_id": approval.approval_id, "text": event.text}}]))
    continuation = settle(session, approval, turn_id)
    session.start_agent_turn(seqs, event, turn_id=turn_id, resumed=resumed, continuation=continuation)


def settle(session, approval: Approval, turn_id: str) -> Continuation:
    """Decide the call: claim an approved one's execution (it runs now), or write the result of one that will not
    run (denied, expired, or claimed before a crash: unknown), each at most once (storage's compare-and-set)."""
    store = session.store.approvals
    if approval.state == ApprovalState.APPROVED and session.db(store.start_execution(approval.approval_id)):
        return Continuation(approval, runs=True)
    current = session.db(store.get(approval.approval_id))
    outcome = {ApprovalState.DENIED: "denied", ApprovalState.EXPIRED: "expired",
               ApprovalState.EXECUTING: "cut"}.get(current.state)
    if outcome is not None and session.db(store.finish(approval.approval_id, outcome)):
        timeout_s = current.deadline - current.asked_at
        text = model_result(current.tool_name, outcome, timeout_s=timeout_s)
        not_run(session, turn_id, ToolCallFinished(current.call_id, current.tool_name, current.arguments, text,
                                                    ok=False))
        current = session.db(store.get(approval.approval_id))
    return Continuation(current, runs=False)


def ran(session, turn: turns.Turn, finished) -> None:
    """A tool call's result, written by the session: the approved call's outcome is given (done) with it."""
    continuation = turn.continuation
    if continuation is not None and continuation.runs and finished.call_id == continuation.approval.call_id:
        session.db(session.store.approvals.finish(continuation.approval.approval_id, "ok" if finished.ok else "failed"))


def resume(session, seqs: list, event: MessageEvent, turn_id: str, transcript: list) -> bool:
    """A turn a restart cut: when it went on from an approval, it goes on again from what storage says now."""
    answer = next((e for e in transcript if e.turn_id == turn_id and e.kind == ANSWER_EVENT), None)
    approval = session.db(session.store.approvals.get(answer.payload["approval_id"])) if answer else None
    if approval is None:
        return False
    go_on(session, seqs, event, approval, turn_id=turn_id)
    return True
