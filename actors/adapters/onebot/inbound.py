"""From a OneBot v11 message event to a ``MessageEvent``: pure functions, no network.

A message event (OneBot v11 event/message): ``{"post_type": "message", "message_type": "private"|"group",
"self_id", "message_id", "user_id", "group_id" (groups), "message", "raw_message", "sender": {"nickname",
"card"}, "time"}``. ``message`` is an array of segments ``{"type", "data"}`` or, where the implementation is set to
the string format, CQ code (``[CQ:at,qq=123]``), read here into the same segments.

Segments: ``text`` is the text; ``at`` of the account marks the message addressed (and is left out of the text),
of someone else it reads ``@qq``; ``reply`` names the quoted message; ``image`` / ``record`` / ``file`` become
attachments fetched by their ``url`` (photo / audio / document); ``face`` (a QQ emoticon) reads ``[face N]``;
any other type reads ``[type]``.

Identity: a ``message_id`` is unique within one account only, so the dedup id is ``<self_id>:<message_id>``.
Chats: ``private:<user_id>`` ("dm") and ``group:<group_id>`` ("group"): the adapter sends by that prefix.
"""
from __future__ import annotations

import re
import time
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload, an_object
from actors.messages import Attachment, MessageEvent, Source

MAX_SEGMENTS = 200
MAX_ATTACHMENTS = 10
ATTACHMENT_KINDS = {"image": "photo", "record": "audio", "file": "document", "video": "video"}
CQ_CODE = re.compile(r"\[CQ:([A-Za-z0-9_.-]+)((?:,[^\]]*)?)\]")


def _cq_unescape(text: str, in_param: bool = False) -> str:
    text = text.replace("&#91;", "[").replace("&#93;", "]")
    if in_param:
        text = text.replace("&#44;", ",")
    return text.replace("&amp;", "&")


def segments_of(message: Any, what: str = "message") -> list[dict]:
    """The message's segments, from either format."""
    if isinstance(message, str):
        segments, at = [], 0
        for match in CQ_CODE.finditer(message):
            if match.start() > at:
                segments.append({"type": "text", "data": {"text": _cq_unescape(message[at:match.start()])}})
            data = {}
            for pair in filter(None, match.group(2).split(",")):
                key, _, value = pair.partition("=")
                data[key] = _cq_unescape(value, in_param=True)
            segments.append({"type": match.group(1), "data": data})
            at = match.end()
        if at < len(message):
            segments.append({"type": "text", "data": {"text": _cq_unescape(message[at:])}})
        return segments
    if not isinstance(message, list):
        raise MalformedPayload(f"{what} must be a string or a list of segments, got {type(message).__name__}")
    if len(message) > MAX_SEGMENTS:
        raise MalformedPayload(f"{what} has {len(message)} segments, over {MAX_SEGMENTS}")
    segments = []
    for index, segment in enumerate(message):
        segment = an_object(segment, f"{what}[{index}]")
        if not isinstance(segment.get("type"), str):
            raise MalformedPayload(f"{what}[{index}].type must be a string")
        data = segment.get("data")
        segments.append({"type": segment["type"], "data": data if isinstance(data, dict) else {}})
    return segments


def _id(value: Any) -> Optional[str]:
    """A QQ number or message id as text (implementations send numbers, some strings)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or (isinstance(value, str) and value.lstrip("-").isdigit()):
        return str(int(value))
    return None


def mentions(segments: list[dict], self_id: str) -> bool:
    return any(s["type"] == "at" and _id(s["data"].get("qq")) == self_id for s in segments)


def skip_reason(raw: Any, self_id: str, require_mention: bool) -> Optional[str]:
    """Why an event is not input (None: it is). Malformed message events are input: ``normalise`` says why not."""
    if not isinstance(raw, dict) or raw.get("post_type") != "message":
        return "not a message event"
    if self_id and _id(raw.get("self_id")) != self_id:
        return "an event of another account"
    if self_id and _id(raw.get("user_id")) == self_id:
        return "the account's own message"
    if raw.get("message_type") == "group" and require_mention:
        try:
            if not mentions(segments_of(raw.get("message")), self_id):
                return "a group message that does not @-mention the account"
        except MalformedPayload:
            return None
    return None


def event_from_raw(raw: Any, adapter: str, profile: str, self_id: str) -> MessageEvent:
    raw = an_object(raw, "event")
    kind = raw.get("message_type")
    message_id, user_id = _id(raw.get("message_id")), _id(raw.get("user_id"))
    if message_id is None:
        raise MalformedPayload(f"message_id must be a number, got {raw.get('message_id')!r}")
    if user_id is None:
        raise MalformedPayload(f"user_id must be a number, got {raw.get('user_id')!r}")
    if kind == "private":
        chat_id, chat_type = f"private:{user_id}", "dm"
    elif kind == "group":
        group_id = _id(raw.get("group_id"))
        if group_id is None:
            raise MalformedPayload(f"group_id must be a number, got {raw.get('group_id')!r}")
        chat_id, chat_type = f"group:{group_id}", "group"
    else:
        raise MalformedPayload(f"message_type must be private or group, got {kind!r}")
    segments = segments_of(raw.get("message"))
    account = self_id or _id(raw.get("self_id")) or ""
    words, attachments, reply_to = [], [], None
    for segment in segments:
        kind_, data = segment["type"], segment["data"]
        if kind_ == "text":
            words.append(str(data.get("text", "")))
        elif kind_ == "at":
            qq = str(data.get("qq", ""))
            if _id(qq) != account:
                words.append("@all" if qq == "all" else f"@{data.get('name') or qq}")
        elif kind_ == "reply":
            if (quoted := _id(data.get("id"))) is not None:
                reply_to = f"{account}:{quoted}"
        elif kind_ in ATTACHMENT_KINDS:
            url = data.get("url")
            if isinstance(url, str) and url.startswith(("http://", "https://")) and len(attachments) < MAX_ATTACHMENTS:
                size = data.get("file_size") or data.get("size")
                attachments.append(Attachment(kind=ATTACHMENT_KINDS[kind_], ref=url,
                                              name=str(data.get("name") or data.get("file") or "")[:200],
                                              size=int(size) if _id(size) else 0))
            else:
                words.append(f"[{kind_}]")
        elif kind_ == "face":
            words.append(f"[face {data.get('id', '')}]")
        else:
            words.append(f"[{kind_}]")
    sender = raw.get("sender") if isinstance(raw.get("sender"), dict) else {}
    name = sender.get("card") or sender.get("nickname") or user_id
    sent = raw.get("time")
    return MessageEvent(
        source=Source(platform=adapter, chat_id=chat_id, chat_type=chat_type, user_id=user_id,
                      user_name=str(name)[:100], profile=profile),
        text="".join(words).strip(), platform_message_id=f"{account}:{message_id}", received_at=time.time(),
        reply_to_message_id=reply_to, attachments=tuple(attachments),
        sent_at=float(sent) if isinstance(sent, (int, float)) and not isinstance(sent, bool) else None,
        addressed=True if chat_type == "dm" else mentions(segments, account))
