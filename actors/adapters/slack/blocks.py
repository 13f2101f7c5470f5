"""Slack's buttons (Block Kit) and their presses (``block_actions``): pure functions, no network.

A question is sent as its text (the notification's fallback, and what a press's payload carries back) and as
blocks: ``section`` blocks of that text (at most 3,000 characters each, at most 48 of them), then one ``actions``
block of two buttons, Approve ``primary`` (green) and Deny ``danger`` (red), each with its approval's data as
``value`` (at most 2,000 characters; ours are 23). Once settled, the message is updated to the settled text as
sections only: the buttons are gone.

A press arrives over Socket Mode as an ``interactive`` envelope whose payload is ``block_actions`` (acknowledged
with its ``envelope_id`` once its row is committed, like an event). A press read as an answer is the presser's
message ``approve CODE`` in the button's channel (and thread), stored under the id
``action:<user>:<action_ts>``, which a redelivery of the same envelope repeats: one row.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload, a_string, an_object
from actors.adapters.slack.inbound import TS, chat_type_of
from actors.messages import MessageEvent, Source

SECTION_TEXT_LIMIT = 3000
MAX_SECTIONS = 48                     # of Slack's 50 blocks, one left for the actions
BUTTON_STYLES = {"Approve": "primary", "Deny": "danger"}
ACTIONS_BLOCK_ID = "approval"
ANSWER_FIELD = "approval_answer"      # put on a block_actions payload by the adapter: the press's answer, as words
MAX_ID_CHARS = 255


@dataclass(frozen=True)
class Press:
    """A button press: its id (unique per press, the same in a redelivery), who pressed, the channel, thread and
    message the button is on (its ts and text), and the button's value."""
    press_id: str
    user_id: str
    channel_id: str
    thread_ts: Optional[str]
    message_ts: str
    message_text: str
    value: str


def sections(text: str) -> list:
    """``text`` (already mrkdwn) as section blocks of at most 3,000 characters each."""
    pieces = [text[i:i + SECTION_TEXT_LIMIT] for i in range(0, len(text), SECTION_TEXT_LIMIT)][:MAX_SECTIONS]
    return [{"type": "section", "text": {"type": "mrkdwn", "text": piece}} for piece in pieces if piece.strip()]


def question_blocks(text: str, buttons: tuple) -> Optional[list]:
    """The blocks of a message: None (text only) without buttons; else sections and the actions block."""
    if not buttons:
        return None
    return sections(text) + [{"type": "actions", "block_id": ACTIONS_BLOCK_ID, "elements": [
        {"type": "button", "text": {"type": "plain_text", "text": label}, "style": BUTTON_STYLES.get(label, "primary"),
         "action_id": f"{ACTIONS_BLOCK_ID}_{label.lower()}", "value": data} for label, data in buttons]}]


def press_of(payload: Any) -> Optional[Press]:
    """A ``block_actions`` payload as a Press; None for any other payload or one without what a press needs (a
    user, a message in a channel, one action with a value)."""
    if not isinstance(payload, dict) or payload.get("type") != "block_actions":
        return None
    user, container, message = payload.get("user"), payload.get("container"), payload.get("message")
    actions = payload.get("actions")
    if not (isinstance(user, dict) and isinstance(container, dict) and isinstance(message, dict)
            and isinstance(actions, list) and len(actions) == 1 and isinstance(actions[0], dict)):
        return None
    user_id, channel_id = user.get("id"), container.get("channel_id")
    message_ts, action_ts = container.get("message_ts"), actions[0].get("action_ts")
    value = actions[0].get("value")
    if not (isinstance(user_id, str) and user_id and isinstance(channel_id, str) and channel_id
            and isinstance(message_ts, str) and TS.fullmatch(message_ts) and isinstance(action_ts, str)
            and TS.fullmatch(action_ts) and isinstance(value, str)):
        return None
    thread_ts = message.get("thread_ts")
    thread_ts = thread_ts if isinstance(thread_ts, str) and TS.fullmatch(thread_ts) and thread_ts != message_ts \
        else None
    text = message.get("text") if isinstance(message.get("text"), str) else ""
    return Press(f"action:{user_id[:40]}:{action_ts}", user_id[:MAX_ID_CHARS], channel_id[:MAX_ID_CHARS], thread_ts,
                 message_ts, text, value[:MAX_ID_CHARS])


def mention(user_id: str) -> str:
    """How a Slack message names a user (shown as their name)."""
    return f"<@{user_id}>"


def event_from_press(payload: dict, platform: str, profile: str) -> MessageEvent:
    """A press read as an approval's answer (``ANSWER_FIELD``): the presser's message where the button is."""
    an_object(payload, "block_actions payload")
    press = press_of(payload)
    text = a_string(payload.get(ANSWER_FIELD), f"block_actions: {ANSWER_FIELD}")
    if press is None:
        raise MalformedPayload("block_actions: no user, channel, message or single action with a value")
    chat_type = chat_type_of({"channel": press.channel_id})
    if chat_type != "dm" and press.thread_ts is not None:
        chat_type = "thread"
    team = payload.get("team")
    source = Source(platform=platform, chat_id=press.channel_id, chat_type=chat_type, thread_id=press.thread_ts,
                    user_id=press.user_id, user_name=_name(payload.get("user")), profile=profile,
                    community=team.get("id") if isinstance(team, dict) and isinstance(team.get("id"), str) else None)
    return MessageEvent(source=source, text=text, platform_message_id=press.press_id, received_at=time.time(),
                        reply_to_message_id=f"{press.channel_id}:{press.message_ts}", addressed=True)


def _name(user: Any) -> Optional[str]:
    names = [user.get(k) for k in ("username", "name")] if isinstance(user, dict) else []
    return next((n for n in names if isinstance(n, str) and n), None)
