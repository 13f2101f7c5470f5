"""actors/sessions/approval_flow.py, its pure parts: the step a turn goes on from (what ran and what was refused is
answered, the rest runs, in the model's order), the guard a profile gives its turns, the deadline's own inbox rows,
and the paused turn's question kept out of the history a later request is made of."""
from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from actors.approvals.rules import ApprovalSettings
from actors.messages import AWAITING_APPROVAL, MessageEvent, Source
from actors.profiles.profiles import Profile
from actors.sessions import turn as turns
from actors.sessions.approval_flow import (Continuation, expired_approval, expiry_message_id, guard_for, open_step,
                                           request_fields, settle)
from storage import Approval, ApprovalRequest, Store
from storage.inline import run_inline
from storage.sessions import TranscriptEvent

pytestmark = pytest.mark.timeout(30)

STEP = {"role": "assistant", "content": "Let me look.", "tool_calls": [
    {"id": "c0", "type": "function", "function": {"name": "clock", "arguments": "{}"}},
    {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "1+1"}'}},
    {"id": "c2", "type": "function", "function": {"name": "files__delete", "arguments": ""}}]}
APPROVAL = Approval("AbCdEfGhIjKl-_78", "7KQ2", "default.fake.dm.chat-1", "t1", "c1", "calculator",
                    '{"expression": "1+1"}', "0" * 64, "fake", "a", "chat", 100.0, 700.0, "approved",
                    step=json.dumps(STEP))
GUARDED = Profile("default", "", "queue", approvals=ApprovalSettings(("calculator", "files.*")))


def result(call_id: str, text: str, turn_id: str = "t1") -> TranscriptEvent:
    return TranscriptEvent("tool", "tool_result", {"call_id": call_id, "result": text}, turn_id)


def test_the_step_goes_on_with_what_ran_answered_and_the_rest_to_run_in_order():
    transcript = [result("c0", "12:00"), result("other", "not of this step")]
    step = open_step(APPROVAL, transcript)
    assert step.assistant_message == STEP
    assert step.answered == (("c0", "12:00"),)
    assert step.to_run == (("c1", "calculator", '{"expression": "1+1"}'), ("c2", "files__delete", "{}"))
    refused = open_step(APPROVAL, transcript + [result("c1", "Approval was denied", "t2")])   # the turn going on
    assert refused.answered == (("c0", "12:00"), ("c1", "Approval was denied"))
    assert refused.to_run == (("c2", "files__delete", "{}"),)


def test_a_profile_guards_its_turns_and_an_answered_call_runs_unasked():
    assert guard_for(Profile("plain", "", "queue")) is None
    guard = guard_for(GUARDED)
    assert guard.holds("c1", "calculator") and guard.holds("c2", "files__delete") and not guard.holds("c0", "clock")
    fields = request_fields(GUARDED, Continuation(APPROVAL, runs=True), [result("c0", "12:00")])
    assert not fields["approvals"].holds("c1", "calculator") and fields["approvals"].holds("c2", "files__delete")
    assert fields["open_step"].answered == (("c0", "12:00"),)
    refused = request_fields(GUARDED, Continuation(APPROVAL, runs=False), [])
    assert refused["approvals"].holds("c1", "calculator")
    assert request_fields(GUARDED, None, []).keys() == {"approvals"}


def test_the_gateways_own_rows_name_their_approval_and_no_other_row_does():
    message_id = expiry_message_id(APPROVAL.approval_id)
    assert expired_approval(message_id) == APPROVAL.approval_id
    assert expired_approval(expiry_message_id("x", "answered")) == "x"   # the operator's answer's row
    for other in ("approval::expired", "approval:x:clicked", "cron:daily:1700000000", "x:y:expired", ""):
        assert expired_approval(other) is None, other


def test_the_question_of_a_paused_turn_is_kept_out_of_later_requests():
    transcript = [TranscriptEvent("user", "message", {"text": "what is 1+1?"}, "t1"),
                  TranscriptEvent("assistant", "message", {"text": "Let me look.\n\nThe assistant wants to run ...",
                                                           "reason": AWAITING_APPROVAL}, "t1"),
                  TranscriptEvent("user", "approval_answer", {"text": "approve 7KQ2"}, "t2"),
                  TranscriptEvent("assistant", "message", {"text": "It is 2.", "reason": "complete"}, "t2")]
    assert turns.model_messages(transcript) == ({"role": "user", "content": "what is 1+1?"},
                                                {"role": "assistant", "content": "It is 2."})
    assert not turns.collectable(MessageEvent(Source("fake", "a"), "approve 7KQ2", "m1", 0.0))   # answered alone


@pytest.fixture
def cell(tmp_path):
    """What ``settle`` uses of a session cell: its key, its record and its shard's inline store, on a real file."""
    loop = asyncio.new_event_loop()
    store = loop.run_until_complete(Store.open(tmp_path / "gateway.db", inline=True))
    key = "default.fake.dm.chat-1"
    info = run_inline(store.sessions.get_or_create(key, {"platform": "fake", "chat_id": "a"}))
    yield SimpleNamespace(key=key, info=info, store=store, db=run_inline, secrets=["sk-configured-0123456789"])
    loop.run_until_complete(store.close())
    loop.close()


def asked(cell, call_id: str, arguments: str = '{"expression": "1+1"}') -> Approval:
    return cell.db(cell.store.approvals.ask(ApprovalRequest(cell.key, "t1", call_id, "calculator", arguments, "fake",
                                                            "a", 600.0, step=json.dumps(STEP)))).approval


def results(cell) -> list:
    return [(e.turn_id, e.payload["call_id"], e.payload["result"]) for e in
            cell.db(cell.store.sessions.load(cell.info.session_id)) if e.kind == "tool_result"]


def test_an_approved_call_is_claimed_once_and_a_claimed_one_is_never_run_again(cell):
    approval = asked(cell, "c1")
    approval = cell.db(cell.store.approvals.answer(approval.approval_id, "approve", "fake:user")).approval
    first = settle(cell, approval, "t2")
    assert first.runs and results(cell) == []
    again = settle(cell, approval, "t3")             # the same turn resumed after a crash: the call was claimed
    assert not again.runs and again.approval.state == "done" and again.approval.outcome == "cut"
    [(turn_id, call_id, text)] = results(cell)
    assert (turn_id, call_id) == ("t3", "c1") and "whether it completed is unknown" in text
    settle(cell, approval, "t4")                       # told once: a third life adds nothing
    assert len(results(cell)) == 1


def test_a_denied_or_expired_call_gets_its_refusal_once(cell):
    denied = asked(cell, "c1")
    cell.db(cell.store.approvals.answer(denied.approval_id, "deny", "fake:user"))
    expired = asked(cell, "c2")
    cell.db(cell.store.approvals.expire_due(now=expired.deadline))
    for approval in (denied, expired, denied, expired):
        assert not settle(cell, approval, "t2").runs
    assert [(call_id, text.split(";")[0]) for _t, call_id, text in results(cell)] == [
        ("c1", "Approval was denied for this call of calculator"),
        ("c2", "No one answered the request to run calculator within 10 minutes")]


def test_a_refused_calls_arguments_are_kept_without_a_secret(cell):
    approval = asked(cell, "c1", '{"expression": "sk-configured-0123456789"}')
    cell.db(cell.store.approvals.answer(approval.approval_id, "deny", "fake:user"))
    settle(cell, approval, "t2")
    [call] = [e for e in cell.db(cell.store.sessions.load(cell.info.session_id)) if e.kind == "tool_call"]
    assert "sk-configured" not in call.payload["arguments"] and "[redacted]" in call.payload["arguments"]
