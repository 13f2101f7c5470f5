"""Tool approvals answered with Slack's buttons (Block Kit), through the real daemon, the fake Slack over Socket Mode
(tests/fakes/slack: block_actions in interactive envelopes, chat.postEphemeral) and the fake model
(docs/approvals.md): the question carries Approve / Deny; a press is stored before its envelope is acknowledged
and answers as the typed answer would, once; the question is then updated to say who answered, its buttons gone;
a press made while the whole daemon was killed -9 still resumes the turn and the tool runs exactly once; a press
by someone who may not answer is told so, to them alone; a press past the deadline shows the question expired."""
from __future__ import annotations

import os
import signal
import sqlite3

import pytest

from tests.actor_system import wait_for
from tests.fakes.openai_server import FakeOpenAIServer, text_reply, tool_call_reply
from tests.fakes.slack import DEFAULT_APP_TOKEN, DEFAULT_BOT_TOKEN, FakeSlack
from tests.gateway import Gateway
from tests.pipeline.approval_helpers import (CALL, GUARDED_PROFILES, PRESSABLE, QUESTION_START, agent_toml,
                                             edited_question, settled_messages, tool_results)

pytestmark = pytest.mark.timeout(300)

BOT = "U0FAKEBOT1"
GROUP, LATE = "C0GROUP001", "C0LATE0001"


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    # Acknowledgements waited for 10 s, not Slack's 3: a loaded 2-core machine may take longer than 3 s to store a
    # press, and a redelivery would only be another (deduplicated) try of the same press.
    with FakeSlack(post_burst=20, ping_interval=0, ack_timeout=10.0) as slack, FakeOpenAIServer() as model:
        gw = Gateway(tmp_path_factory.mktemp("gw"), extra_toml=f"""
[adapters.slack]
type = "slack"
access = "open"
bot_token = "{DEFAULT_BOT_TOKEN}"
app_token = "{DEFAULT_APP_TOKEN}"
base_url = "{slack.api_url}"

{agent_toml(model)}
{GUARDED_PROFILES}
[[routes]]
adapter = "slack"
chat = "{GROUP}"
per_user_in_groups = true

[[routes]]
adapter = "slack"
chat = "{LATE}"
profile = "hurried"
""")
        gw.start()
        gw.wait_ready()
        wait_for(lambda: slack.open_connections(), 30, 0.05, "the adapter's Socket Mode connection")
        try:
            yield gw, slack, model
        finally:
            model.release()
            gw.cli("stop")
            gw.kill_everything()


def settled(slack: FakeSlack, channel: str, count: int, timeout: float = 60) -> list[dict]:
    return settled_messages(lambda: slack.messages(channel), "text", count, channel, timeout)


def buttons(message: dict) -> dict:
    """The message's buttons, label -> value."""
    return {e["text"]["text"]: e["value"] for b in message["blocks"] or [] if b["type"] == "actions"
            for e in b["elements"]}


def ask(rig, user: str, then: str, channel=None) -> tuple[dict, str, int]:
    """A user asks; the model calls the calculator: the question (with its buttons), its channel, and the
    model's requests before it."""
    gw, slack, model = rig
    before = len(model.requests)
    model.script(tool_call_reply([CALL], text="Let me compute."), text_reply(then))
    asked = slack.inject_message("what is 2+3*4?" if channel is None else f"<@{BOT}> what is 2+3*4?", channel,
                                 user=user)
    channel = asked["channel"]
    [question] = settled(slack, channel, 1)
    assert question["text"].startswith(QUESTION_START), question
    assert PRESSABLE in question["text"], question["text"]
    assert set(buttons(question)) == {"Approve", "Deny"}, question["blocks"]
    sections = [b["text"]["text"] for b in question["blocks"] if b["type"] == "section"]
    assert "".join(sections) == question["text"], "the blocks show the text the notification carries"
    assert len(model.requests) == before + 1, "the model is not asked again before the answer"
    return question, channel, before


def press(slack: FakeSlack, channel: str, question: dict, label: str, user: str) -> dict:
    return slack.press_button(channel, question["ts"], buttons(question)[label], user=user)


def acknowledged(slack: FakeSlack, payload: dict, timeout: float = 30, first_time: bool = True) -> None:
    """The press's envelope acknowledged, within the fake's deadline, the first time it was sent (``first_time``)."""
    action_ts = payload["actions"][0]["action_ts"]
    def done():
        return next((e for e in slack.interactive_events()
                     if e["payload"]["actions"][0]["action_ts"] == action_ts and e["status"] == "acked"), None)
    event = wait_for(done, timeout, 0.05, f"the press's envelope acknowledged: {slack.interactive_events()[-1:]}")
    assert not event["acked"]["late"] and (len(event["attempts"]) == 1 or not first_time), event


def row_of(gw, channel: str) -> tuple:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        [row] = db.execute("SELECT state, answer, answered_by, outcome FROM approvals WHERE chat_id = ?",
                           (channel,)).fetchall()
    return row


def updated_to(slack: FakeSlack, channel: str, question: dict, ending: str) -> dict:
    return edited_question(lambda: next(m for m in slack.messages(channel) if m["ts"] == question["ts"]), "text",
                           ending, buttons)


def test_pressing_approve_runs_the_tool_once_and_the_question_says_who_approved(rig):
    gw, slack, model = rig
    user = "U0APPROVE1"
    question, channel, before = ask(rig, user, "It is 14.")
    acknowledged(slack, press(slack, channel, question, "Approve", user))
    assert [m["text"] for m in settled(slack, channel, 2)][1] == "It is 14."
    assert tool_results(model, before) == ["14"]
    wait_for(lambda: row_of(gw, channel) == ("done", "approve", f"slack:{user}", "ok"), 20, 0.05,
             f"the approved call done ({row_of(gw, channel)})")
    updated_to(slack, channel, question, f"Approved by <@{user}>.")
    with pytest.raises(ValueError, match="no button"):   # the buttons are gone: no second press can be made
        press(slack, channel, question, "Deny", user)


