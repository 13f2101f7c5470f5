"""actors/sessions/approval_flow.py, its pure parts: the step a turn goes on from (what ran and what was refused is
answered, the rest runs, in the model's order), the guard a profile gives its turns, the deadline's own inbox rows,
and the paused turn's question kept out of the history a later request is made of."""
from __future__ import annotations

import json

import pytest

from actors.approvals.rules import ApprovalSettings
from actors.messages import AWAITING_APPROVAL, MessageEvent, Source
from actors.profiles.profiles import Profile
from actors.sessions import turn as turns
from actors.sessions.approval_flow import (Continuation, expired_approval, expiry_message_id, guard_for, open_step,
                                           request_fields)
from storage import Approval
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


def test_a_deadline_row_names_its_approval_and_no_other_row_does():
    message_id = expiry_message_id(APPROVAL.approval_id)
    assert expired_approval(message_id) == APPROVAL.approval_id
    for other in ("approval::expired", "approval:x:answered", "cron:daily:1700000000", "x:y:expired", ""):
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
