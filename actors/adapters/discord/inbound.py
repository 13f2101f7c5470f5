"""From a gateway ``MESSAGE_CREATE`` to a ``MessageEvent``: pure functions, no network.

Which dispatches become input: ``MESSAGE_CREATE`` of a person (not the bot itself, not another bot, not a system
message) with text. In a guild channel or thread only a message addressed to the bot counts, unless the adapter is
configured otherwise (``require_mention = false``): one that mentions the bot (``<@id>`` in ``mentions``) or
replies to one of the bot's messages. Discord sends every message of every channel the bot can read; answering
them all would make the bot talk over a whole server. Edits (``MESSAGE_UPDATE``) and deletions are not new
questions and are skipped, like everything else the gateway dispatches.

Identity: snowflakes are unique across Discord, so the dedup id is the message id; replies name their target the
same way. Chats: a DM channel -> "dm"; a guild text channel -> "group"; a thread (its own channel) -> "thread"
with ``thread_id`` = the thread's channel id, so each thread is its own session. Replies go to ``chat_id``, which
is the channel (or thread) the message came from.
"""
from __future__ import annotations

import re
import time
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload, a_string, an_object
from actors.messages import MessageEvent, Source

DM_TYPES = (1, 3)                  # DM, GROUP_DM
THREAD_TYPES = (10, 11, 12)        # ANNOUNCEMENT_THREAD, PUBLIC_THREAD, PRIVATE_THREAD
USER_MESSAGE_TYPES = (0, 19)       # DEFAULT, REPLY: the others are system messages (joins, pins, boosts)
DISCORD_EPOCH_MS = 1420070400000


def snowflake_time(snowflake: str) -> Optional[float]:
    """When Discord made the id (its servers' clock): unix seconds."""
    return ((int(snowflake) >> 22) + DISCORD_EPOCH_MS) / 1000.0 if str(snowflake).isdigit() else None


def _id(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value.isascii() and value.isdigit() else None


def chat_kind(message: dict) -> str:
    """dm | group | thread, from ``channel_type`` when the dispatch carries it, else from ``guild_id``."""
    channel_type = message.get("channel_type")
    if channel_type in DM_TYPES or (channel_type is None and not message.get("guild_id")):
        return "dm"
    return "thread" if channel_type in THREAD_TYPES else "group"


def addressed_to_bot(message: dict, bot_id: str) -> bool:
    """It mentions the bot, or replies to one of the bot's messages."""
    mentions = message.get("mentions") if isinstance(message.get("mentions"), list) else []
    if any(isinstance(m, dict) and m.get("id") == bot_id for m in mentions):
        return True
    replied = message.get("referenced_message")
    author = replied.get("author") if isinstance(replied, dict) else None
    return isinstance(author, dict) and author.get("id") == bot_id


def is_input(name: Optional[str], message: Any, bot_id: str, require_mention: bool) -> bool:
    """True for a dispatch to store as a user's message; anything that claims to be a MESSAGE_CREATE but is no
    object goes on to ``event_from_message`` so that it is rejected loudly."""
    if name != "MESSAGE_CREATE":
        return False
    if not isinstance(message, dict):
        return True
    author = message.get("author")
    if isinstance(author, dict) and (author.get("bot") or author.get("id") == bot_id):
        return False   # the bot's own sends (echoed back to it) and other bots
    if message.get("type", 0) not in USER_MESSAGE_TYPES:
        return False
    if isinstance(message.get("content"), str) and not message["content"].strip():
        return False   # attachments or stickers only, or content withheld (no MESSAGE_CONTENT intent)
    if require_mention and chat_kind(message) != "dm":
        return addressed_to_bot(message, bot_id)
    return True


def strip_mention(text: str, bot_id: str) -> str:
    """"<@BOT> what time is it" -> "what time is it": the mention addresses the bot, it is not part of the question."""
    if not bot_id:
        return text
    return re.sub(rf"<@!?{re.escape(bot_id)}>\s*", "", text).strip() or text.strip()


def event_from_message(message: Any, platform: str, profile: str, bot_id: str = "") -> MessageEvent:
    an_object(message, "MESSAGE_CREATE data")
    message_id, channel_id, content = _id(message.get("id")), _id(message.get("channel_id")), message.get("content")
    if message_id is None:
        raise MalformedPayload(f"message id must be a snowflake string, got {message.get('id')!r}")
    if channel_id is None:
        raise MalformedPayload(f"message {message_id}: channel_id must be a snowflake string, got "
                               f"{message.get('channel_id')!r}")
    a_string(content, f"message {message_id}: content")
    author = message.get("author") if isinstance(message.get("author"), dict) else {}
    names = [author.get(k) for k in ("global_name", "username")]
    kind = chat_kind(message)
    source = Source(platform=platform, chat_id=channel_id, chat_type=kind,
                    thread_id=channel_id if kind == "thread" else None, user_id=_id(author.get("id")),
                    user_name=next((n for n in names if isinstance(n, str) and n), None), profile=profile,
                    community=_id(message.get("guild_id")))
    reference = message.get("message_reference")
    reply_to = _id(reference.get("message_id")) if isinstance(reference, dict) else None
    return MessageEvent(source=source, text=strip_mention(content, bot_id), platform_message_id=message_id,
                        received_at=time.time(), reply_to_message_id=reply_to, sent_at=snowflake_time(message_id),
                        addressed=True if kind == "dm" else addressed_to_bot(message, bot_id) if bot_id else None)
