"""From a gateway dispatch to a ``MessageEvent``, and a chat id to its send endpoint: pure functions, no network.

The dispatches that are input (the intents of platform.py):

| dispatch | what | chat id | chat type | sent back with |
|---|---|---|---|---|
| ``C2C_MESSAGE_CREATE`` | a user's direct message | ``c2c:<user_openid>`` | dm | ``POST /v2/users/{openid}/messages`` |
| ``GROUP_AT_MESSAGE_CREATE`` | a group message that @-mentions the bot | ``group:<group_openid>`` | group | ``POST /v2/groups/{group_openid}/messages`` |
| ``AT_MESSAGE_CREATE`` | a guild channel message that @-mentions the bot | ``channel:<channel_id>`` | group | ``POST /channels/{channel_id}/messages`` |
| ``MESSAGE_CREATE`` | any guild channel message (private-domain bots) | ``channel:<channel_id>`` | group | the same |
| ``DIRECT_MESSAGE_CREATE`` | a guild DM | ``dms:<guild_id>`` | dm | ``POST /dms/{guild_id}/messages`` |

QQ hands groups and C2C users to a bot as openids (per bot, not QQ numbers); guild users keep their guild user id.
The message ``id`` is unique on QQ: it is the dedup id, and the ``msg_id`` a passive reply answers. Everything else
(the bot's own messages, reactions, members, audits, interactions) is skipped. A group or @-message's text comes
with the mention taken out (QQ leaves a leading space, a guild message ``<@!bot id>``).

Files. Every message event may carry ``attachments`` (QQ's docs, api-v2 "事件" / C2C_MESSAGE_CREATE and
GROUP_AT_MESSAGE_CREATE, and the guild Message object): ``content_type`` ("image/jpeg", "image/png", "image/gif",
"video/mp4", "voice", "file"), ``url``, ``filename``, ``size``, ``width``/``height``. Each becomes a pending
``Attachment`` whose handle is the URL, fetched by the intake before the row is stored (media_intake.py); QQ's
guild messages name their URLs without a scheme (``gchat.qpic.cn/...``), which is https. At most
``MAX_ATTACHMENTS`` per message are taken; a URL that is no http(s) one, or longer than ``MAX_URL``, is left out
with a note in the text so the reader knows something came.
"""
from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload, a_string, an_object
from actors.messages import Attachment, MessageEvent, Source

C2C, GROUP, CHANNEL_AT, CHANNEL, DIRECT = ("C2C_MESSAGE_CREATE", "GROUP_AT_MESSAGE_CREATE", "AT_MESSAGE_CREATE",
                                           "MESSAGE_CREATE", "DIRECT_MESSAGE_CREATE")
MESSAGE_EVENTS = (C2C, GROUP, CHANNEL_AT, CHANNEL, DIRECT)
MAX_ID = 128
MAX_ATTACHMENTS = 10             # a message's files taken (QQ's clients send at most a handful)
MAX_URL = 2048
KIND_OF_TYPE = {"voice": "audio", "file": "document"}   # QQ's voice is SILK/AMR: kept as audio, not transcribed


def _id(value: Any) -> Optional[str]:
    """An id as QQ writes them (openids: 32 hex digits; message ids: ``ROBOT1.0_...``; guild ids: digits)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, str) and 0 < len(value) <= MAX_ID and value.isascii() and value.isprintable() and \
            ":" not in value and "/" not in value and not any(c.isspace() for c in value):
        return value
    return None


def is_input(name: Optional[str], data: Any, bot_id: str, require_mention: bool) -> bool:
    """True for a dispatch to store as a user's message; a message dispatch that is no object goes on to
    ``event_from_dispatch`` so that it is refused loudly."""
    if name not in MESSAGE_EVENTS:
        return False
    if not isinstance(data, dict):
        return True
    author = data.get("author") if isinstance(data.get("author"), dict) else {}
    if author.get("bot") or (bot_id and author.get("id") == bot_id):
        return False
    if name == CHANNEL and require_mention:
        mentions = data.get("mentions") if isinstance(data.get("mentions"), list) else []
        return any(isinstance(m, dict) and m.get("id") == bot_id for m in mentions)
    return True


def strip_mention(text: str, bot_id: str) -> str:
    text = re.sub(rf"<@!?{re.escape(bot_id)}>", "", text) if bot_id else text
    return text.strip()


def sent_at(stamp: Any) -> Optional[float]:
    """QQ's ``timestamp`` (ISO 8601 with its offset; some events an epoch number) as unix seconds."""
    if isinstance(stamp, (int, float)) and not isinstance(stamp, bool):
        return float(stamp)
    if isinstance(stamp, str):
        if stamp.isdigit():
            return float(stamp)
        try:
            return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def attachments_of(data: dict) -> tuple[tuple, list[str]]:
    """The message's files as pending attachments, and a note for each one that cannot be fetched (pure)."""
    items = data.get("attachments")
    taken, notes = [], []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        content_type = item.get("content_type") if isinstance(item.get("content_type"), str) else ""
        kind = KIND_OF_TYPE.get(content_type) or {"image": "photo", "video": "video", "audio": "audio"}.get(
            content_type.partition("/")[0], "document")
        url = item.get("url") if isinstance(item.get("url"), str) else ""
        if url and "://" not in url:
            url = "https://" + url
        if not url.startswith(("https://", "http://")) or len(url) > MAX_URL or len(taken) >= MAX_ATTACHMENTS:
            notes.append(f"[{'an' if kind[0] in 'aeiou' else 'a'} {kind} that could not be taken]")
            continue
        size, width, height = (item.get(k) if isinstance(item.get(k), int) and not isinstance(item.get(k), bool)
                               and item.get(k) > 0 else 0 for k in ("size", "width", "height"))
        name = item.get("filename") if isinstance(item.get("filename"), str) else ""
        taken.append(Attachment(kind=kind, ref=url, name=name[:200], size=size, width=width, height=height))
    return tuple(taken), notes


