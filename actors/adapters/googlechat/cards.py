"""Google Chat's buttons (a ``cardsV2`` card) and their presses (``CARD_CLICKED`` events): pure functions, no
network.

A question is sent as its text (what the notification and every client show) and one card under it: a section with
a ``buttonList``, a button per answer (Approve / Deny, or a model of /model's listing), each button's
``onClick.action`` naming the function ``ANSWER_FUNCTION`` with one parameter, ``ANSWER_PARAMETER``, the button's
data (an approval's id and verdict, or ``md:MODEL``; at most ``MAX_DATA_CHARS``). Once settled, the message is
patched to the settled text with no card: the buttons are gone.

A press is one ``CARD_CLICKED`` event POSTed to the app's endpoint with the same Google-signed bearer as a message
(webhook_server.py verifies it first): ``user`` is the presser, ``message`` the app's message the card is on (its
``name``, ``text``, ``thread``), ``space`` its space, and the pressed action twice, as ``common.invokedFunction`` /
``common.parameters`` (a map) and as the older ``action.actionMethodName`` / ``action.parameters`` (a list of
``{key, value}``); either is read.

The event has no id of its own. A press is named by its message, its presser and its ``eventTime`` (``press_id``):
Google Chat never delivers an event again, so the only repeat of a press is the same request POSTed again (a proxy's
or a test fake's retry), which carries all three unchanged and is one row (the inbox's dedup); two presses by one
user on one message are two clicks, two events with their own ``eventTime`` (microseconds), each judged on its own:
the approval keeps the first answer, and a press judged after it is told what came first. The three are hashed
(``card:`` + 32 hex digits): a fixed length whatever their sizes.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any, Optional

from actors.adapters.googlechat.inbound import _MESSAGE, _USER, MAX_NAME_CHARS, is_dm, thread_of
from actors.adapters.payload_fields import MalformedPayload, a_string
from actors.messages import MessageEvent, Source

CARD_CLICKED = "CARD_CLICKED"
ANSWER_FUNCTION = "gateway_answer"     # the action every button of ours names
ANSWER_PARAMETER = "answer"            # its one parameter: the button's data
ANSWER_FIELD = "gateway_press_answer"  # put on a CARD_CLICKED event by the adapter: the press's answer, as words
CARD_ID = "answers"
MAX_DATA_CHARS = 255
MAX_EVENT_TIME_CHARS = 64


@dataclass(frozen=True)
class Press:
    """A button press: its id (the same in a repeat of the same POST), who pressed (name and display name), the
    space, the thread the message is in (None outside a thread), the message (its name and text), the button's
    data."""
    press_id: str
    user_id: str
    user_name: Optional[str]
    space: str
    thread: Optional[str]
    message_name: str
    message_text: str
    data: str


def question_cards(buttons: tuple) -> list:
    """The ``cardsV2`` of a message: one card of the buttons (label, data); [] without buttons (no card)."""
    if not buttons:
        return []
    return [{"cardId": CARD_ID, "card": {"sections": [{"widgets": [{"buttonList": {"buttons": [
        {"text": label, "onClick": {"action": {"function": ANSWER_FUNCTION, "parameters": [
            {"key": ANSWER_PARAMETER, "value": data}]}}} for label, data in buttons]}}]}]}}]


def press_id(message_name: str, user: str, event_time: str) -> str:
    digest = hashlib.sha256(f"{message_name}\n{user}\n{event_time}".encode()).hexdigest()[:32]
    return f"card:{digest}"


def pressed_data(event: dict) -> Optional[str]:
    """The ``answer`` parameter of a click on one of our buttons (None: another function, or none)."""
    common = event.get("common") if isinstance(event.get("common"), dict) else {}
    action = event.get("action") if isinstance(event.get("action"), dict) else {}
    if common.get("invokedFunction") == ANSWER_FUNCTION and isinstance(common.get("parameters"), dict):
        value = common["parameters"].get(ANSWER_PARAMETER)
        if isinstance(value, str):
            return value
    if action.get("actionMethodName") == ANSWER_FUNCTION and isinstance(action.get("parameters"), list):
        for parameter in action["parameters"]:
            if isinstance(parameter, dict) and parameter.get("key") == ANSWER_PARAMETER \
                    and isinstance(parameter.get("value"), str):
                return parameter["value"]
    return None


def press_of(event: Any) -> Optional[Press]:
    """A ``CARD_CLICKED`` event on one of our buttons as a Press; None for any other event, or one without what a
    press needs (a presser, the app's message in a space, an event time, our function's parameter)."""
    if not isinstance(event, dict) or event.get("type") != CARD_CLICKED:
        return None
    user, message, event_time = event.get("user"), event.get("message"), event.get("eventTime")
    data = pressed_data(event)
    if not (isinstance(user, dict) and isinstance(message, dict) and isinstance(event_time, str)
            and 0 < len(event_time) <= MAX_EVENT_TIME_CHARS and data is not None):
        return None
    user_id, name = user.get("name"), message.get("name")
    if not (isinstance(user_id, str) and _USER.match(user_id) and isinstance(name, str) and _MESSAGE.match(name)):
        return None
    space = event.get("space") if isinstance(event.get("space"), dict) else message.get("space")
    if not isinstance(space, dict) or not isinstance(space.get("name"), str) \
            or not name.startswith(space["name"] + "/messages/"):
        return None
    thread = thread_of(space, message)
    display = user.get("displayName")
    return Press(press_id(name, user_id, event_time), user_id,
                 display[:MAX_NAME_CHARS] if isinstance(display, str) and display else None, space["name"], thread,
                 name, message.get("text") if isinstance(message.get("text"), str) else "", data[:MAX_DATA_CHARS])


def mention(user_id: str) -> str:
    """How a Chat message names a user (``<users/123>``, shown as their name)."""
    return f"<{user_id}>"


def event_from_press(event: dict, platform: str, profile: str) -> MessageEvent:
    """A press read as its answer (``ANSWER_FIELD``): the presser's message in the question's space and thread."""
    press = press_of(event)
    text = a_string(event.get(ANSWER_FIELD), f"{CARD_CLICKED}: {ANSWER_FIELD}")
    if press is None:
        raise MalformedPayload(f"{CARD_CLICKED}: no presser, message of a space, event time or answer parameter")
    space = event.get("space") if isinstance(event.get("space"), dict) else event["message"]["space"]
    dm = is_dm(space)
    chat_type = "dm" if dm else "thread" if press.thread else "group"
    source = Source(platform=platform, chat_id=press.space, chat_type=chat_type, thread_id=press.thread,
                    user_id=press.user_id, user_name=press.user_name, profile=profile)
    return MessageEvent(source=source, text=text, platform_message_id=press.press_id, received_at=time.time(),
                        reply_to_message_id=press.message_name, addressed=None if dm else True)
