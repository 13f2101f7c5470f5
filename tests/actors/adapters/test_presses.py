"""actors/adapters/presses.py ``press_outcome``: what a press's platform answer is, from the press as judged against
storage: stored (the edit comes once the session decides), settled (the question shown as what became of it, for
someone who may answer it), refused (told why, to the presser alone)."""
from __future__ import annotations

import dataclasses

import pytest

from actors.adapters.presses import REFUSED, SETTLED, STORED, JudgedPress, press_outcome
from actors.approvals.answers import NOT_YOURS, UNKNOWN_BUTTON, Answerer, question_text
from storage import Approval

pytestmark = pytest.mark.timeout(30)

ASKED = Approval(approval_id="AbCdEfGhIjKl-_78", code="7KQ2", session_key="k", turn_id="t1", call_id="c1",
                 tool_name="calculator", arguments="{}", arguments_sha256="0" * 64, platform="discord",
                 chat_id="10", approvers="chat", asked_at=1000.0, deadline=1600.0, state="pending")
QUESTION = question_text(ASKED, buttons=True)
IN_CHAT, ELSEWHERE = Answerer("discord", "10", "42"), Answerer("discord", "11", "42")


def test_a_kept_press_is_stored_and_waits_for_the_sessions_decision():
    assert press_outcome(JudgedPress({}, "Approved", ASKED, True), IN_CHAT, QUESTION, 1100.0) == (STORED, "")


def test_a_press_on_a_settled_question_shows_what_became_of_it_to_whoever_may_answer():
    answered = dataclasses.replace(ASKED, state="done", answer="approve", answered_by="discord:7", outcome="ok")
    judged = JudgedPress({}, "Already answered: approved by discord:7.", answered, False)
    kind, text = press_outcome(judged, IN_CHAT, QUESTION, 1100.0, lambda user: f"<@{user}>")
    assert kind == SETTLED and text.endswith("\n\nApproved by <@7>.") and "Press Approve" not in text
    assert press_outcome(JudgedPress({}, "This question expired at 00:26 UTC.", ASKED, False), IN_CHAT, QUESTION,
                         1700.0)[1].endswith("Expired: no one answered, calculator was not run.")


def test_any_other_press_is_refused_with_its_notice():
    assert press_outcome(JudgedPress({}, NOT_YOURS, ASKED, False), IN_CHAT, QUESTION, 1100.0) == (REFUSED, NOT_YOURS)
    answered = dataclasses.replace(ASKED, state="denied", answer="deny", answered_by="discord:7")
    assert press_outcome(JudgedPress({}, "x", answered, False), ELSEWHERE, QUESTION, 1100.0)[0] == REFUSED
    assert press_outcome(JudgedPress({}, UNKNOWN_BUTTON, None, False), IN_CHAT, QUESTION, 1100.0) == (
        REFUSED, UNKNOWN_BUTTON)
