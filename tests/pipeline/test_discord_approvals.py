"""Tool approvals answered with Discord's buttons (message components), through the real daemon, the fake Discord
(tests/fakes/discord: INTERACTION_CREATE and the interaction callback) and the fake model (docs/approvals.md): the
question carries Approve / Deny; a press is acknowledged (the interaction's callback) and answers as the typed answer
would, once; the question is then edited to say who answered, its buttons gone; a press made while the whole
daemon was killed -9 still resumes the turn (replayed by the gateway's Resume) and the tool runs exactly once; a
press by someone who may not answer is refused to them alone (ephemeral)."""
from __future__ import annotations

import os
import signal
import sqlite3

import pytest

from tests.actor_system import wait_for
from tests.fakes.discord import DEFAULT_TOKEN, GENERAL_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAIServer, text_reply, tool_call_reply
from tests.gateway import Gateway
from tests.pipeline.approval_helpers import (CALL, GUARDED_PROFILES, PRESSABLE, QUESTION_START, agent_toml,
                                             edited_question, settled_messages, tool_results)

pytestmark = pytest.mark.timeout(300)

ASKERS = {name: 1500000000000000000 + i for i, name in enumerate(("approve", "double", "kill", "group", "late",
                                                                                  "model"), 1)}
STRANGER = 1500000000000000099


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    # time_scale 0.5: a dropped gateway session stays resumable 90 s, long enough for a restart after a kill -9.
    # An interaction takes its callback for 15 s, not Discord's 3: a loaded 2-core machine may take longer than 3 s
    # to store a press (the 3 s window itself: tests/actors/adapters/discord/test_discord_components.py).
    with FakeDiscord(time_scale=0.5, heartbeat_interval=5000, interaction_window=15.0) as dc, \
            FakeOpenAIServer() as model:
        late_channel = int(dc.add_text_channel("late")["id"])
        gw = Gateway(tmp_path_factory.mktemp("gw"), extra_toml=f"""
[adapters.discord]
type = "discord"
access = "open"
token = "{DEFAULT_TOKEN}"
api_base_url = "{dc.api_url}"

{agent_toml(model)}
{GUARDED_PROFILES}
[[routes]]
adapter = "discord"
chat = "{GENERAL_CHANNEL_ID}"
per_user_in_groups = true

[[routes]]
adapter = "discord"
chat = "{late_channel}"
profile = "hurried"
""")
        gw.start()
        gw.wait_ready()
        wait_for(lambda: dc.gateway_log("identify"), 30, 0.05, "the adapter's Identify")
        try:
            yield gw, dc, model, late_channel
        finally:
            model.release()
            gw.cli("stop")
            gw.kill_everything()


def settled(dc: FakeDiscord, channel_id: int, count: int, timeout: float = 60) -> list[dict]:
    return settled_messages(lambda: dc.messages(channel_id), "content", count, f"channel {channel_id}", timeout)


def buttons(message: dict) -> dict:
    """The message's buttons, label -> custom_id."""
    return {b["label"]: b["custom_id"] for row in message["components"] for b in row["components"]}


def ask(rig, user_id: int, then: str, channel_id=None) -> tuple[dict, int, int]:
    """A user asks; the model calls the calculator: the question (with its buttons), its channel, and the
    model's requests before it."""
    gw, dc, model = rig[:3]
    before = len(model.requests)
    model.script(tool_call_reply([CALL], text="Let me compute."), text_reply(then))
    asked = dc.inject_message("what is 2+3*4?", channel_id, user_id=user_id, mention_bot=channel_id is not None)
    channel = int(asked["channel_id"])
    [question] = settled(dc, channel, 1)
    assert question["content"].startswith(QUESTION_START), question
    assert PRESSABLE in question["content"], question["content"]
    assert set(buttons(question)) == {"Approve", "Deny"}, question["components"]
    assert [b["style"] for b in question["components"][0]["components"]] == [3, 4], "Approve green, Deny red"
    assert len(model.requests) == before + 1, "the model is not asked again before the answer"
    return question, channel, before