def test_a_double_press_is_one_answer_and_the_question_shows_the_first(rig):
    gw, slack, model = rig
    user = "U0DOUBLE01"
    question, channel, before = ask(rig, user, "It is 14, once.")
    first, second = press(slack, channel, question, "Approve", user), press(slack, channel, question, "Deny", user)
    acknowledged(slack, first)
    acknowledged(slack, second)
    wait_for(lambda: any(m["text"] == "It is 14, once." for m in settled(slack, channel, 2)), 60, 0.05, "the answer")
    assert tool_results(model, before) == ["14"]
    assert len(model.requests) == before + 2, "one answer, one turn that goes on"
    wait_for(lambda: row_of(gw, channel) == ("done", "approve", f"slack:{user}", "ok"), 20, 0.05,
             f"the approved call done ({row_of(gw, channel)})")
    updated_to(slack, channel, question, f"Approved by <@{user}>.")


def test_a_press_by_someone_who_may_not_answer_is_told_so_privately(rig):
    """In GROUP each user has their own conversation (per_user_in_groups): another member's press would be
    their own conversation's answer, where the code names nothing, so it is refused, to them alone."""
    gw, slack, model = rig
    asker, stranger = "U0ASKER001", "U0STRANGER"
    question, channel, before = ask(rig, asker, "Fine, not computed.", channel=GROUP)
    slack.inject_message("I am here too", GROUP, user=stranger)   # a member of the channel (not addressed)
    acknowledged(slack, press(slack, channel, question, "Approve", stranger))
    told = wait_for(lambda: slack.ephemeral(GROUP), 30, 0.05, "an ephemeral notice")
    assert [(e["user"], e["text"]) for e in told] == [(stranger, "This question is not yours to answer.")]
    assert row_of(gw, channel)[:2] == ("pending", None) and len(model.requests) == before + 1
    [still] = [m for m in slack.messages(channel) if m["ts"] == question["ts"]]
    assert set(buttons(still)) == {"Approve", "Deny"}, "the question waits, its buttons still there"
    assert len(settled(slack, channel, 1)) == 1, "nothing said in the channel"
    acknowledged(slack, press(slack, channel, question, "Deny", asker))
    assert [m["text"] for m in settled(slack, channel, 2)][1] == "Fine, not computed."
    assert tool_results(model, before) == ["Approval was denied for this call of calculator; it was not run."]
    updated_to(slack, channel, question, f"Denied by <@{asker}>.")


def test_a_press_after_the_deadline_shows_the_question_expired(rig):
    gw, slack, model = rig
    asker = "U0LATE0001"
    question, channel, before = ask(rig, asker, "Nobody answered, so I did not compute it.", channel=LATE)
    answers = [m["text"] for m in settled(slack, channel, 2, timeout=90)]   # the 10 s deadline, then the turn
    assert answers[1] == "Nobody answered, so I did not compute it."
    asked = len(model.requests)
    acknowledged(slack, press(slack, channel, question, "Approve", asker))
    updated_to(slack, channel, question, "Expired: no one answered, calculator was not run.")
    assert row_of(gw, channel) == ("done", None, None, "expired") and slack.ephemeral(LATE) == []
    assert len(model.requests) == asked and tool_results(model, before) == [
        "No one answered the request to run calculator within 10 seconds; it was not run."]


def test_model_is_answered_with_a_button_per_model_and_a_press_switches(rig):
    gw, slack, model = rig
    user = "U0MODEL001"
    channel = slack.inject_message("/model", user=user)["channel"]
    [listing] = settled(slack, channel, 1)
    assert listing["text"].endswith("Send /model NAME to switch."), listing["text"]
    assert buttons(listing) == {"large-model": "md:large-model"}, "a button per model but the current one"
    acknowledged(slack, press(slack, channel, listing, "large-model", user))
    assert [m["text"] for m in settled(slack, channel, 2)][1] == "Switched to large-model: the next answer uses it."
    before = len(model.requests)
    model.script(text_reply("Answered by the large model."))
    slack.inject_message("hello", user=user)
    assert [m["text"] for m in settled(slack, channel, 3)][2] == "Answered by the large model."
    assert model.requests[before].body["model"] == "large-model"


def test_a_press_while_the_daemon_is_killed_9_resumes_the_turn_and_the_tool_runs_once(rig):
    gw, slack, model = rig
    user = "U0KILLED01"
    question, channel, before = ask(rig, user, "It is 14, after the restart.")
    os.kill(gw.launcher_pid, signal.SIGKILL)            # kill -9: the launcher takes its whole tree with it
    gw.assert_no_process_left(timeout=30)
    pressed = press(slack, channel, question, "Approve", user)   # queued by Slack until a socket is open
    gw.start()
    gw.wait_ready()
    answers = [m["text"] for m in settled(slack, channel, 2, timeout=90)]
    assert answers[1] == "It is 14, after the restart.", answers
    # Slack may have sent it first to the killed daemon's socket before it saw that socket close: not acknowledged
    # there, it came again on the new one (and was stored once).
    acknowledged(slack, pressed, timeout=60, first_time=False)
    assert tool_results(model, before) == ["14"]
    wait_for(lambda: row_of(gw, channel) == ("done", "approve", f"slack:{user}", "ok"), 20, 0.05,
             f"the approved call done ({row_of(gw, channel)})")
    assert len(model.requests) == before + 2
    updated_to(slack, channel, question, f"Approved by <@{user}>.")