def event_from_dispatch(name: str, data: Any, platform: str, profile: str, bot_id: str = "") -> MessageEvent:
    an_object(data, f"{name} data")
    message_id = _id(data.get("id"))
    if message_id is None:
        raise MalformedPayload(f"{name}: the message id must be a string, got {str(data.get('id'))[:60]!r}")
    content = data.get("content", "")
    a_string(content, f"message {message_id}: content")
    author = data.get("author") if isinstance(data.get("author"), dict) else {}
    if name == C2C:
        user = _id(author.get("user_openid") or author.get("id"))
        chat, kind, community, user_name = f"c2c:{user}", "dm", None, None
    elif name == GROUP:
        user = _id(author.get("member_openid") or author.get("id"))
        group = _id(data.get("group_openid") or data.get("group_id"))
        if group is None:
            raise MalformedPayload(f"message {message_id}: group_openid must be a string")
        chat, kind, community, user_name = f"group:{group}", "group", None, None
    else:
        user, user_name = _id(author.get("id")), author.get("username")
        community = _id(data.get("guild_id"))
        if name == DIRECT:
            if community is None:
                raise MalformedPayload(f"message {message_id}: a DM's guild_id must be a string")
            chat, kind = f"dms:{community}", "dm"
        else:
            channel = _id(data.get("channel_id"))
            if channel is None:
                raise MalformedPayload(f"message {message_id}: channel_id must be a string")
            chat, kind = f"channel:{channel}", "group"
    if user is None:
        raise MalformedPayload(f"message {message_id}: the author has no id")
    source = Source(platform=platform, chat_id=chat, chat_type=kind, user_id=user,
                    user_name=user_name if isinstance(user_name, str) and user_name else None, profile=profile,
                    community=community)
    reference = data.get("message_reference")
    reply_to = _id(reference.get("message_id")) if isinstance(reference, dict) else None
    attachments, notes = attachments_of(data)
    text = " ".join([strip_mention(content, bot_id)] + notes).strip()
    return MessageEvent(source=source, text=text, platform_message_id=message_id, received_at=time.time(),
                        attachments=attachments, reply_to_message_id=reply_to,
                        sent_at=sent_at(data.get("timestamp")), addressed=True)


def send_route(chat_id: str) -> tuple[str, str, str]:
    """(kind, route name, path) of the endpoint that sends to ``chat_id``; PermanentError-worthy ValueError for a
    chat id this adapter never made."""
    kind, _, target = chat_id.partition(":")
    if _id(target) is None:
        raise ValueError(f"{chat_id[:80]!r} is no QQ chat id (c2c:, group:, channel:, dms:)")
    routes = {"c2c": ("send_c2c", f"/v2/users/{target}/messages"),
              "group": ("send_group", f"/v2/groups/{target}/messages"),
              "channel": ("send_channel", f"/channels/{target}/messages"),
              "dms": ("send_dm", f"/dms/{target}/messages")}
    if kind not in routes:
        raise ValueError(f"{chat_id[:80]!r} is no QQ chat id (c2c:, group:, channel:, dms:)")
    return (kind,) + routes[kind]
