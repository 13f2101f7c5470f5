"""Tool approvals answered with Teams' Adaptive Card buttons, through the real daemon, the fake Bot Connector
(tests/fakes/teams: cards on the bot's activities, a press as the signed message activity with a ``value`` that
Action.Submit makes) and the fake model (docs/approvals.md): the question carries an Approve / Deny card; a press
answers as the typed answer would, once, even pressed twice; the question is then updated to say who answered, its
card gone; a press after the deadline updates it to say it expired; a press by someone who may not answer is
refused in the conversation (Teams shows nothing to one member alone), and the question waits."""
from __future__ import annotations

import sqlite3

import pytest

from tests.actor_system import wait_for
from tests.adapters.harnesses.teams import TeamsHarness
from tests.fakes.openai_server import FakeOpenAIServer, text_reply, tool_call_reply
from tests.fakes.teams.server import card_actions
from tests.gateway import Gateway
from tests.pipeline.approval_helpers import (CALL, GUARDED_PROFILES, PRESSABLE, QUESTION_START, edited_question,
                                             settled_messages, tool_results)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("teams")
    harness = TeamsHarness(workdir)
    harness.start()
    teams = harness.server
    group, late = teams.group_chat("approvers"), teams.personal("late")
    with FakeOpenAIServer() as model:
        gw = Gateway(workdir, extra_toml=harness.adapter_toml() + f"""
[agent]
chunk_delay_s = 0.0
kind = "openai"
base_url = "{model.base_url}"
model = "test-model"
api_key = "sk-test-key-0123456789abcdef"

{GUARDED_PROFILES}
[[routes]]
adapter = "teams"
chat = "{group}"
per_user_in_groups = true

[[routes]]
adapter = "teams"
chat = "{late}"
profile = "hurried"
""")
        try:
            gw.start()
            gw.wait_ready()
            harness.webhook_ready()
            yield gw, teams, model, group, late
        finally:
            model.release()
            gw.cli("stop")
            gw.kill_everything()
            harness.stop()


def settled(teams, chat: str, count: int, timeout: float = 60) -> list[dict]:
    return settled_messages(lambda: teams.activities(chat), "text", count, f"conversation {chat}", timeout)


def buttons(activity: dict) -> dict:
    """The activity's card buttons, title -> the Action.Submit's data."""
    return card_actions(activity)


def ask(rig, user: str, then: str, chat: str) -> tuple[dict, int]:
    """``user`` asks in ``chat``; the model calls the calculator: the question (with its card) and the model's
    requests before it."""
    gw, teams, model = rig[:3]
    before = len(model.requests)
    model.script(tool_call_reply([CALL], text="Let me compute."), text_reply(then))
    teams.inject_text(chat, "what is 2+3*4?", user)
    [question] = settled(teams, chat, 1)
    assert question["text"].startswith(QUESTION_START), question
    assert PRESSABLE in question["text"], question["text"]
    assert set(buttons(question)) == {"Approve", "Deny"}, question["attachments"]
    [card] = question["attachments"]
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive", card
    assert [a["style"] for a in card["content"]["actions"]] == ["positive", "destructive"], card
    assert len(model.requests) == before + 1, "the model is not asked again before the answer"
    return question, before


def acked(teams, delivery: str, timeout: float = 60) -> None:
    """The press's activity was answered 2xx (after its row, if any, was committed)."""
    wait_for(lambda: teams.delivery(delivery)["state"] == "acked", timeout, 0.05,
             f"the press {delivery} answered 2xx: {teams.delivery(delivery)}")


def row_of(gw, chat: str) -> tuple:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        [row] = db.execute("SELECT state, answer, answered_by, outcome FROM approvals WHERE chat_id = ?",
                           (chat,)).fetchall()
    return row


def edited_to(teams, chat: str, question: dict, ending: str) -> dict:
    return edited_question(lambda: next(a for a in teams.activities(chat) if a["id"] == question["id"]), "text",
                           ending, buttons)


def test_pressing_approve_runs_the_tool_once_and_the_question_says_who_approved(rig):
    gw, teams, model = rig[:3]
    chat = teams.personal("approver")
    question, before = ask(rig, "approver", "It is 14.", chat)
    acked(teams, teams.press_button(chat, question["id"], "Approve", "approver"))
    assert [a["text"] for a in settled(teams, chat, 2)][1] == "It is 14."
    assert tool_results(model, before) == ["14"]
    wait_for(lambda: row_of(gw, chat) == ("done", "approve", f"teams:{teams.user('approver')}", "ok"), 20, 0.05,
             f"the approved call done ({row_of(gw, chat)})")
    edited_to(teams, chat, question, "Approved by Approver.")
    with pytest.raises(ValueError, match="no button"):   # the card is gone: no second press can be made
        teams.press_button(chat, question["id"], "Deny", "approver")


