"""Teams' buttons (an Adaptive Card of ``Action.Submit`` actions) and their presses: pure functions, no network.

A question's buttons ride on its message activity as one attachment of content type
``application/vnd.microsoft.card.adaptive``: a card with no body (the question is the activity's text) and one
``Action.Submit`` per button, Approve ``positive``, Deny ``destructive``, each with ``data`` ``{"answer": <the
button's data>}``. A press arrives as a ``message`` activity like any other, signed by the Connector: no text,
``value`` the action's data (merged with the card's inputs: it has none), ``replyToId`` the card's activity. There
is no callback to answer: the activity's 200 is its acknowledgement, and the question is updated (PUT of the bot's
activity, its card gone) once settled. Nothing on Teams is shown to one member of a conversation alone, so a press
that may not answer is told why in the conversation itself (the adapter says it once per presser and question).

A press read as an answer is the presser's message ``approve CODE`` (``ANSWER_FIELD``, put on the activity by the
adapter), stored under the activity's own id like any message: one press delivered twice is one row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from actors.adapters.teams.inbound import MAX_ID_CHARS, conversation_id, message_key

CARD_TYPE = "application/vnd.microsoft.card.adaptive"
CARD_VERSION = "1.4"
DATA_KEY = "answer"                  # the key of an Action.Submit's data naming the button
ANSWER_FIELD = "approval_answer"     # put on a press by the adapter: the press's answer, as words
MAX_DATA_CHARS = 100                 # a button's data (ours are at most 23 for an approval, a model name for /model)
ACTION_STYLES = {"Approve": "positive", "Deny": "destructive"}


@dataclass(frozen=True)
class Press:
    """A card's button pressed: the press's activity id (what dedup names), the conversation, the presser, the
    question's activity id and the button's data."""
    activity_id: str
    conversation: str
    user_id: str
    question_id: str
    data: str


def card_attachments(buttons: tuple) -> list:
    """``answers.buttons_for``'s ((label, data), ...) as one Adaptive Card attachment of Action.Submit buttons;
    [] for none."""
    if not buttons:
        return []
    actions = [{"type": "Action.Submit", "title": label, "data": {DATA_KEY: data[:MAX_DATA_CHARS]},
                **({"style": ACTION_STYLES[label]} if label in ACTION_STYLES else {})} for label, data in buttons]
    return [{"contentType": CARD_TYPE, "content": {
        "type": "AdaptiveCard", "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": CARD_VERSION, "body": [], "actions": actions}}]


def is_press(activity: Any) -> bool:
    """A card submit: a message activity carrying ``value`` (an object) and no text."""
    return (isinstance(activity, dict) and activity.get("type") == "message" and isinstance(activity.get("value"), dict)
            and not (isinstance(activity.get("text"), str) and activity["text"].strip()))


def press_of(activity: Any) -> Optional[Press]:
    """A card submit as a Press; None for any other activity, or one without what a press needs (its id and
    conversation, a presser, the question it was made on, our button's data)."""
    if not is_press(activity) or message_key(activity) is None:
        return None
    sender = activity.get("from") if isinstance(activity.get("from"), dict) else {}
    user, question = sender.get("id"), activity.get("replyToId")
    data = activity["value"].get(DATA_KEY)
    if not all(isinstance(v, str) and 0 < len(v) <= MAX_ID_CHARS for v in (user, question)):
        return None
    if not isinstance(data, str) or not data or len(data) > MAX_DATA_CHARS:
        return None
    return Press(activity["id"], conversation_id(activity), user, question, data)
