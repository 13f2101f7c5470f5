"""Slack's buttons on their own (actors/adapters/slack/blocks.py): the question's blocks, a press read from a
block_actions payload and as the presser's answer; and the fake Slack's interactive side
(tests/fakes/slack/interactive.py) as the adapter's Web API client speaks it: actions blocks checked, a press
queued as an interactive envelope, chat.postEphemeral."""
from __future__ import annotations

import asyncio

import pytest

from actors.adapters.errors import PermanentError
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.slack.blocks import (ANSWER_FIELD, SECTION_TEXT_LIMIT, event_from_press, mention, press_of,
                                          question_blocks, sections)
from actors.adapters.slack.client import SlackAPI
from actors.approvals.answers import buttons_for, parse_button_data
from tests.fakes.slack import DEFAULT_BOT_TOKEN, FakeSlack

pytestmark = pytest.mark.timeout(30)
APPROVAL_ID = "AbCdEfGhIjKl-_78"


def test_the_question_is_its_sections_then_approve_primary_and_deny_danger():
    text = "x" * (SECTION_TEXT_LIMIT + 10)
    blocks = question_blocks(text, buttons_for(APPROVAL_ID))
    assert [b["type"] for b in blocks] == ["section", "section", "actions"]
    assert "".join(b["text"]["text"] for b in blocks[:2]) == text
    elements = blocks[2]["elements"]
    assert [(e["text"]["text"], e["style"]) for e in elements] == [("Approve", "primary"), ("Deny", "danger")]
    assert [parse_button_data(e["value"]).verdict for e in elements] == ["approve", "deny"]
    assert question_blocks(text, ()) is None, "no buttons: a text message as before"
    assert sections("   ") == []


def payload(**changes) -> dict:
    base = {"type": "block_actions", "user": {"id": "U0ALICE001", "username": "alice"},
            "container": {"type": "message", "message_ts": "1700000000.000100", "channel_id": "C0GENERAL1"},
            "message": {"ts": "1700000000.000100", "text": "the question"}, "team": {"id": "T0FAKE0001"},
            "actions": [{"type": "button", "value": "ap:x:y", "action_ts": "1700000001.000200"}]}
    base.update(changes)
    return base


def test_a_press_is_read_from_its_payload_and_anything_else_is_no_press():
    press = press_of(payload())
    assert (press.press_id, press.user_id, press.channel_id, press.thread_ts, press.message_ts, press.message_text,
            press.value) == ("action:U0ALICE001:1700000001.000200", "U0ALICE001", "C0GENERAL1", None,
                             "1700000000.000100", "the question", "ap:x:y")
    threaded = press_of(payload(message={"ts": "1700000000.000100", "thread_ts": "1690000000.000001"}))
    assert threaded.thread_ts == "1690000000.000001"
    assert press_of(payload(type="view_submission")) is None and press_of(payload(actions=[])) is None
    assert press_of(payload(container={"channel_id": "C0GENERAL1", "message_ts": "nope"})) is None
    assert press_of(None) is None


def test_a_press_kept_as_an_answer_reads_as_the_pressers_message_where_the_button_is():
    event = event_from_press(dict(payload(), **{ANSWER_FIELD: "deny 7KQ2"}), "slack", "default")
    assert (event.text, event.platform_message_id, event.source.chat_id, event.source.chat_type,
            event.source.user_id, event.source.user_name, event.source.community) == (
        "deny 7KQ2", "action:U0ALICE001:1700000001.000200", "C0GENERAL1", "group", "U0ALICE001", "alice",
        "T0FAKE0001")
    in_thread = dict(payload(message={"ts": "1700000000.000100", "thread_ts": "1690000000.000001"}),
                     **{ANSWER_FIELD: "deny 7KQ2"})
    event = event_from_press(in_thread, "slack", "default")
    assert (event.source.chat_type, event.source.thread_id) == ("thread", "1690000000.000001")
    with pytest.raises(MalformedPayload):
        event_from_press(payload(), "slack", "default")
    assert mention("U1") == "<@U1>"


def test_the_fakes_buttons_presses_and_ephemeral_messages_as_the_client_speaks_them():
    async def scenario(slack: FakeSlack):
        slack.inject_message("hello", "C0GENERAL1", user="U0ALICE001")
        async with SlackAPI(DEFAULT_BOT_TOKEN, slack.api_url) as api:
            bad = [{"type": "actions", "elements": [{"type": "button", "text": {"type": "plain_text", "text": "x"},
                                                     "action_id": "a", "style": "green"}]}]
            with pytest.raises(PermanentError, match="invalid_blocks"):
                await api.post_message("C0GENERAL1", "q", blocks=bad)
            blocks = question_blocks("a question", buttons_for(APPROVAL_ID))
            ts = await api.post_message("C0GENERAL1", "a question", blocks=blocks)
            value = blocks[-1]["elements"][0]["value"]
            with pytest.raises(ValueError, match="no button"):
                slack.press_button("C0GENERAL1", ts, "ap:unknown:y")
            pressed = slack.press_button("C0GENERAL1", ts, value, user="U0ALICE001")
            assert pressed["type"] == "block_actions" and pressed["message"]["ts"] == ts
            [queued] = slack.interactive_events()
            assert queued["kind"] == "interactive" and queued["status"] == "pending"
            await api.update("C0GENERAL1", ts, "settled", blocks=sections("settled"))
            with pytest.raises(ValueError, match="no button"):
                slack.press_button("C0GENERAL1", ts, value)
            await api.post_ephemeral("C0GENERAL1", "U0ALICE001", "only for alice")
            with pytest.raises(PermanentError, match="user_not_found"):
                await api.post_ephemeral("C0GENERAL1", "U0NOBODY01", "no such user")
            assert [(e["user"], e["text"]) for e in slack.ephemeral("C0GENERAL1")] == [("U0ALICE001",
                                                                                         "only for alice")]
            assert [m["text"] for m in slack.messages("C0GENERAL1")] == ["settled"]
    with FakeSlack(ping_interval=0) as slack:
        asyncio.run(scenario(slack))
