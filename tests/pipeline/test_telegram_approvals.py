"""Tool approvals answered with Telegram's buttons, through the real daemon, the fake Bot API and the fake model
(docs/approvals.md): the question carries Approve / Deny; a press answers it as the typed answer would, once; a
press after a kill -9 of the whole daemon still resumes the turn, and the tool runs exactly once; every press is
answered (answerCallbackQuery) with what storage says: taken, already answered, expired, or not the clicker's."""
from __future__ import annotations

import os
import signal
import sqlite3

import pytest

from tests.actor_system import wait_for
from tests.fakes.openai_server import FakeOpenAIServer, text_reply, tool_call_reply
from tests.fakes.telegram import FakeTelegram
from tests.pipeline.approval_helpers import CALL, GUARDED_PROFILES, edited_question, settled_messages, tool_results
from tests.pipeline.harness import telegram_gateway

pytestmark = pytest.mark.timeout(300)

LATE_CHAT = 505
GROUP = -100777


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    # Flood windows of the fake shrunk: the adapter paces itself; the fake only records.
    with FakeTelegram(time_scale=0.05, per_chat_burst=20) as tg, FakeOpenAIServer() as model:
        gw = telegram_gateway(tmp_path_factory.mktemp("gw"), tg.base_url, extra=f"""kind = "openai"
base_url = "{model.base_url}"
model = "test-model"
api_key = "sk-test-key-0123456789abcdef"

{GUARDED_PROFILES}
[[routes]]
adapter = "telegram"
chat = {LATE_CHAT}
profile = "hurried"
""")
        gw.start()
        gw.wait_ready()
        try:
            yield gw, tg, model
        finally:
            model.release()
            gw.cli("stop")
            gw.kill_everything()


def settled(tg: FakeTelegram, chat_id: int, count: int, timeout: float = 60) -> list[dict]:
    return settled_messages(lambda: tg.messages(chat_id), "text", count, f"chat {chat_id}", timeout)


def buttons(message: dict) -> dict:
    """The message's buttons, label -> callback data."""
    rows = (message.get("reply_markup") or {}).get("inline_keyboard") or []
    return {b["text"]: b["callback_data"] for row in rows for b in row}


def ask(rig, chat_id: int, then: str, **sender) -> tuple[dict, int]:
    """A user asks; the model calls the calculator: the question, with its buttons, and the model's requests
    before it."""
    gw, tg, model = rig
    before = len(model.requests)
    model.script(tool_call_reply([CALL], text="Let me compute."), text_reply(then))
    text = "what is 2+3*4? @fake_gateway_bot" if chat_id < 0 else "what is 2+3*4?"
    tg.inject_message(text, chat_id, chat_type="group" if chat_id < 0 else "private", **sender)
    [question] = settled(tg, chat_id, 1)
    assert question["text"].startswith("Let me compute.\n\nThe assistant wants to run calculator with "), question
    assert "Press Approve or Deny, or reply \u201capprove " in question["text"], question["text"]
    assert set(buttons(question)) == {"Approve", "Deny"}, question
    assert len(model.requests) == before + 1, "the model is not asked again before the answer"
    return question, before


def press(tg: FakeTelegram, chat_id: int, question: dict, label: str, user_id: int) -> str:
    """The user presses a button of the question; returns the press's id."""
    return tg.press_button(chat_id, question["message_id"], buttons(question)[label], user_id=user_id)[
        "callback_query"]["id"]


def told(tg: FakeTelegram, query_id: str, timeout: float = 30) -> str:
    """What the press was answered (answerCallbackQuery's text)."""
    return wait_for(lambda: tg.callback_answer(query_id), timeout, 0.05, f"an answer to press {query_id}")["text"]


def approval_rows(gw) -> list[tuple]:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        return db.execute("SELECT chat_id, state, answer, answered_by, outcome FROM approvals "
                          "ORDER BY asked_at").fetchall()


