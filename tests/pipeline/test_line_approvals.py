"""Tool approvals answered with LINE's quick replies, through the real daemon, the fake LINE (tests/fakes/line:
quick replies under the chat's last message, a press delivered as a signed ``postback`` webhook) and the fake model
(docs/approvals.md): the question carries Approve / Deny as postback actions whose displayText is the typed answer;
a press is stored before its webhook is answered and answers as the typed answer would, once, even when LINE
delivers its postback again; a /model listing carries a button per model and a press switches; a press that
cannot answer is told why with its reply token, nothing stored."""
from __future__ import annotations

import sqlite3

import pytest

from tests.actor_system import wait_for
from tests.adapters.harnesses.line import LineHarness
from tests.fakes.openai_server import FakeOpenAIServer, text_reply, tool_call_reply
from tests.gateway import Gateway
from tests.pipeline.approval_helpers import (CALL, GUARDED_PROFILES, PRESSABLE, QUESTION_START, agent_toml,
                                             settled_messages, tool_results)

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("line-approvals")
    harness = LineHarness(workdir)
    harness.start()
    with FakeOpenAIServer() as model:
        gw = Gateway(workdir, extra_toml=harness.adapter_toml() + agent_toml(model) + GUARDED_PROFILES)
        try:
            gw.start()
            gw.wait_ready()
            harness.webhook_ready()
            yield gw, harness.server, model
        finally:
            model.release()
            gw.cli("stop")
            gw.kill_everything()
            harness.stop()


def settled(line, chat: str, count: int, timeout: float = 60) -> list[dict]:
    return settled_messages(lambda: [dict(m, deleted=False) for m in line.messages(chat)], "text", count, chat,
                            timeout)


def quick_replies(message: dict) -> dict:
    """The message's quick reply buttons, label -> (data, displayText)."""
    return {a["label"]: (a["data"], a["displayText"]) for a in message["quick_replies"]}


def answered_webhook(line, delivery_id: str, timeout: float = 60) -> dict:
    """The delivery once answered 2xx (the press's row committed)."""
    return wait_for(lambda: (w := line.webhook(delivery_id))["state"] == "acked" and w, timeout, 0.05,
                    f"the postback's webhook answered: {line.webhook(delivery_id)}")


def row_of(gw, chat: str) -> tuple:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        [row] = db.execute("SELECT state, answer, answered_by, outcome FROM approvals WHERE chat_id = ?",
                           (chat,)).fetchall()
    return row


def test_pressing_approve_runs_the_tool_once_and_a_redelivered_postback_counts_once(rig):
    gw, line, model = rig
    chat = line.user("approver")
    before = len(model.requests)
    model.script(tool_call_reply([CALL], text="Let me compute."), text_reply("It is 14."))
    line.inject_text(chat, "what is 2+3*4?")
    [question] = settled(line, chat, 1)
    assert question["text"].startswith(QUESTION_START) and PRESSABLE in question["text"], question["text"]
    code = question["text"].rsplit("\u201capprove ", 1)[1][:4]
    buttons = quick_replies(question)
    assert set(buttons) == {"Approve", "Deny"}, question
    assert buttons["Approve"][1] == f"approve {code}" and buttons["Deny"][1] == f"deny {code}", buttons
    assert buttons["Approve"][0].startswith("ap:") and buttons["Approve"][0].endswith(":y"), buttons
    assert len(model.requests) == before + 1, "the model is not asked again before the answer"

    pressed = line.press_quick_reply(chat, "Approve")
    answered_webhook(line, pressed)
    again = line.redeliver(pressed)   # LINE delivers the same postback again (its webhookEventId unchanged)
    answered_webhook(line, again)
    assert [m["text"] for m in settled(line, chat, 2)][1] == "It is 14."
    wait_for(lambda: row_of(gw, chat) == ("done", "approve", f"line:{chat}", "ok"), 30, 0.05,
             f"the approved call done ({row_of(gw, chat)})")
    assert tool_results(model, before) == ["14"]
    assert len(model.requests) == before + 2, "one answer, one turn that goes on"
    assert [m["text"] for m in line.messages(chat)] == [question["text"], "It is 14."], "nothing else said"
    with pytest.raises(ValueError, match="no quick reply"):   # LINE removed them when one was pressed
        line.press_quick_reply(chat, "Deny")


def test_model_is_answered_with_a_button_per_model_and_a_press_switches(rig):
    gw, line, model = rig
    chat = line.user("switcher")
    line.inject_text(chat, "/model")
    [listing] = settled(line, chat, 1)
    assert listing["text"].endswith("Send /model NAME to switch."), listing["text"]
    assert quick_replies(listing) == {"large-model": ("md:large-model", "/model large-model")}
    answered_webhook(line, line.press_quick_reply(chat, "large-model"))
    assert [m["text"] for m in settled(line, chat, 2)][1] == "Switched to large-model: the next answer uses it."
    before = len(model.requests)
    model.script(text_reply("Answered by the large model."))
    line.inject_text(chat, "hello")
    assert [m["text"] for m in settled(line, chat, 3)][2] == "Answered by the large model."
    assert model.requests[before].body["model"] == "large-model"


def test_a_press_of_a_button_storage_does_not_know_is_told_so_with_its_reply_token_and_stores_nothing(rig):
    gw, line, model = rig
    chat = line.user("stale")
    before = len(model.requests)
    stale = line.event(chat, None, "postback", {"postback": {"data": "ap:AAAAAAAAAAAAAAAA:y"}})
    answered_webhook(line, line.deliver([stale]))
    [told] = settled(line, chat, 1)
    assert (told["text"], told["via"]) == ("This button is no longer valid.", "reply"), told
    with sqlite3.connect(gw.state / "gateway.db") as db:
        stored = db.execute("SELECT COUNT(*) FROM inbox WHERE platform_message_id = ?",
                            (stale["webhookEventId"],)).fetchone()[0]
    assert stored == 0 and len(model.requests) == before, "nothing stored, no turn"
