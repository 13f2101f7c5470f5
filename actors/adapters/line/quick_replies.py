"""LINE's buttons (quick replies) and their presses (``postback`` events): pure functions, no network.

A question (a tool approval's, or ``/model``'s listing) is sent as its text message with ``quickReply.items``: one
``postback`` action per button, its ``data`` the button's data (``ap:<approval id>:y`` / ``md:<model>``, at most
300 characters), its ``label`` the button's label (at most 20 characters) and its ``displayText`` the answer's
words (``approve 7KQ2``, ``/model NAME``), which LINE shows in the chat as the presser's message. LINE keeps quick
replies on the chat's last message only, and removes them once the user presses one or writes anything: nothing
can be edited afterwards, so a settled question is never shown changed (the session's reply says what became of it).

A press arrives as a ``postback`` event (webhook), with the presser's source, a ``replyToken`` and its
``webhookEventId``, the same in every redelivery of it: the press's id, and the inbox's dedup of its row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from actors.approvals.answers import parse_button_data, pressable_code
from actors.adapters.line.inbound import ANSWER_FIELD, event_id, is_redelivery, reply_token_of, source_of
from actors.adapters.payload_fields import MalformedPayload
from actors.profiles.model_buttons import model_of_button

MAX_ITEMS = 13                     # LINE's limit of quick reply buttons on one message
LABEL_LIMIT = 20
DATA_LIMIT = 300
DISPLAY_LIMIT = 300


@dataclass(frozen=True)
class Press:
    """A press of one of our buttons: its id (the postback's ``webhookEventId``), the chat and presser, the
    button's data, and the reply token LINE gave with it (None in a redelivery: it is as old as the first try)."""
    press_id: str
    chat_id: str
    user_id: str
    data: str
    reply_token: Optional[str]


def words_of(data: str, question: str) -> Optional[str]:
    """What pressing the button ``data`` says in the chat: ``/model NAME``, or ``approve CODE`` / ``deny CODE`` with
    the code the question's text names; None for data that is no button of ours."""
    model = model_of_button(data)
    if model is not None:
        return f"/model {model}"
    press, code = parse_button_data(data), pressable_code(question)
    return f"{press.verdict} {code}" if press is not None and code is not None else None


def quick_reply(buttons: tuple, question: str) -> Optional[dict]:
    """The ``quickReply`` of a message carrying ``buttons`` ((label, data), ...); None without buttons."""
    items = []
    for label, data in buttons[:MAX_ITEMS]:
        words = words_of(data, question) or label
        if len(data) > DATA_LIMIT:
            continue
        items.append({"type": "action", "action": {"type": "postback", "label": label[:LABEL_LIMIT], "data": data,
                                                   "displayText": words[:DISPLAY_LIMIT]}})
    return {"items": items} if items else None


def press_of(event: Any, platform: str, profile: str) -> Optional[Press]:
    """A ``postback`` event whose data is one of our buttons' as a Press; None for any other event (a postback of
    something else stays the ``[pressed: data]`` message it always was). MalformedPayload for one of ours without a
    source or id to answer it by."""
    if not isinstance(event, dict) or event.get("type") != "postback" or ANSWER_FIELD in event:
        return None
    postback = event.get("postback")
    data = postback.get("data") if isinstance(postback, dict) else None
    if not isinstance(data, str) or len(data) > DATA_LIMIT or (model_of_button(data) is None
                                                                and parse_button_data(data) is None):
        return None
    press_id = event_id(event)
    if press_id is None:
        raise MalformedPayload("a button's postback without a webhookEventId")
    source = source_of(event, platform, profile, f"postback {press_id}")
    token = None if is_redelivery(event) else reply_token_of(event)
    return Press(press_id, source.chat_id, source.user_id or source.chat_id, data, token)
