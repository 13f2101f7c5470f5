"""From a LINE webhook to ``MessageEvent``s: pure functions, no network.

A webhook is one POST whose body is JSON ``{"destination": bot user id, "events": [...]}``, signed: the header
``X-Line-Signature`` is the base64 of HMAC-SHA256 over the raw body, keyed with the channel secret
(``signature_ok``, checked before a byte of the body is parsed). Each event names its ``type``, its ``source``
(``{"type": "user", "userId"}``, ``{"type": "group", "groupId", "userId"}`` or ``{"type": "room", "roomId",
"userId"}``), a ``timestamp`` in milliseconds, a ``webhookEventId`` (the same in every delivery of the event), a
``deliveryContext.isRedelivery`` (true when LINE sends it again because an earlier delivery was not answered 2xx)
and, for events the bot may answer, a ``replyToken``.

Which events become input: ``message`` events of type ``text``, ``image``, ``audio``, ``file`` and ``sticker``,
and ``postback`` events (a button the bot showed, pressed: its ``data`` as text, or, for one of the gateway's own
buttons judged by the adapter, the answer's words: quick_replies.py). Every other event (follow,
unfollow, join, leave, unsend, video, location, ...) is answered and skipped with a log line (``skip_reason``).

Identity: the chat is the source's user, group or room id (``U``, ``C`` or ``R`` followed by 32 hex digits), a dm
for a user and a group otherwise; the sender is ``source.userId``. A message is its ``message.id``; a postback, which
has none, its ``webhookEventId``: either is the same in every redelivery, so the inbox's dedup makes one row of them.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload
from actors.messages import Attachment, MessageEvent, Source

MAX_EVENTS = 100                # LINE batches a few; nothing legitimate comes close
MAX_ID_CHARS = 64
TAKEN_MESSAGES = {"text", "image", "audio", "file", "sticker"}
MEDIA_KINDS = {"image": "photo", "audio": "voice", "file": "document"}
SOURCE_IDS = {"user": ("userId", "dm"), "group": ("groupId", "group"), "room": ("roomId", "group")}
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ANSWER_FIELD = "approval_answer"   # put on a button's postback by the adapter (quick_replies.py): its answer, as words


class WebhookRefused(Exception):
    """A webhook that is not LINE's (a bad signature) or no webhook at all: refused with ``status``, nothing stored."""

    def __init__(self, reason: str, status: int = 400):
        super().__init__(reason)
        self.reason, self.status = reason, status


def signature(secret: str, body: bytes) -> str:
    return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()


def signature_ok(secret: str, body: bytes, header: Optional[str]) -> bool:
    """The signature over the raw body, compared in constant time."""
    return bool(header) and hmac.compare_digest(signature(secret, body), header.strip())


