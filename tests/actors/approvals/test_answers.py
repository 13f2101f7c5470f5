"""actors/approvals/answers.py: typed answers read strictly, buttons that fit Telegram and name only their own
approval, who may answer, what each side is told, and what a session does next with a stored approval."""
from __future__ import annotations

import dataclasses

import pytest

from actors.approvals.answers import (HOW_TO_ANSWER, MAX_BUTTON_DATA_BYTES, MAX_SHOWN_ARGUMENTS, NOT_YOURS,
                                      OPERATOR_ONLY, UNKNOWN_BUTTON, Answerer, ButtonPress, NextStep, TextAnswer,
                                      answer_notice, button_data, buttons_for, click_notice, duration,
                                      pressable_code, model_result, next_step,
                                      parse_button_data, parse_text_answer, question_text, refusal_for,
                                      settled_question, shown_arguments)
from storage import Answered, Approval
from storage.approvals import new_approval_id

pytestmark = pytest.mark.timeout(30)

ASKED = Approval(approval_id="AbCdEfGhIjKl-_78", code="7KQ2", session_key="ops.telegram.dm.chat-1", turn_id="t1",
                 call_id="call_1", tool_name="files__delete", arguments='{"path": "/tmp/a"}',
                 arguments_sha256="0" * 64, platform="telegram", chat_id="1001", approvers="chat", asked_at=1000.0,
                 deadline=1600.0, state="pending")
IN_CHAT = Answerer("telegram", "1001", "9")


@pytest.mark.parametrize("text, expected", [
    ("approve 7KQ2", TextAnswer("approve", "7KQ2")),
    ("  DENY   7kq2 ", TextAnswer("deny", "7KQ2")),
    ("/approve 7KQ2", TextAnswer("approve", "7KQ2")),
    ("/Approve@my_bot 7kq2", TextAnswer("approve", "7KQ2")),
    ("approve", TextAnswer(refusal=HOW_TO_ANSWER)),
    ("approve 7KQ2 7KQ3", TextAnswer(refusal=HOW_TO_ANSWER)),
    ("approve 7KQ0", TextAnswer(refusal=HOW_TO_ANSWER)),             # 0 is never in a code
    ("deny the whole plan, please", TextAnswer(refusal=HOW_TO_ANSWER)),
    ("approve " + "7KQ2" * 40, TextAnswer(refusal=HOW_TO_ANSWER)),
    ("hello there", None),
    ("approved 7KQ2", None),                                          # only the two words
    ("approve7KQ2", None),
    ("", None),
])
def test_a_typed_answer_is_the_word_and_one_code_and_an_attempt_is_told_how(text, expected):
    assert parse_text_answer(text) == expected


def test_a_button_fits_telegram_and_reads_back_as_its_own_approval_only():
    for _ in range(50):
        approval_id = new_approval_id()
        for verdict in ("approve", "deny"):
            data = button_data(approval_id, verdict)
            assert len(data.encode()) <= MAX_BUTTON_DATA_BYTES
            assert parse_button_data(data) == ButtonPress(approval_id, verdict)
    assert button_data(ASKED.approval_id, "deny") == "ap:AbCdEfGhIjKl-_78:n"
    for forged in ("ap:AbCdEfGhIjKl-_78:x", "ap:AbCdEfGhIjKl-_7:y", "ap:AbCdEfGhIjKl-_789:y", "xp:AbCdEfGhIjKl-_78:y",
                   "ap:AbCdEfGhIjKl%_78:y", "ap:AbCdEfGhIjKl-_78:y ", None, "ap:" + "A" * 100 + ":y"):
        assert parse_button_data(forged) is None, forged
    with pytest.raises(ValueError):
        button_data("short", "approve")


