"""From a PRIVMSG the link received to a ``MessageEvent``: pure functions, no network.

Which lines are input: a private message to us, and in a channel a message that addresses us by nick
("gw: hello", "gw, hello", "@gw hello"; the address is taken off the text). Everything else said in a channel is
other people's conversation. CTCP requests (``\\x01VERSION\\x01``) and our own lines are no input either.

Identity: IRC gives a line no id and never delivers one twice, so the dedup id is made up by the link: the
connection's epoch (its start, in nanoseconds) and the line's number on that connection. No replay can collide
with it because the server has none to make; the inbox dedup is kept for the shape every adapter has. Chats: a
private message -> "dm", chat id = the sender's nick (replies go there); a channel -> "group", chat id = the
channel. Nicks and channels are compared in RFC 1459 case (``Alice`` and ``alice`` are one person), so ids are
that lower case.
"""
from __future__ import annotations

from typing import Any

from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.irc.formatting import addressed, irc_lower, is_channel
from actors.messages import MessageEvent, Source

FIELDS = ("id", "nick", "target", "text", "me")


def is_input(raw: Any) -> bool:
    """True for a line to store as a user's message. Anything that is no proper raw goes on to ``event_from_line``
    so that it is rejected loudly."""
    if not isinstance(raw, dict) or not all(isinstance(raw.get(k), str) for k in FIELDS):
        return True
    if raw["text"].startswith("\x01"):
        return False
    if is_channel(raw["target"]):
        return bool(addressed(raw["text"], raw["me"]))
    return True


def event_from_line(raw: Any, adapter_name: str, profile: str) -> MessageEvent:
    if not isinstance(raw, dict):
        raise MalformedPayload(f"an IRC line is a dict, got {type(raw).__name__}")
    for key in FIELDS:
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise MalformedPayload(f"{key} must be a non-empty string")
    nick, target, text = raw["nick"], raw["target"], raw["text"]
    if any(c in nick for c in " !@\r\n\0"):
        raise MalformedPayload(f"{nick!r} is no nick")
    if is_channel(target):
        text = addressed(text, raw["me"]) or ""
        source = Source(platform=adapter_name, chat_id=irc_lower(target), chat_type="group",
                        user_id=irc_lower(nick), user_name=nick, profile=profile)
    else:
        source = Source(platform=adapter_name, chat_id=irc_lower(nick), chat_type="dm", user_id=irc_lower(nick),
                        user_name=nick, profile=profile)
    at = raw.get("at") if isinstance(raw.get("at"), (int, float)) else None
    return MessageEvent(source=source, text=text, platform_message_id=raw["id"], received_at=at or 0.0)