def events_of(body: bytes) -> list:
    """The ``events`` of a signed body; WebhookRefused for a body that is no webhook (a malformed event inside a
    well-formed one is ``normalise``'s to refuse, alone)."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise WebhookRefused(f"the body is no JSON ({type(exc).__name__})") from None
    events = payload.get("events") if isinstance(payload, dict) else None
    if not isinstance(events, list):
        raise WebhookRefused("the body holds no events list")
    if len(events) > MAX_EVENTS:
        raise WebhookRefused(f"{len(events)} events, over {MAX_EVENTS}")
    return events


def event_id(event: Any) -> Optional[str]:
    """The ``webhookEventId``: the same in every delivery of one event."""
    value = event.get("webhookEventId") if isinstance(event, dict) else None
    return value if isinstance(value, str) and _ID.match(value) else None


def is_redelivery(event: Any) -> bool:
    context = event.get("deliveryContext") if isinstance(event, dict) else None
    return isinstance(context, dict) and context.get("isRedelivery") is True


def skip_reason(event: Any) -> Optional[str]:
    """None when the event is input (or malformed: ``normalise`` says why); otherwise why it is skipped."""
    if not isinstance(event, dict):
        return None
    kind = event.get("type")
    if kind == "postback":
        return None
    if kind != "message":
        return f"event {str(kind)[:24]!r}"
    message = event.get("message")
    if isinstance(message, dict) and message.get("type") not in TAKEN_MESSAGES:
        return f"message type {str(message.get('type'))[:24]!r}"
    return None


def _id(value: Any, what: str, where: str) -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise MalformedPayload(f"{where}: {what} must be an id of at most {MAX_ID_CHARS} letters and digits, got "
                               f"{str(value)[:24]!r}")
    return value


def source_of(event: dict, platform: str, profile: str, where: str) -> Source:
    source = event.get("source")
    if not isinstance(source, dict) or source.get("type") not in SOURCE_IDS:
        raise MalformedPayload(f"{where}: no user, group or room source")
    field, chat_type = SOURCE_IDS[source["type"]]
    chat = _id(source.get(field), f"source.{field}", where)
    user = source.get("userId")
    user = _id(user, "source.userId", where) if user is not None else None
    if chat_type == "dm":
        user = chat
    return Source(platform=platform, chat_id=chat, chat_type=chat_type, user_id=user, profile=profile)


def platform_message_id(event: dict) -> Optional[str]:
    """What the inbox dedups the event on (see the module docstring); None if it has none."""
    message = event.get("message")
    if event.get("type") == "message" and isinstance(message, dict):
        value = message.get("id")
        return value if isinstance(value, str) and value.isdigit() and len(value) <= MAX_ID_CHARS else None
    return event_id(event)


def _text_and_attachments(event: dict, where: str) -> tuple[str, tuple]:
    if event.get("type") == "postback":
        if isinstance(event.get(ANSWER_FIELD), str):   # one of our buttons, judged: the presser's typed answer
            return event[ANSWER_FIELD], ()
        postback = event.get("postback")
        data = postback.get("data") if isinstance(postback, dict) else None
        if not isinstance(data, str):
            raise MalformedPayload(f"{where}: a postback without data")
        return f"[pressed: {data}]", ()
    message = event.get("message")
    if not isinstance(message, dict):
        raise MalformedPayload(f"{where}: a message event without its message")
    kind = message.get("type")
    if kind == "text":
        text = message.get("text")
        if not isinstance(text, str):
            raise MalformedPayload(f"{where}: a text message without text")
        return text, ()
    if kind == "sticker":
        words = message.get("keywords") if isinstance(message.get("keywords"), list) else []
        label = message.get("text") or ", ".join(str(w)[:40] for w in words[:5]) or "no description"
        return f"[sent a sticker: {str(label)[:200]}]", ()
    if kind in MEDIA_KINDS:
        name = message.get("fileName") if kind == "file" else ""
        size = message.get("fileSize") if isinstance(message.get("fileSize"), int) else 0
        attachment = Attachment(kind=MEDIA_KINDS[kind], ref=message["id"], name=str(name or "")[:200], size=size)
        return "", (attachment,)
    raise MalformedPayload(f"{where}: message type {str(kind)[:20]!r} is not taken")


def addressed(event: dict, chat_type: str) -> Optional[bool]:
    """In a group: whether the message mentions the bot (``mention.mentionees[].isSelf``); None in a dm."""
    if chat_type == "dm":
        return None
    message = event.get("message") if isinstance(event.get("message"), dict) else {}
    mention = message.get("mention") if isinstance(message.get("mention"), dict) else {}
    mentionees = mention.get("mentionees") if isinstance(mention.get("mentionees"), list) else []
    return any(isinstance(m, dict) and m.get("isSelf") is True for m in mentionees)


def event_from_webhook(event: Any, platform: str, profile: str) -> MessageEvent:
    if not isinstance(event, dict):
        raise MalformedPayload(f"event is {type(event).__name__}, not an object")
    where = f"event {str(event.get('webhookEventId'))[:32]!r}"
    message_id = platform_message_id(event)
    if message_id is None:
        raise MalformedPayload(f"{where}: no message id or webhookEventId to know it by")
    source = source_of(event, platform, profile, where)
    text, attachments = _text_and_attachments(event, where)
    stamp = event.get("timestamp")
    sent_at = stamp / 1000.0 if isinstance(stamp, (int, float)) and stamp > 0 else None
    return MessageEvent(source=source, text=text, platform_message_id=message_id, received_at=time.time(),
                        attachments=attachments, sent_at=sent_at, addressed=addressed(event, source.chat_type))


def reply_token_of(event: Any) -> Optional[str]:
    token = event.get("replyToken") if isinstance(event, dict) else None
    return token if isinstance(token, str) and 0 < len(token) <= 256 else None