def test_a_double_press_is_one_answer_and_the_question_shows_the_first(rig):
    gw, teams, model = rig[:3]
    chat = teams.personal("doubler")
    question, before = ask(rig, "doubler", "It is 14, once.", chat)
    first = teams.press_button(chat, question["id"], "Approve", "doubler")
    second = teams.press_button(chat, question["id"], "Deny", "doubler")
    acked(teams, first)
    acked(teams, second)
    wait_for(lambda: any(a["text"] == "It is 14, once." for a in settled(teams, chat, 2)), 60, 0.05, "the answer")
    assert tool_results(model, before) == ["14"]
    assert len(model.requests) == before + 2, "one answer, one turn that goes on"
    wait_for(lambda: row_of(gw, chat) == ("done", "approve", f"teams:{teams.user('doubler')}", "ok"), 20, 0.05,
             f"the approved call done ({row_of(gw, chat)})")
    edited_to(teams, chat, question, "Approved by Doubler.")
    # The Deny came after the Approve was decided (shown in the question's update only) or before (stored too, and
    # losing to it: its presser is told so once, as a typed second answer would be). Either way one answer counts.
    others = [a["text"] for a in settled(teams, chat, 2)
              if a["id"] != question["id"] and a["text"] != "It is 14, once."]
    assert others == [] or (len(others) == 1 and others[0].startswith("Already answered: approved by ")), others


def test_a_press_by_someone_who_may_not_answer_is_refused_in_the_conversation(rig):
    """In the group chat each user has their own conversation (per_user_in_groups): another member's press would
    be their own conversation's answer, where the code names nothing, so it is refused, said once in reply."""
    gw, teams, model, group = rig[:4]
    question, before = ask(rig, "asker", "Fine, not computed.", group)
    acked(teams, teams.press_button(group, question["id"], "Approve", "stranger"))
    refusal = wait_for(lambda: next((a for a in teams.activities(group) if a["reply_to"] == question["id"]), None),
                       60, 0.05, f"the refusal in reply: {teams.activities(group)}")
    assert refusal["text"] == "Stranger: This question is not yours to answer.", refusal
    acked(teams, teams.press_button(group, question["id"], "Deny", "stranger"))   # told once, not again
    assert row_of(gw, group)[:2] == ("pending", None) and len(model.requests) == before + 1
    [still] = [a for a in teams.activities(group) if a["id"] == question["id"]]
    assert set(buttons(still)) == {"Approve", "Deny"}, "the question waits, its card still there"
    acked(teams, teams.press_button(group, question["id"], "Deny", "asker"))
    wait_for(lambda: any(a["text"] == "Fine, not computed." for a in teams.activities(group)), 60, 0.05,
             f"the answer: {[a['text'][-60:] for a in teams.activities(group)]}")
    assert tool_results(model, before) == ["Approval was denied for this call of calculator; it was not run."]
    edited_to(teams, group, question, "Denied by Asker.")
    assert [a["text"] for a in teams.activities(group)].count(refusal["text"]) == 1


def test_a_press_after_the_deadline_shows_the_question_expired(rig):
    gw, teams, model, _, late = rig
    question, before = ask(rig, "late", "Nobody answered, so I did not compute it.", late)
    answers = [a["text"] for a in settled(teams, late, 2, timeout=90)]   # the 10 s deadline, then the turn
    assert answers[1] == "Nobody answered, so I did not compute it."
    asked = len(model.requests)
    acked(teams, teams.press_button(late, question["id"], "Approve", "late"))
    edited_to(teams, late, question, "Expired: no one answered, calculator was not run.")
    assert row_of(gw, late) == ("done", None, None, "expired")
    assert len(model.requests) == asked and tool_results(model, before) == [
        "No one answered the request to run calculator within 10 seconds; it was not run."]


def test_model_is_answered_with_a_button_per_model_and_a_press_switches(rig):
    gw, teams, model = rig[:3]
    chat = teams.personal("switcher")
    teams.inject_text(chat, "/model", "switcher")
    [listing] = settled(teams, chat, 1)
    assert listing["text"].endswith("Send /model NAME to switch."), listing["text"]
    assert buttons(listing) == {"large-model": {"answer": "md:large-model"}}, "a button per model but the current"
    acked(teams, teams.press_button(chat, listing["id"], "large-model", "switcher"))
    assert [a["text"] for a in settled(teams, chat, 2)][1] == "Switched to large-model: the next answer uses it."
    before = len(model.requests)
    model.script(text_reply("Answered by the large model."))
    teams.inject_text(chat, "hello", "switcher")
    assert [a["text"] for a in settled(teams, chat, 3)][2] == "Answered by the large model."
    assert model.requests[before].body["model"] == "large-model"
