"""From a DingTalk robot message (a Stream-mode CALLBACK's data) to a ``MessageEvent``: pure functions, no network.

    {"msgId", "msgtype": "text" | "richText" | "audio" | "picture" | "file" | ..., "createAt" (ms),
     "conversationType": "1" (one-to-one) | "2" (group), "conversationId" (cid...), "conversationTitle",
     "senderId", "senderStaffId", "senderNick", "senderCorpId", "chatbotUserId", "robotCode", "isInAtList",
     "atUsers": [{"dingtalkId", "staffId"}], "sessionWebhook", "sessionWebhookExpiredTime" (ms),
     "text": {"content"}, "content": {"richText": [{"text"} | {"type": "picture", "downloadCode"}],
                                      "recognition" (audio), "downloadCode", "fileName"}}

``msgId`` is the same in every delivery of one message (the platform redelivers a callback not answered); the inbox
dedups on it.

Identity: a one-to-one chat is the user's ``senderStaffId`` (what the robot send API's ``userIds`` takes), or the
``conversationId`` when the platform names no staff id (a user outside the organisation: only the session webhook
reaches them); a group is its ``conversationId`` (the ``openConversationId`` of the group send API). The sender is
``senderStaffId`` or else ``senderId``. In a group the robot receives only messages that @mention it; a leading
``@<bot_name>`` is taken off the text.

Which messages become input: ``text``, ``richText`` (its text parts, its pictures as attachments), ``audio`` with the
platform's recognition text, ``picture`` and ``file`` (attachments, fetched by their ``downloadCode`` through the
robot API before the row is stored); audio without recognition text, videos and every other type are answered and
skipped with a log line (``skip_reason``).
"""
from __future__ import annotations

import re
import time
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload
from actors.messages import Attachment, MessageEvent, Source

TAKEN = ("text", "richText", "audio", "picture", "file")
MAX_ATTACHMENTS = 20         # pictures of one rich-text message taken (the rest are left out)
_ID = re.compile(r"^[A-Za-z0-9_$:.+/=@-]{1,160}$")


def skip_reason(data: Any) -> Optional[str]:
    """None when the message is input (or malformed: ``normalise`` says why); otherwise why it is skipped."""
    if not isinstance(data, dict):
        return None
    kind = data.get("msgtype")
    if isinstance(kind, str) and kind not in TAKEN:
        return f"a {kind[:24]!r} message (text, rich text, pictures, files and recognised audio are taken)"
    if kind == "audio" and not _recognition(data):
        return "an audio message without recognition text"
    return None


def message_id(data: Any) -> Optional[str]:
    value = data.get("msgId") if isinstance(data, dict) else None
    return value if isinstance(value, str) and _ID.match(value) else None


def _recognition(data: dict) -> str:
    content = data.get("content")
    value = content.get("recognition") if isinstance(content, dict) else None
    return value if isinstance(value, str) else ""


def _id(value: Any, what: str, where: str) -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise MalformedPayload(f"{where}: {what} must be an id, got {str(value)[:24]!r}")
    return value


def text_of(data: dict, where: str) -> str:
    kind = data.get("msgtype")
    if kind == "text":
        text = data.get("text")
        if not isinstance(text, dict) or not isinstance(text.get("content"), str):
            raise MalformedPayload(f"{where}: text.content must be a string")
        return text["content"]
    if kind == "richText":
        content = data.get("content")
        parts = content.get("richText") if isinstance(content, dict) else None
        if not isinstance(parts, list):
            raise MalformedPayload(f"{where}: content.richText must be a list")
        return "".join(str(p["text"]) for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))
    if kind == "audio":
        return _recognition(data)
    if kind in ("picture", "file"):
        return ""
    raise MalformedPayload(f"{where}: msgtype must be one of {', '.join(TAKEN)}, got {str(kind)[:24]!r}")


def _code(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 2048:
        raise MalformedPayload(f"{where}: downloadCode must be a string of at most 2048 characters")
    return value


def attachments_of(data: dict, where: str) -> tuple:
    """The pictures and files of a message: each its ``downloadCode`` as the reference to fetch it by."""
    kind, content = data.get("msgtype"), data.get("content")
    if kind in ("picture", "file"):
        if not isinstance(content, dict):
            raise MalformedPayload(f"{where}: content must be an object")
        name = content.get("fileName") if kind == "file" else ""
        return (Attachment(kind="photo" if kind == "picture" else "document",
                           ref=_code(content.get("downloadCode"), where),
                           name=name[:200] if isinstance(name, str) else ""),)
    if kind == "richText":
        pictures = [p for p in content["richText"] if isinstance(p, dict) and p.get("type") == "picture"]
        return tuple(Attachment(kind="photo", ref=_code(p.get("downloadCode"), where))
                     for p in pictures[:MAX_ATTACHMENTS])
    return ()


def strip_mention(text: str, bot_name: str) -> str:
    """A group message's text without the leading @mention of the robot (and the space after it)."""
    text = text.lstrip()
    if bot_name and text.startswith("@" + bot_name):
        text = text[len(bot_name) + 1:].lstrip()
    return text


def chat_of(data: dict) -> tuple[str, str]:
    """(chat id, chat type) of a message, per the module docstring; no checks (``event_from_callback`` makes them)."""
    if data.get("conversationType") == "2":
        return str(data.get("conversationId") or ""), "group"
    return str(data.get("senderStaffId") or data.get("conversationId") or ""), "dm"


def session_webhook(data: Any) -> Optional[tuple[str, float]]:
    """The message's session webhook and the time (s since the epoch) it expires, when it names both."""
    if not isinstance(data, dict):
        return None
    url, expires = data.get("sessionWebhook"), data.get("sessionWebhookExpiredTime")
    if not isinstance(url, str) or not url or isinstance(expires, bool) or not isinstance(expires, int):
        return None
    return url, expires / 1000.0


def event_from_callback(data: Any, platform: str, profile: str, bot_name: str = "") -> MessageEvent:
    if not isinstance(data, dict):
        raise MalformedPayload(f"the robot message is {type(data).__name__}, not a JSON object")
    where = f"message {str(data.get('msgId'))[:40]!r}"
    msg_id = _id(data.get("msgId"), "msgId", where)
    if data.get("conversationType") not in ("1", "2"):
        raise MalformedPayload(f"{where}: conversationType must be \"1\" or \"2\", got "
                               f"{str(data.get('conversationType'))[:8]!r}")
    _id(data.get("conversationId"), "conversationId", where)
    chat_id, chat_type = chat_of(data)
    _id(chat_id, "senderStaffId", where)
    user = _id(data.get("senderStaffId") or data.get("senderId"), "senderStaffId or senderId", where)
    text = text_of(data, where)
    attachments = attachments_of(data, where)
    if chat_type == "group":
        text = strip_mention(text, bot_name)
    nick = data.get("senderNick")
    source = Source(platform=platform, chat_id=chat_id, chat_type=chat_type, user_id=user,
                    user_name=nick[:80] if isinstance(nick, str) and nick else None, profile=profile)
    created = data.get("createAt")
    sent_at = created / 1000.0 if isinstance(created, int) and not isinstance(created, bool) else None
    return MessageEvent(source=source, text=text, platform_message_id=msg_id, received_at=time.time(),
                        attachments=attachments, sent_at=sent_at,
                        addressed=None if chat_type == "dm" else True)
