"""Discord's buttons on their own (actors/adapters/discord/components.py): the question's action row, a press read
from INTERACTION_CREATE and as the presser's answer, the callback bodies; and the fake Discord's interactions
(tests/fakes/discord/interactions.py) spoken by the adapter's REST client: components checked, a press dispatched,
one callback within the window, the second refused, type 7 editing the message, type 4 ephemeral."""
from __future__ import annotations

import asyncio

import pytest

from actors.adapters.discord.client import DiscordREST
from actors.adapters.discord.components import (ANSWER_FIELD, ack_body, action_rows, event_from_press, mention,
                                                press_of)
from actors.adapters.errors import PermanentError
from actors.adapters.payload_fields import MalformedPayload
from actors.approvals.answers import buttons_for, parse_button_data
from tests.fakes.discord import DEFAULT_TOKEN, DEFAULT_USER_ID, GENERAL_CHANNEL_ID, FakeDiscord

pytestmark = pytest.mark.timeout(30)
APPROVAL_ID = "AbCdEfGhIjKl-_78"


def test_the_question_has_one_row_approve_green_deny_red_carrying_the_approvals_data():
    [row] = action_rows(buttons_for(APPROVAL_ID))
    assert row["type"] == 1
    assert [(b["type"], b["style"], b["label"]) for b in row["components"]] == [(2, 3, "Approve"), (2, 4, "Deny")]
    assert [parse_button_data(b["custom_id"]).verdict for b in row["components"]] == ["approve", "deny"]
    assert action_rows(()) == []


def interaction(**changes) -> dict:
    base = {"id": "1600000000000000001", "type": 3, "token": "tok", "channel_id": "1600000000000000002",
            "channel": {"id": "1600000000000000002", "type": 1}, "data": {"custom_id": "ap:x:y", "component_type": 2},
            "message": {"id": "1600000000000000003", "content": "the question"},
            "user": {"id": "1600000000000000004", "username": "alice"}}
    base.update(changes)
    return base


def test_a_press_is_read_from_its_interaction_and_anything_else_is_no_press():
    press = press_of(interaction())
    assert (press.interaction_id, press.token, press.user_id, press.channel_id, press.message_id,
            press.message_text, press.custom_id) == ("1600000000000000001", "tok", "1600000000000000004",
                                                     "1600000000000000002", "1600000000000000003", "the question",
                                                     "ap:x:y")
    guild = interaction(user=None, guild_id="1600000000000000009", member={"user": {"id": "1600000000000000005"}})
    assert press_of(guild).user_id == "1600000000000000005"
    assert press_of(interaction(type=2)) is None, "a slash command is no press"
    assert press_of(interaction(token="")) is None and press_of(interaction(message=None)) is None
    assert press_of(interaction(user={"id": "not a snowflake"})) is None and press_of("nope") is None


def test_a_press_kept_as_an_answer_reads_as_the_pressers_message_in_the_buttons_channel():
    event = event_from_press(dict(interaction(), **{ANSWER_FIELD: "approve 7KQ2"}), "discord", "default")
    assert (event.text, event.platform_message_id, event.source.chat_id, event.source.chat_type,
            event.source.user_id, event.source.user_name) == ("approve 7KQ2", "interaction:1600000000000000001",
                                                              "1600000000000000002", "dm", "1600000000000000004",
                                                              "alice")
    with pytest.raises(MalformedPayload):
        event_from_press(interaction(), "discord", "default")


def test_the_callback_bodies():
    assert ack_body("stored") == {"type": 6}
    settled = ack_body("settled", "Approved by <@1>.")
    assert settled["type"] == 7 and settled["data"]["components"] == [] and settled["data"]["content"].endswith(".")
    refused = ack_body("refused", "This question is not yours to answer.")
    assert refused["type"] == 4 and refused["data"]["flags"] == 64
    assert mention("42") == "<@42>"
    with pytest.raises(ValueError):
        ack_body("other")


def test_the_fakes_interactions_as_the_rest_client_speaks_them():
    async def scenario(dc: FakeDiscord):
        async with DiscordREST(DEFAULT_TOKEN, dc.api_url) as api:
            with pytest.raises(PermanentError, match="50035"):
                await api.create_message(str(GENERAL_CHANNEL_ID), "bad", components=[{"type": 2}])
            sent = await api.create_message(str(GENERAL_CHANNEL_ID), "a question",
                                            components=action_rows(buttons_for(APPROVAL_ID)))
            custom_id = sent["components"][0]["components"][0]["custom_id"]
            with pytest.raises(ValueError, match="no button"):
                dc.press_button(GENERAL_CHANNEL_ID, int(sent["id"]), "ap:unknown:y")
            first = dc.press_button(GENERAL_CHANNEL_ID, int(sent["id"]), custom_id)
            assert first["member"]["user"]["id"] == str(DEFAULT_USER_ID) and first["message"]["id"] == sent["id"]
            with pytest.raises(PermanentError, match="10062"):
                await api.answer_interaction(first["id"], "wrong-token", ack_body("stored"))
            await api.answer_interaction(first["id"], first["token"], ack_body("settled", "settled"))
            with pytest.raises(PermanentError, match="40060"):
                await api.answer_interaction(first["id"], first["token"], ack_body("stored"))
            [message] = dc.messages(GENERAL_CHANNEL_ID)
            assert message["content"] == "settled" and message["components"] == []
            with pytest.raises(ValueError, match="no button"):
                dc.press_button(GENERAL_CHANNEL_ID, int(sent["id"]), custom_id)
            again = await api.edit_message(str(GENERAL_CHANNEL_ID), sent["id"], "again",
                                           components=action_rows(buttons_for(APPROVAL_ID)))
            second = dc.press_button(GENERAL_CHANNEL_ID, int(again["id"]), custom_id, user_id=DEFAULT_USER_ID + 1)
            await api.answer_interaction(second["id"], second["token"], ack_body("refused", "not yours"))
            assert dc.interaction(second["id"])["ephemeral"] == "not yours"
            assert len(dc.messages(GENERAL_CHANNEL_ID)) == 1, "an ephemeral answer is no message of the channel"
            dc.configure(interaction_window=0.0)
            late = dc.press_button(GENERAL_CHANNEL_ID, int(again["id"]), custom_id)
            with pytest.raises(PermanentError, match="10062"):
                await api.answer_interaction(late["id"], late["token"], ack_body("stored"))
    with FakeDiscord() as dc:
        asyncio.run(scenario(dc))