def test_only_the_asking_chats_users_or_the_operator_may_answer():
    assert refusal_for(ASKED, IN_CHAT) == ""
    assert refusal_for(ASKED, Answerer("telegram", "1001", "8")) == ""            # anyone in the chat
    assert refusal_for(ASKED, Answerer("telegram", "2002", "9")) == NOT_YOURS     # the same user elsewhere
    assert refusal_for(ASKED, Answerer("discord", "1001", "9")) == NOT_YOURS      # the same id, another platform
    assert refusal_for(ASKED, Answerer("telegram", "1001", "")) == NOT_YOURS      # no user (a channel post)
    assert refusal_for(ASKED, Answerer(operator=True)) == ""
    operator_only = dataclasses.replace(ASKED, approvers="operator")
    assert refusal_for(operator_only, IN_CHAT) == OPERATOR_ONLY
    assert refusal_for(operator_only, Answerer(operator=True)) == ""
    assert IN_CHAT.name == "telegram:9" and Answerer(operator=True).name == "operator"


def test_the_answerer_is_told_whether_their_answer_counted_or_what_came_first():
    approved = dataclasses.replace(ASKED, state="approved", answer="approve", answered_by="telegram:9")
    assert answer_notice(Answered(True, approved)) == "Approved: files.delete runs now."
    denied = dataclasses.replace(ASKED, state="denied", answer="deny", answered_by="operator")
    assert answer_notice(Answered(True, denied)) == "Denied: files.delete will not run."
    assert answer_notice(Answered(False, approved)) == "Already answered: approved by telegram:9."
    assert answer_notice(Answered(False, dataclasses.replace(denied, state="done", outcome="denied"))) == \
        "Already answered: denied by the operator."
    expired = dataclasses.replace(ASKED, state="expired")
    assert answer_notice(Answered(False, expired)) == "This question expired at 00:26 UTC; files.delete was not run."
    assert answer_notice(Answered(False, None)) == UNKNOWN_BUTTON
    withdrawn = dataclasses.replace(ASKED, state="done", outcome="withdrawn")
    assert answer_notice(Answered(False, withdrawn)) == ("This question was withdrawn when the conversation was "
                                                         "reset; files.delete was not run.")


def test_the_question_shows_the_call_without_secrets_and_says_how_to_answer():
    text = question_text(ASKED, buttons=False)
    assert text == ('The assistant wants to run files.delete with {"path": "/tmp/a"}. Reply \u201capprove 7KQ2\u201d '
                    'or \u201cdeny 7KQ2\u201d (within 10 minutes).')
    assert question_text(ASKED, buttons=True).endswith('Press Approve or Deny, or reply \u201capprove 7KQ2\u201d or '
                                                       '\u201cdeny 7KQ2\u201d (within 10 minutes).')
    operator_only = question_text(dataclasses.replace(ASKED, approvers="operator"), buttons=False)
    assert operator_only.endswith("It waits for the operator's approval (within 10 minutes).")
    assert "7KQ2" not in operator_only
    secret = "sk-live-0123456789abcdefghij"
    with_secret = dataclasses.replace(ASKED, arguments='{"token": "' + secret + '", "x": "' + "y" * 1000 + '"}')
    shown = question_text(with_secret, buttons=False, secrets=[secret])
    assert secret not in shown and secret[:12] not in shown and "[redacted]" in shown
    assert len(shown_arguments(with_secret.arguments, [secret])) == MAX_SHOWN_ARGUMENTS
    assert shown_arguments("{\n  \"a\":\n 1}") == '{ "a": 1}'


def test_the_model_is_told_why_a_call_did_not_run():
    assert model_result("files__delete", "denied") == "Approval was denied for this call of files.delete; it was " \
                                                      "not run."
    assert "within 10 minutes; it was not run" in model_result("calculator", "expired", timeout_s=600)
    cut = model_result("files__delete", "cut")
    assert "whether it completed is unknown" in cut and "Check before calling it again" in cut
    assert model_result("clock", "refused", reason="its arguments are too large to show") == \
        "clock needs approval, but its arguments are too large to show; it was not run."
    with pytest.raises(ValueError):
        model_result("clock", "ok")
    assert [duration(s) for s in (1, 90, 600, 7199, 86400)] == ["1 second", "90 seconds", "10 minutes",
                                                                 "120 minutes", "24 hours"]


