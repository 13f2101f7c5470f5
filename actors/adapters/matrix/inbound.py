"""From a ``/sync`` answer to what the adapter acts on, and from a room message to a ``MessageEvent``: pure
functions, no network.

What a sync carries (the filter keeps it to this, ``SYNC_FILTER``): for each joined room the new timeline events of
the types the bot reads (``m.room.message``, and ``m.room.member`` so that a change of who is in the room is
noticed), and each room the bot is invited to with its stripped invite state. No presence, no account data, no
receipts or typing of others, no state beyond the timeline's senders.

Which events become input: an ``m.room.message`` of ``msgtype`` ``m.text`` or ``m.emote`` (or an ``m.audio`` voice
message, MSC3245: its audio fetched and transcribed; in a room that is not a DM only with ``require_mention = false``,
a recording having no mention) from someone other than the bot, that is not an edit (``m.replace``: a changed question
is not a new one) and has text. In a room that is not a DM only a message that mentions the bot counts
(``m.mentions``, or the bot's user id in the text), unless the adapter is configured otherwise (``require_mention =
false``): answering everything would make the bot talk over a whole room. Anything whose shape is wrong goes on to
``event_from_sync`` to be rejected loudly.

Identity: event ids are unique (room versions 4 and later derive them from the event's hash), so the dedup id is
the event id. Chats: the room id; a room with two joined members is a DM, any other a group; a message in a
thread (``m.relates_to`` ``rel_type`` ``m.thread``) is chat type "thread" with ``thread_id`` = the thread's root
event, so each thread is its own session, and the answer goes into that thread.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Optional

from actors.adapters.intake import MalformedPayload
from actors.adapters.payload_fields import a_string
from actors.adapters.matrix.client import MXC
from actors.adapters.matrix.formatting import VOICE_MARK
from actors.messages import Attachment, MessageEvent, Source

INPUT_MSGTYPES = ("m.text", "m.emote")
TIMELINE_LIMIT = 50        # events per room per sync; a longer gap comes back ``limited`` (older ones skipped)
SYNC_FILTER = {
    "presence": {"not_types": ["*"]},
    "account_data": {"not_types": ["*"]},
    "room": {
        "timeline": {"types": ["m.room.message", "m.room.member"], "limit": TIMELINE_LIMIT},
        "state": {"types": ["m.room.member"], "lazy_load_members": True},
        "ephemeral": {"not_types": ["*"]},
        "account_data": {"not_types": ["*"]},
    },
}
# On the first sync of a bot that never synced: no history at all, only where the stream stands now.
FIRST_SYNC_FILTER = {**SYNC_FILTER, "room": {**SYNC_FILTER["room"], "timeline": {"limit": 0}}}
MAX_ID_CHARS = 255         # the spec's limit for room, event and user ids


@dataclass(frozen=True)
class Invite:
    room_id: str
    inviter: Optional[str]
    is_direct: bool


@dataclass(frozen=True)
class SyncBatch:
    next_batch: str
    messages: list           # [{"room_id", "event"}] in the order the server gave them
    invites: list            # [Invite]
    membership_changed: set  # room ids whose m.room.member changed in this batch
    left: set                # room ids the bot left or was removed from


def read_sync(body: Any, bot_id: str) -> SyncBatch:
    """The parts of a sync answer the adapter uses. A body without ``next_batch`` is no sync answer."""
    if not isinstance(body, dict) or not isinstance(body.get("next_batch"), str) or not body["next_batch"]:
        raise ValueError("the sync answer has no next_batch")
    rooms = body.get("rooms") if isinstance(body.get("rooms"), dict) else {}
    messages, invites, changed = [], [], set()
    for room_id, room in _rooms(rooms, "join"):
        timeline = room.get("timeline") if isinstance(room.get("timeline"), dict) else {}
        for event in timeline.get("events") or []:
            kind = event.get("type") if isinstance(event, dict) else None
            if kind == "m.room.member":
                changed.add(room_id)
            elif kind == "m.room.message" or not isinstance(event, dict):
                messages.append({"room_id": room_id, "event": event})
    for room_id, room in _rooms(rooms, "invite"):
        invites.append(_invite(room_id, room, bot_id))
    left = {room_id for room_id, _ in _rooms(rooms, "leave")}
    return SyncBatch(body["next_batch"], messages, invites, changed, left)


def _rooms(rooms: dict, section: str):
    found = rooms.get(section)
    if not isinstance(found, dict):
        return []
    return [(room_id, room) for room_id, room in found.items() if isinstance(room_id, str) and isinstance(room, dict)]


def _invite(room_id: str, room: dict, bot_id: str) -> Invite:
    state = room.get("invite_state") if isinstance(room.get("invite_state"), dict) else {}
    for event in state.get("events") or []:
        if (isinstance(event, dict) and event.get("type") == "m.room.member" and event.get("state_key") == bot_id
                and isinstance(event.get("content"), dict) and event["content"].get("membership") == "invite"):
            sender = event.get("sender")
            return Invite(room_id, sender if isinstance(sender, str) else None,
                          event["content"].get("is_direct") is True)
    return Invite(room_id, None, False)


def joins_invite(policy, invite: Invite, granted: bool) -> bool:
    """Whether the bot joins: the access policy (actors/adapters/access.py) admits the inviter (``open``, ``allow``,
    ``granted`` by the operator), or, in ``pairing`` mode, a stranger invites it to a DM (``is_direct``), so that
    the pairing code can reach them. An invite that names no inviter is joined only when everyone is admitted."""
    if invite.inviter is None:
        return policy.mode == "open"
    if policy.admits_without_lookup(invite.inviter) or granted:
        return True
    return policy.mode == "pairing" and invite.is_direct


def relation(content: dict) -> dict:
    relates = content.get("m.relates_to")
    if relates is None:
        return {}
    if not isinstance(relates, dict):
        raise MalformedPayload(f"m.relates_to must be an object, got {type(relates).__name__}")
    return relates


def mentions_bot(content: dict, bot_id: str) -> bool:
    mentions = content.get("m.mentions")
    if isinstance(mentions, dict) and isinstance(mentions.get("user_ids"), list) and bot_id in mentions["user_ids"]:
        return True
    body = content.get("body")
    return isinstance(body, str) and bool(bot_id) and bot_id in body


def is_input(raw: Any, bot_id: str, require_mention: bool) -> bool:
    """True for a sync message to store as a user's message; one of the wrong shape is True too, so that
    ``event_from_sync`` rejects it loudly."""
    event = raw.get("event") if isinstance(raw, dict) else None
    if not isinstance(event, dict) or not isinstance(event.get("content"), dict):
        return True
    content = event["content"]
    if event.get("sender") == bot_id or not content:   # the bot's own sends come back to it; redacted: no content
        return False
    if is_voice_message(content):
        return raw.get("kind") == "dm" or not require_mention   # a recording carries no mention
    if content.get("msgtype") not in INPUT_MSGTYPES and isinstance(content.get("msgtype"), str):
        return False   # notices (other bots), other files, locations: not questions
    relates = content.get("m.relates_to")
    if isinstance(relates, dict) and relates.get("rel_type") == "m.replace":
        return False
    if isinstance(content.get("body"), str) and not content["body"].strip():
        return False
    if require_mention and raw.get("kind") != "dm":
        return mentions_bot(content, bot_id)
    return True


def is_voice_message(content: dict) -> bool:
    """An ``m.audio`` marked as a voice message (MSC3245), as clients send a recording."""
    return content.get("msgtype") == "m.audio" and isinstance(content.get(VOICE_MARK), dict)


def voice_attachment(content: dict) -> Attachment:
    """A voice message's audio, pending: fetched by its ``mxc://`` URI (one that is none is marked unavailable:
    the turn says a voice note could not be read)."""
    url = content.get("url")
    info = content.get("info") if isinstance(content.get("info"), dict) else {}
    size, duration = info.get("size"), info.get("duration")
    size = size if type(size) is int and size >= 0 else 0
    duration_s = duration // 1000 if type(duration) is int and duration >= 0 else 0
    if not isinstance(url, str) or not MXC.fullmatch(url):
        return Attachment(kind="voice", state="unavailable", duration_s=duration_s)
    return Attachment(kind="voice", ref=url, size=size, duration_s=duration_s)


def strip_mention(text: str, bot_id: str) -> str:
    """"@bot:example.org: what time is it" or "bot: what time is it" -> "what time is it" (a client's mention
    pill starts the body with the bot's id or name and a colon)."""
    if not bot_id:
        return text
    localpart = bot_id[1:].split(":", 1)[0]
    pattern = rf"^\s*(?:{re.escape(bot_id)}|{re.escape(localpart)})[:,]?\s+"
    stripped = re.sub(pattern, "", text, count=1, flags=re.IGNORECASE)
    return stripped.replace(bot_id, "").strip() or text.strip()


def _matrix_id(value: Any, sigil: str, what: str, where: str) -> str:
    if not isinstance(value, str) or not value.startswith(sigil) or len(value) > MAX_ID_CHARS or len(value) < 2:
        raise MalformedPayload(f"{where}{what} must be a string starting with {sigil!r}, got {value!r:.80}")
    return value


def event_from_sync(raw: Any, platform: str, profile: str, bot_id: str = "") -> MessageEvent:
    """``raw`` = {"room_id", "kind" (dm | group), "event"} as the adapter hands it on from a sync."""
    if not isinstance(raw, dict) or not isinstance(raw.get("event"), dict):
        raise MalformedPayload("a room message must be an object")
    event = raw["event"]
    room_id = _matrix_id(raw.get("room_id"), "!", "room id", "")
    event_id = _matrix_id(event.get("event_id"), "$", "event_id", "")
    where = f"event {event_id[:60]}: "
    sender = _matrix_id(event.get("sender"), "@", "sender", where)
    content = event.get("content")
    if not isinstance(content, dict):
        raise MalformedPayload(f"{where}content must be an object")
    body = content.get("body")
    a_string(body, f"{where}body")
    relates = relation(content)
    thread_id = None
    if relates.get("rel_type") == "m.thread":
        thread_id = _matrix_id(relates.get("event_id"), "$", "the thread root's event_id", where)
    in_reply = relates.get("m.in_reply_to")
    reply_to = in_reply.get("event_id") if isinstance(in_reply, dict) else None
    if reply_to is not None and (not isinstance(reply_to, str) or not reply_to.startswith("$")):
        reply_to = None
    if relates.get("is_falling_back") and reply_to == thread_id:
        reply_to = None   # a thread message's fallback reply names the root, not a message being answered
    kind = "thread" if thread_id else ("dm" if raw.get("kind") == "dm" else "group")
    text = strip_mention(body, bot_id)
    attachments = ()
    if is_voice_message(content):
        text, attachments = "", (voice_attachment(content),)   # its body only names it ("Voice message")
    if content.get("msgtype") == "m.emote":
        text = f"* {sender[1:].split(':', 1)[0]} {text}"
    stamp = event.get("origin_server_ts")
    sent_at = stamp / 1000.0 if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else None
    source = Source(platform=platform, chat_id=room_id, chat_type=kind, thread_id=thread_id, user_id=sender,
                    user_name=sender[1:].split(":", 1)[0], profile=profile)
    return MessageEvent(source=source, text=text, platform_message_id=event_id, received_at=time.time(),
                        reply_to_message_id=reply_to, sent_at=sent_at, attachments=attachments)
