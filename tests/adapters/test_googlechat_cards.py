"""Google Chat's buttons, their pure parts (actors/adapters/googlechat/cards.py): the card a question carries, and a
CARD_CLICKED event read as a press (its id, who pressed, where) and as the presser's answer. The presses through
the real daemon: tests/pipeline/test_googlechat_approvals.py."""
from __future__ import annotations

import pytest

from actors.adapters.googlechat.cards import (ANSWER_FIELD, event_from_press, mention, press_of, question_cards)
from actors.adapters.payload_fields import MalformedPayload
from tests.fakes.googlechat import FakeGoogleChat
from tests.fakes.googlechat.server import buttons_of, valid_cards

pytestmark = pytest.mark.timeout(60)

BUTTONS = (("Approve", "ap:0123456789abcdef:approve"), ("Deny", "ap:0123456789abcdef:deny"))


def test_a_question_carries_one_card_of_a_button_per_answer_and_other_texts_none():
    cards = question_cards(BUTTONS)
    assert valid_cards(cards)
    assert {label: action["parameters"] for label, action in buttons_of({"cards": cards}).items()} == {
        "Approve": [{"key": "answer", "value": "ap:0123456789abcdef:approve"}],
        "Deny": [{"key": "answer", "value": "ap:0123456789abcdef:deny"}]}
    assert {a["function"] for a in buttons_of({"cards": cards}).values()} == {"gateway_answer"}
    assert question_cards(()) == [], "no buttons: no card (a patch with [] removes one)"


@pytest.fixture(scope="module")
def chat():
    with FakeGoogleChat() as fake:   # its event builders only: nothing is posted
        yield fake


def clicked(chat: FakeGoogleChat, space: str, label: str = "Approve", user: str = "alice") -> dict:
    with chat.mutate() as state:
        name = f"{space}/messages/q1.00000001"
        state["messages"].setdefault(space, []).append({
            "name": name, "text": "Run it?", "thread": f"{space}/threads/q1", "deleted": False, "edits": 0,
            "at": 0.0, "cards": question_cards(BUTTONS)})
    return chat.click_event(space, name, label, user)


def test_a_click_is_a_press_named_by_its_message_presser_and_time(chat):
    space = chat.space("cards")
    event = clicked(chat, space)
    press = press_of(event)
    assert (press.user_id, press.space, press.message_name, press.data) == (
        chat.user("alice"), space, f"{space}/messages/q1.00000001", "ap:0123456789abcdef:approve")
    assert press.thread == f"{space}/threads/q1" and press.message_text == "Run it?"
    assert press.press_id.startswith("card:") and len(press.press_id) == 37
    assert press_of(dict(event)).press_id == press.press_id, "the same POST again: the same press"
    assert press_of(dict(event, eventTime="2026-01-01T00:00:00.000001Z")).press_id != press.press_id
    assert press_of(dict(event, user={"name": "users/999"})).press_id != press.press_id
    only_common = {k: v for k, v in event.items() if k != "action"}
    only_action = {k: v for k, v in event.items() if k != "common"}
    assert press_of(only_common) == press_of(only_action) == press, "either form of the action is read"


def test_clicks_that_are_no_press_of_ours_are_none(chat):
    event = clicked(chat, chat.space("others"))
    common = dict(event["common"], invokedFunction="someone_elses")
    assert press_of({k: v for k, v in dict(event, common=common).items() if k != "action"}) is None
    assert press_of(dict(event, type="MESSAGE")) is None
    assert press_of(dict(event, user={"name": "bots/1"})) is None
    assert press_of({k: v for k, v in event.items() if k != "eventTime"}) is None
    moved = dict(event, message=dict(event["message"], name="spaces/ELSEWHERE/messages/q1"))
    assert press_of(moved) is None, "a message of another space than the event's"


def test_a_kept_press_is_the_pressers_answer_in_the_questions_space_and_thread(chat):
    space = chat.space("answers")
    event = dict(clicked(chat, space), **{ANSWER_FIELD: "approve K7Q2"})
    message = event_from_press(event, "googlechat", "default")
    assert message.text == "approve K7Q2" and message.platform_message_id == press_of(event).press_id
    assert (message.source.chat_id, message.source.chat_type, message.source.thread_id, message.source.user_id) == (
        space, "thread", f"{space}/threads/q1", chat.user("alice"))
    assert message.reply_to_message_id == f"{space}/messages/q1.00000001" and message.addressed is True
    dm = chat.dm("bob")
    in_dm = event_from_press(dict(clicked(chat, dm, user="bob"), **{ANSWER_FIELD: "deny K7Q2"}), "googlechat", "p")
    assert (in_dm.source.chat_type, in_dm.source.thread_id, in_dm.addressed) == ("dm", None, None)
    with pytest.raises(MalformedPayload, match=ANSWER_FIELD):
        event_from_press(clicked(chat, dm), "googlechat", "default")
    assert mention("users/123") == "<users/123>"
