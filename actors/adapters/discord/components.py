"""Discord's buttons (message components) and their presses (``INTERACTION_CREATE``): pure functions, no network.

A question's buttons are one action row (component type 1) of buttons (type 2), Approve green (style 3, Success),
Deny red (style 4, Danger), each with its approval's data as ``custom_id`` (at most 100 characters; ours are 23).
A press arrives on the gateway as ``INTERACTION_CREATE`` of type 3 (MESSAGE_COMPONENT) and must be answered within
3 seconds on ``POST /interactions/{id}/{token}/callback`` (``ack_body``): type 6 (DEFERRED_UPDATE_MESSAGE) for a
press stored as an answer (the question is edited once the session has decided), type 7 (UPDATE_MESSAGE) for a
press on a question already settled (the message then shows what became of it, its buttons gone), and type 4
(CHANNEL_MESSAGE_WITH_SOURCE) with the EPHEMERAL flag for a press that may not answer: only the presser sees why.

A press read as an answer is the presser's message ``approve CODE`` in the button's channel (``event_from_press``),
stored under the id ``interaction:<interaction id>``, so an interaction the gateway replays after a Resume is one
row.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional

from actors.adapters.discord.inbound import _id, chat_kind
from actors.adapters.payload_fields import MalformedPayload, a_string, an_object
from actors.adapters.presses import REFUSED, SETTLED, STORED
from actors.messages import MessageEvent, Source

ACTION_ROW, BUTTON = 1, 2
SUCCESS, DANGER = 3, 4
BUTTON_STYLES = {"Approve": SUCCESS, "Deny": DANGER}
MESSAGE_COMPONENT = 3                      # interaction type
CHANNEL_MESSAGE_WITH_SOURCE, DEFERRED_UPDATE_MESSAGE, UPDATE_MESSAGE = 4, 6, 7
EPHEMERAL = 1 << 6
MAX_CUSTOM_ID = 100
ANSWER_FIELD = "approval_answer"           # put on an interaction by the adapter: the press's answer, as words


@dataclass(frozen=True)
class Press:
    """A button press: the interaction's id and token (what the callback names), who pressed, where, the message
    the button is on (its id and text) and the button's ``custom_id``."""
    interaction_id: str
    token: str
    user_id: str
    channel_id: str
    message_id: str
    message_text: str
    custom_id: str


def action_rows(buttons: tuple) -> list:
    """``answers.buttons_for``'s ((label, data), ...) as Discord components: one action row; [] for none."""
    if not buttons:
        return []
    return [{"type": ACTION_ROW, "components": [
        {"type": BUTTON, "style": BUTTON_STYLES.get(label, SUCCESS), "label": label, "custom_id": data[:MAX_CUSTOM_ID]}
        for label, data in buttons]}]


def press_of(interaction: Any) -> Optional[Press]:
    """An ``INTERACTION_CREATE``'s data as a Press; None for any other interaction (a slash command, a modal) or
    one without what a press needs (an id and token to answer, a user, a channel, the message)."""
    if not isinstance(interaction, dict) or interaction.get("type") != MESSAGE_COMPONENT:
        return None
    data, message = interaction.get("data"), interaction.get("message")
    member = interaction.get("member")
    user = member.get("user") if isinstance(member, dict) else interaction.get("user")
    interaction_id, token = _id(interaction.get("id")), interaction.get("token")
    user_id = _id(user.get("id")) if isinstance(user, dict) else None
    channel_id = _id(interaction.get("channel_id"))
    message_id = _id(message.get("id")) if isinstance(message, dict) else None
    if not (interaction_id and isinstance(token, str) and token and user_id and channel_id and message_id
            and isinstance(data, dict)):
        return None
    custom_id = data.get("custom_id") if isinstance(data.get("custom_id"), str) else ""
    text = message.get("content") if isinstance(message.get("content"), str) else ""
    return Press(interaction_id, token[:500], user_id, channel_id, message_id, text, custom_id[:MAX_CUSTOM_ID])


def ack_body(kind: str, text: str = "") -> dict:
    """The callback's body: ``stored`` (type 6, nothing shown yet), ``settled`` (type 7: the message becomes
    ``text`` without buttons), ``refused`` (type 4, ephemeral: ``text`` to the presser only)."""
    if kind == STORED:
        return {"type": DEFERRED_UPDATE_MESSAGE}
    if kind == SETTLED:
        return {"type": UPDATE_MESSAGE, "data": {"content": text, "components": [],
                                                 "allowed_mentions": {"parse": []}}}
    if kind == REFUSED:
        return {"type": CHANNEL_MESSAGE_WITH_SOURCE, "data": {"content": text, "flags": EPHEMERAL,
                                                              "allowed_mentions": {"parse": []}}}
    raise ValueError(f"no interaction answer of kind {kind!r}")


def mention(user_id: str) -> str:
    """How a Discord message names a user (shown as their name; no ping with ``allowed_mentions`` empty)."""
    return f"<@{user_id}>"


def event_from_press(interaction: dict, platform: str, profile: str) -> MessageEvent:
    """A press read as an approval's answer (``ANSWER_FIELD``): the presser's message in the button's channel."""
    an_object(interaction, "INTERACTION_CREATE data")
    press = press_of(interaction)
    text = a_string(interaction.get(ANSWER_FIELD), f"interaction {interaction.get('id')!r}: {ANSWER_FIELD}")
    if press is None:
        raise MalformedPayload(f"interaction {interaction.get('id')!r}: no id, token, user, channel or message")
    member = interaction.get("member")
    user = member["user"] if isinstance(member, dict) else interaction["user"]
    names = [user.get(k) for k in ("global_name", "username")]
    channel = interaction.get("channel") if isinstance(interaction.get("channel"), dict) else {}
    kind = chat_kind({"channel_type": channel.get("type"), "guild_id": interaction.get("guild_id")})
    source = Source(platform=platform, chat_id=press.channel_id, chat_type=kind,
                    thread_id=press.channel_id if kind == "thread" else None, user_id=press.user_id,
                    user_name=next((n for n in names if isinstance(n, str) and n), None), profile=profile,
                    community=_id(interaction.get("guild_id")))
    return MessageEvent(source=source, text=text, platform_message_id=f"interaction:{press.interaction_id}",
                        received_at=time.time(), reply_to_message_id=press.message_id, addressed=True)