@pytest.mark.parametrize("state, now, step", [
    ("pending", 1000.0, NextStep("wait", 600.0)),
    ("pending", 1599.5, NextStep("wait", 0.5)),
    ("pending", 1600.0, NextStep("expire")),          # the stored deadline, also after a restart
    ("approved", 9999.0, NextStep("run")),
    ("executing", 1100.0, NextStep("cut")),           # a crash cut it: never run again
    ("denied", 1100.0, NextStep("denied")),
    ("expired", 1700.0, NextStep("expired")),
    ("done", 1700.0, NextStep("none")),
])
def test_what_a_session_does_next_with_each_state(state, now, step):
    assert next_step(dataclasses.replace(ASKED, state=state), now) == step


def test_a_question_asked_with_buttons_is_told_by_its_last_sentence_and_carries_its_own_buttons():
    pressable = "Let me check.\n\n" + question_text(ASKED, buttons=True)
    assert pressable_code(pressable) == "7KQ2"
    assert pressable_code(question_text(ASKED, buttons=False)) is None          # no buttons promised: none sent
    assert pressable_code(question_text(dataclasses.replace(ASKED, approvers="operator"), buttons=True)) is None
    assert pressable_code(pressable + " And more text after it.") is None      # only a text that ends with it
    assert buttons_for(ASKED.approval_id) == (("Approve", "ap:AbCdEfGhIjKl-_78:y"), ("Deny", "ap:AbCdEfGhIjKl-_78:n"))


def test_a_click_is_told_at_once_what_storage_says():
    now = 1100.0
    assert click_notice(ASKED, IN_CHAT, "approve", now) == ("Approved", True)
    assert click_notice(ASKED, IN_CHAT, "deny", now) == ("Denied", True)
    assert click_notice(None, IN_CHAT, "approve", now) == (UNKNOWN_BUTTON, False)
    assert click_notice(ASKED, Answerer("telegram", "-100200", "9"), "approve", now) == (NOT_YOURS, False)
    assert click_notice(dataclasses.replace(ASKED, approvers="operator"), IN_CHAT, "approve", now) == (
        OPERATOR_ONLY, False)
    answered = dataclasses.replace(ASKED, state="approved", answer="approve", answered_by="telegram:9")
    assert click_notice(answered, IN_CHAT, "deny", now) == ("Already answered: approved by telegram:9.", False)
    text, kept = click_notice(ASKED, IN_CHAT, "approve", 1600.0)                # at the deadline: expired
    assert text.startswith("This question expired at ") and not kept


def test_a_settled_question_says_who_answered_or_that_it_expired_and_no_longer_says_how_to_answer():
    question = "Let me check. " + question_text(ASKED, buttons=True)
    assert pressable_code(question) == "7KQ2"
    assert settled_question(question, ASKED, 1100.0) is None, "a question still waiting stays as it is"
    assert settled_question(question, None, 1100.0) is None
    approved = dataclasses.replace(ASKED, state="approved", answer="approve", answered_by="discord:42")
    text = settled_question(question, approved, 1100.0, lambda user: f"<@{user}>")
    assert text.endswith("\n\nApproved by <@42>.") and pressable_code(text) is None, text
    assert text.startswith("Let me check. The assistant wants to run files.delete with ")
    denied = dataclasses.replace(ASKED, state="done", answer="deny", answered_by="operator", outcome="denied")
    assert settled_question(question, denied, 1100.0).endswith("\n\nDenied by the operator.")
    expired = "Expired: no one answered, files.delete was not run."
    assert settled_question(question, ASKED, 1600.0).endswith(expired), "past its deadline, even before expire_due"
    assert settled_question(question, dataclasses.replace(ASKED, state="done", outcome="expired"), 1100.0).endswith(
        expired)
    withdrawn = dataclasses.replace(ASKED, state="done", outcome="withdrawn")
    assert "Withdrawn" in settled_question(question, withdrawn, 1100.0)