def row_of(gw, chat_id: int) -> tuple:
    [row] = [r for r in approval_rows(gw) if r[0] == str(chat_id)]
    return row


def edited_to(tg: FakeTelegram, chat_id: int, question: dict, ending: str) -> dict:
    return edited_question(lambda: next(m for m in tg.messages(chat_id) if m["message_id"] ==
                                        question["message_id"]), "text", ending, buttons)


def test_pressing_approve_runs_the_tool_once(rig):
    gw, tg, model = rig
    question, before = ask(rig, 501, "It is 14.")
    query = press(tg, 501, question, "Approve", 501)
    assert told(tg, query) == "Approved"
    assert [m["text"] for m in settled(tg, 501, 2)][1] == "It is 14."
    assert tool_results(model, before) == ["14"]
    wait_for(lambda: row_of(gw, 501) == ("501", "done", "approve", "telegram:501", "ok"), 20, 0.05,
             f"the approved call done ({approval_rows(gw)})")
    edited_to(tg, 501, question, "Approved by Alice.")


def test_pressing_deny_refuses_the_call_and_the_model_is_told(rig):
    gw, tg, model = rig
    question, before = ask(rig, 502, "Fine, I will not compute it.")
    assert told(tg, press(tg, 502, question, "Deny", 502)) == "Denied"
    assert [m["text"] for m in settled(tg, 502, 2)][1] == "Fine, I will not compute it."
    assert tool_results(model, before) == ["Approval was denied for this call of calculator; it was not run."]
    wait_for(lambda: row_of(gw, 502) == ("502", "done", "deny", "telegram:502", "denied"), 20, 0.05,
             f"the denied call done ({approval_rows(gw)})")
    edited_to(tg, 502, question, "Denied by Alice.")


def test_a_double_click_is_one_answer(rig):
    gw, tg, model = rig
    question, before = ask(rig, 503, "It is 14, once.")
    first, second = press(tg, 503, question, "Approve", 503), press(tg, 503, question, "Deny", 503)
    assert told(tg, first) == "Approved"
    # The second press came before the first was answered (told "Denied": taken, and then losing to the first, so
    # the chat is told what came first) or after it (told so at once): either way one answer counts.
    assert told(tg, second) in ("Denied", "Already answered: approved by telegram:503.")
    wait_for(lambda: any(m["text"] == "It is 14, once." for m in settled(tg, 503, 2)), 60, 0.05, "the answer")
    assert tool_results(model, before) == ["14"]
    assert len(model.requests) == before + 2, "one answer, one turn that goes on"
    wait_for(lambda: row_of(gw, 503) == ("503", "done", "approve", "telegram:503", "ok"), 20, 0.05,
             f"the approved call done ({approval_rows(gw)})")
    # The question is edited to say who answered, its buttons gone: no later press can be made.
    edited_to(tg, 503, question, "Approved by Alice.")
    with pytest.raises(ValueError, match="no button"):
        press(tg, 503, question, "Approve", 503)
    assert tool_results(model, before) == ["14"] and len(model.requests) == before + 2


def test_a_click_after_a_kill_9_of_the_whole_daemon_resumes_the_turn_and_the_tool_runs_once(rig):
    gw, tg, model = rig
    question, before = ask(rig, 504, "It is 14, after the restart.")
    os.kill(gw.launcher_pid, signal.SIGKILL)            # kill -9: the launcher takes its whole tree with it
    gw.assert_no_process_left(timeout=30)
    query = press(tg, 504, question, "Approve", 504)    # the press waits at Telegram while the gateway is down
    gw.start()
    gw.wait_ready()
    assert told(tg, query, timeout=60) == "Approved"
    answers = [m["text"] for m in settled(tg, 504, 2, timeout=90)]
    assert answers[1] == "It is 14, after the restart.", answers
    assert tool_results(model, before) == ["14"]
    wait_for(lambda: row_of(gw, 504) == ("504", "done", "approve", "telegram:504", "ok"), 20, 0.05,
             f"the approved call done ({approval_rows(gw)})")
    edited_to(tg, 504, question, "Approved by Alice.")
    assert len(model.requests) == before + 2