def press(dc: FakeDiscord, channel: int, question: dict, label: str, user_id: int) -> str:
    """The user presses a button of the question; returns the interaction's id."""
    return dc.press_button(channel, question["id"], buttons(question)[label], user_id=user_id)["id"]


def answered(dc: FakeDiscord, interaction_id: str, timeout: float = 30) -> dict:
    """The interaction's callback body, once it came; it came within the fake's window (the fake refuses a later
    one, which then stays unanswered here)."""
    entry = wait_for(lambda: (e := dc.interaction(interaction_id))["response"] is not None and e, timeout, 0.05,
                     f"an answer to interaction {interaction_id}: {dc.interaction(interaction_id)}")
    assert entry["refused"] == [], entry
    return entry


def row_of(gw, channel: int) -> tuple:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        [row] = db.execute("SELECT state, answer, answered_by, outcome FROM approvals WHERE chat_id = ?",
                           (str(channel),)).fetchall()
    return row


def edited_to(dc: FakeDiscord, channel: int, question: dict, ending: str) -> dict:
    return edited_question(lambda: next(m for m in dc.messages(channel) if m["id"] == question["id"]), "content",
                           ending, buttons)


def test_pressing_approve_runs_the_tool_once_and_the_question_says_who_approved(rig):
    gw, dc, model = rig[:3]
    user = ASKERS["approve"]
    question, channel, before = ask(rig, user, "It is 14.")
    assert answered(dc, press(dc, channel, question, "Approve", user))["response"] == {"type": 6}
    assert [m["content"] for m in settled(dc, channel, 2)][1] == "It is 14."
    assert tool_results(model, before) == ["14"]
    wait_for(lambda: row_of(gw, channel) == ("done", "approve", f"discord:{user}", "ok"), 20, 0.05,
             f"the approved call done ({row_of(gw, channel)})")
    edited_to(dc, channel, question, f"Approved by <@{user}>.")
    with pytest.raises(ValueError, match="no button"):   # the buttons are gone: no second press can be made
        press(dc, channel, question, "Deny", user)


def test_a_double_press_is_one_answer_and_the_question_shows_the_first(rig):
    gw, dc, model = rig[:3]
    user = ASKERS["double"]
    question, channel, before = ask(rig, user, "It is 14, once.")
    first, second = press(dc, channel, question, "Approve", user), press(dc, channel, question, "Deny", user)
    assert answered(dc, first)["response"] == {"type": 6}
    # The second press came before the first was decided (stored too, and losing to it) or after (shown what
    # became of the question at once): either way one answer counts.
    assert answered(dc, second)["response"]["type"] in (6, 7)
    wait_for(lambda: any(m["content"] == "It is 14, once." for m in settled(dc, channel, 2)), 60, 0.05, "the answer")
    assert tool_results(model, before) == ["14"]
    assert len(model.requests) == before + 2, "one answer, one turn that goes on"
    wait_for(lambda: row_of(gw, channel) == ("done", "approve", f"discord:{user}", "ok"), 20, 0.05,
             f"the approved call done ({row_of(gw, channel)})")
    edited_to(dc, channel, question, f"Approved by <@{user}>.")


def test_a_press_by_someone_who_may_not_answer_is_told_so_privately(rig):
    """In #general each user has their own conversation (per_user_in_groups): another member's press would be
    their own conversation's answer, where the code names nothing, so it is refused, to them alone."""
    gw, dc, model = rig[:3]
    asker = ASKERS["group"]
    question, channel, before = ask(rig, asker, "Fine, not computed.", channel_id=GENERAL_CHANNEL_ID)
    entry = answered(dc, press(dc, channel, question, "Approve", STRANGER))
    assert entry["response"]["type"] == 4 and entry["response"]["data"]["flags"] == 64, entry
    assert entry["ephemeral"] == "This question is not yours to answer.", entry
    assert row_of(gw, channel)[:2] == ("pending", None) and len(model.requests) == before + 1
    [still] = [m for m in dc.messages(channel) if m["id"] == question["id"]]
    assert set(buttons(still)) == {"Approve", "Deny"}, "the question waits, its buttons still there"
    assert len(settled(dc, channel, 1)) == 1, "nothing said in the channel"
    assert answered(dc, press(dc, channel, question, "Deny", asker))["response"] == {"type": 6}
    assert [m["content"] for m in settled(dc, channel, 2)][1] == "Fine, not computed."
    assert tool_results(model, before) == ["Approval was denied for this call of calculator; it was not run."]
    edited_to(dc, channel, question, f"Denied by <@{asker}>.")