def test_a_click_after_the_deadline_is_told_the_question_expired(rig):
    gw, tg, model = rig
    question, before = ask(rig, LATE_CHAT, "Nobody answered, so I did not compute it.")
    answers = [m["text"] for m in settled(tg, LATE_CHAT, 2, timeout=90)]   # the 10 s deadline, then the turn
    assert answers[1] == "Nobody answered, so I did not compute it."
    asked = len(model.requests)
    told_text = told(tg, press(tg, LATE_CHAT, question, "Approve", LATE_CHAT))
    assert told_text.startswith("This question expired at ") and told_text.endswith("calculator was not run."), \
        told_text
    assert row_of(gw, LATE_CHAT)[1:] == ("done", None, None, "expired")
    edited_to(tg, LATE_CHAT, question, "Expired: no one answered, calculator was not run.")
    assert len(model.requests) == asked and tool_results(model, before) == [
        "No one answered the request to run calculator within 10 seconds; it was not run."]


def test_in_a_group_a_press_from_elsewhere_is_not_theirs_and_another_member_may_answer(rig):
    gw, tg, model = rig
    question, before = ask(rig, GROUP, "It is 14, says the group.", user_id=11, username="asker")
    # A press naming the group's question from another chat (a button copied into a private chat): refused.
    with tg.mutate() as state:
        other = {"id": 12, "is_bot": False, "first_name": "Other", "username": "other"}
        chat = tg._ensure_chat(state, 12, "private", other, None, False)
        message = tg.store_message(chat, outgoing=True, text="a message of the bot", entities=[])
        forged = state["next_update_id"]
        state["callback_queries"]["forged"] = {"answer": None}
        state["updates"].append({"update_id": forged, "callback_query": {
            "id": "forged", "from": {"id": 12, "is_bot": False, "first_name": "Other"}, "chat_instance": "x",
            "message": tg.message_object(chat, message), "data": buttons(question)["Approve"]}})
        state["next_update_id"] += 1
    assert told(tg, "forged") == "This question is not yours to answer."
    assert row_of(gw, GROUP)[1] == "pending" and len(model.requests) == before + 1
    # Another member of the group: the chat's users may answer (approvers = "chat").
    assert told(tg, press(tg, GROUP, question, "Approve", 13)) == "Approved"
    wait_for(lambda: any(m["text"] == "It is 14, says the group." for m in settled(tg, GROUP, 2, timeout=90)), 90,
             0.1, "the group's answer")
    assert tool_results(model, before) == ["14"]
    wait_for(lambda: row_of(gw, GROUP) == (str(GROUP), "done", "approve", "telegram:13", "ok"), 20, 0.05,
             f"the approved call done ({approval_rows(gw)})")
    edited_to(tg, GROUP, question, "Approved by Alice.")


def test_model_is_answered_with_a_button_per_model_and_a_press_switches(rig):
    gw, tg, model = rig
    tg.inject_message("/model", 507)
    [listing] = settled(tg, 507, 1)
    assert listing["text"].endswith("Send /model NAME to switch."), listing["text"]
    assert buttons(listing) == {"large-model": "md:large-model"}, "a button per model but the current one"
    query = press(tg, 507, listing, "large-model", 507)
    assert told(tg, query) == "Switching to large-model"
    assert [m["text"] for m in settled(tg, 507, 2)][1] == "Switched to large-model: the next answer uses it."
    before = len(model.requests)
    model.script(text_reply("Answered by the large model."))
    tg.inject_message("hello", 507)
    assert [m["text"] for m in settled(tg, 507, 3)][2] == "Answered by the large model."
    assert model.requests[before].body["model"] == "large-model"