def test_a_press_after_the_deadline_shows_the_question_expired(rig):
    gw, dc, model, late_channel = rig
    asker = ASKERS["late"]
    question, channel, before = ask(rig, asker, "Nobody answered, so I did not compute it.", channel_id=late_channel)
    answers = [m["content"] for m in settled(dc, channel, 2, timeout=90)]   # the 10 s deadline, then the turn
    assert answers[1] == "Nobody answered, so I did not compute it."
    asked = len(model.requests)
    entry = answered(dc, press(dc, channel, question, "Approve", asker))
    assert entry["response"]["type"] == 7 and entry["response"]["data"]["components"] == [], entry
    edited_to(dc, channel, question, "Expired: no one answered, calculator was not run.")
    assert row_of(gw, channel) == ("done", None, None, "expired")
    assert len(model.requests) == asked and tool_results(model, before) == [
        "No one answered the request to run calculator within 10 seconds; it was not run."]


def test_model_is_answered_with_a_button_per_model_and_a_press_switches(rig):
    gw, dc, model = rig[:3]
    user = ASKERS["model"]
    asked = dc.inject_message("/model", user_id=user)
    channel = int(asked["channel_id"])
    [listing] = settled(dc, channel, 1)
    assert listing["content"].endswith("Send /model NAME to switch."), listing["content"]
    assert buttons(listing) == {"large-model": "md:large-model"}, "a button per model but the current one"
    assert answered(dc, press(dc, channel, listing, "large-model", user))["response"] == {"type": 6}
    assert [m["content"] for m in settled(dc, channel, 2)][1] == "Switched to large-model: the next answer uses it."
    before = len(model.requests)
    model.script(text_reply("Answered by the large model."))
    dc.inject_message("hello", user_id=user)
    assert [m["content"] for m in settled(dc, channel, 3)][2] == "Answered by the large model."
    assert model.requests[before].body["model"] == "large-model"


def test_a_press_while_the_daemon_is_killed_9_resumes_the_turn_and_the_tool_runs_once(rig):
    gw, dc, model = rig[:3]
    user = ASKERS["kill"]
    question, channel, before = ask(rig, user, "It is 14, after the restart.")
    os.kill(gw.launcher_pid, signal.SIGKILL)            # kill -9: the launcher takes its whole tree with it
    gw.assert_no_process_left(timeout=30)
    interaction = press(dc, channel, question, "Approve", user)   # kept in the session's replay buffer
    gw.start()
    gw.wait_ready()
    wait_for(lambda: dc.gateway_log("resume"), 60, 0.05, "the restarted adapter's Resume")
    answers = [m["content"] for m in settled(dc, channel, 2, timeout=90)]
    assert answers[1] == "It is 14, after the restart.", answers
    assert tool_results(model, before) == ["14"]
    wait_for(lambda: row_of(gw, channel) == ("done", "approve", f"discord:{user}", "ok"), 20, 0.05,
             f"the approved call done ({row_of(gw, channel)})")
    assert len(model.requests) == before + 2
    # The replayed press is acknowledged if the restart took less than the window, else its callback is refused
    # (10062); either way the question is edited by the REST edit of the bot's own message.
    entry = dc.interaction(interaction)
    assert (entry["response"], entry["refused"]) in (({"type": 6}, []), (None, [10062])), entry
    edited_to(dc, channel, question, f"Approved by <@{user}>.")
