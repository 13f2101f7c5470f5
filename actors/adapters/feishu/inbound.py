"""From a Feishu / Lark event callback to a ``MessageEvent``: pure functions, no network.

A callback is one POST of JSON to the app's Request URL: ``{"encrypt": ...}`` when the app has an Encrypt Key
(crypto.py), the plain JSON otherwise. Decrypted, it is either the URL check the console sends when the Request URL
is saved, ``{"type": "url_verification", "challenge", "token"}`` (answered with ``{"challenge"}``), or an event in
the 2.0 schema::

    {"schema": "2.0",
     "header": {"event_id", "event_type": "im.message.receive_v1", "create_time" (ms), "token", "app_id", ...},
     "event": {"sender": {"sender_id": {"open_id", "union_id", "user_id"}, "sender_type": "user"},
               "message": {"message_id", "root_id", "parent_id", "thread_id", "chat_id", "chat_type": "p2p" | "group",
                           "message_type", "content": a JSON string, "mentions": [{"key": "@_user_1", "id":
                           {"open_id"}, "name"}], "create_time"}}}

``header.event_id`` is the same in every delivery of one event (the platform redelivers a callback not answered 200
within a few seconds); the inbox dedups on ``message.message_id``, the same in each.

Which events become input: ``im.message.receive_v1`` from a user (not an app) of type ``text``, ``post`` (rich text,
flattened to its text), ``image``, ``file``, ``audio`` and ``media`` (the last four as attachments whose bytes the
message resource API serves); every other event or message type is answered and skipped with a log line
(``skip_reason``), as is a group message that does not @mention the bot where mentions are required.

Identity: the chat is ``message.chat_id`` (``oc_...``), a dm for ``p2p`` and a group otherwise; a message inside a
thread (话题) carries its ``thread_id``; the sender is ``sender_id.open_id`` (``ou_...``, per app).
"""
from __future__ import annotations

import json
import re
import time
from typing import Any, Optional

from actors.adapters.feishu.crypto import CallbackRefused, decrypt, signature_ok
from actors.adapters.payload_fields import MalformedPayload
from actors.messages import Attachment, MessageEvent, Source

MESSAGE_EVENT = "im.message.receive_v1"
MEDIA_KINDS = {"image": ("photo", "image_key", "image"), "file": ("document", "file_key", "file"),
               "audio": ("voice", "file_key", "file"), "media": ("video", "file_key", "file")}
TAKEN_MESSAGES = {"text", "post", *MEDIA_KINDS}
MAX_CONTENT_CHARS = 200_000
_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


def _json_object(data: Any, what: str) -> dict:
    try:
        value = json.loads(data)
    except (TypeError, ValueError, RecursionError) as exc:
        raise CallbackRefused(f"{what} is no JSON ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise CallbackRefused(f"{what} is no JSON object")
    return value


def open_callback(body: bytes, headers, *, encrypt_key: str, verification_token: str, now: float,
                  max_age_s: float) -> dict:
    """The decrypted, checked callback: refusals (``CallbackRefused``) in this order: a signature missing or wrong
    (with an Encrypt Key, on everything but the URL check, which proves itself by decrypting), a stale timestamp, a
    body that does not decrypt, a token that differs."""
    payload = _json_object(body, "the body")
    if encrypt_key:
        if "encrypt" not in payload or not isinstance(payload["encrypt"], str):
            raise CallbackRefused("a plain body, but the app has an Encrypt Key", status=401)
        timestamp, nonce = headers.get("X-Lark-Request-Timestamp", ""), headers.get("X-Lark-Request-Nonce", "")
        signed = headers.get("X-Lark-Signature", "")
        payload = _json_object(decrypt(encrypt_key, payload["encrypt"]), "the decrypted body")
        if payload.get("type") != "url_verification":
            if not signature_ok(encrypt_key, timestamp, nonce, body, signed):
                raise CallbackRefused("bad or missing X-Lark-Signature", status=401)
            try:
                age = now - int(timestamp)
            except ValueError:
                raise CallbackRefused("X-Lark-Request-Timestamp is no number", status=401) from None
            if age > max_age_s:
                raise CallbackRefused(f"signed {age:.0f} s ago, over {max_age_s:.0f} s: a replay", status=401)
    if verification_token:
        header = payload.get("header") if isinstance(payload.get("header"), dict) else {}
        token = payload.get("token") if payload.get("type") == "url_verification" else header.get("token")
        if not isinstance(token, str) or token != verification_token:
            raise CallbackRefused("the verification token differs", status=401)
    return payload


def challenge_of(payload: dict) -> Optional[str]:
    """The URL check's challenge, to be answered; None for an event."""
    if payload.get("type") != "url_verification":
        return None
    challenge = payload.get("challenge")
    if not isinstance(challenge, str) or len(challenge) > 256:
        raise CallbackRefused("a URL check without its challenge")
    return challenge


def event_id(payload: Any) -> Optional[str]:
    header = payload.get("header") if isinstance(payload, dict) else None
    value = header.get("event_id") if isinstance(header, dict) else None
    return value if isinstance(value, str) and _ID.match(value) else None


def _message(payload: Any) -> dict:
    event = payload.get("event") if isinstance(payload, dict) else None
    message = event.get("message") if isinstance(event, dict) else None
    return message if isinstance(message, dict) else {}


def group_message(payload: Any) -> bool:
    return bool(_message(payload)) and _message(payload).get("chat_type") != "p2p"


def mentions_bot(payload: Any, bot_open_id: str) -> bool:
    mentions = _message(payload).get("mentions")
    return bool(bot_open_id) and isinstance(mentions, list) and any(
        isinstance(m, dict) and isinstance(m.get("id"), dict) and m["id"].get("open_id") == bot_open_id
        for m in mentions)


def skip_reason(payload: Any, bot_open_id: str, require_mention: bool) -> Optional[str]:
    """None when the event is input (or malformed: ``normalise`` says why); otherwise why it is skipped."""
    if not isinstance(payload, dict):
        return None
    if payload.get("schema") != "2.0":
        return "an event in the 1.0 schema (the app's events must use 2.0)"
    header = payload.get("header") if isinstance(payload.get("header"), dict) else {}
    if header.get("event_type") != MESSAGE_EVENT:
        return f"event {str(header.get('event_type'))[:40]!r}"
    event = payload.get("event") if isinstance(payload.get("event"), dict) else {}
    sender = event.get("sender") if isinstance(event.get("sender"), dict) else {}
    if sender.get("sender_type") not in (None, "user"):
        return f"a message from a {str(sender.get('sender_type'))[:16]!r}"
    message = _message(payload)
    kind = message.get("message_type")
    if not isinstance(kind, str):
        return None   # malformed: normalise says why
    if kind not in TAKEN_MESSAGES:
        return f"message type {kind[:24]!r}"
    if require_mention and message.get("chat_type") != "p2p" and not mentions_bot(payload, bot_open_id):
        return "a group message not addressed to the bot"
    return None


def _id(value: Any, what: str, where: str) -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise MalformedPayload(f"{where}: {what} must be an id of letters, digits, _ and -, got {str(value)[:24]!r}")
    return value


def flatten_post(content: dict) -> str:
    """A rich-text (post) message's words: its title, then each paragraph's text, link and @ elements in order."""
    if "content" not in content:   # the localised form: {"zh_cn": {...}, "en_us": {...}}
        content = next((v for v in content.values() if isinstance(v, dict)), {})
    lines = [str(content.get("title") or "")] if content.get("title") else []
    for paragraph in content.get("content") or ():
        words = []
        for element in paragraph if isinstance(paragraph, list) else ():
            if not isinstance(element, dict):
                continue
            tag = element.get("tag")
            if tag in ("text", "a", "code_block", "md"):
                words.append(str(element.get("text") or ""))
            elif tag == "at":
                words.append("@" + str(element.get("user_name") or element.get("user_id") or ""))
            elif tag == "emotion":
                words.append(f":{element.get('emoji_type', '')}:")
        lines.append("".join(words))
    return "\n".join(lines)


def _with_names(text: str, message: dict) -> str:
    """Mention placeholders (``@_user_1``) as the names they stand for."""
    mentions = message.get("mentions")
    for mention in mentions if isinstance(mentions, list) else ():
        if isinstance(mention, dict) and isinstance(mention.get("key"), str):
            text = text.replace(mention["key"], "@" + str(mention.get("name") or "someone"))
    return text


def _text_and_attachments(message: dict, where: str) -> tuple[str, tuple]:
    raw = message.get("content")
    if not isinstance(raw, str) or len(raw) > MAX_CONTENT_CHARS:
        raise MalformedPayload(f"{where}: content must be a JSON string of at most {MAX_CONTENT_CHARS} characters")
    try:
        content = json.loads(raw)
    except (ValueError, RecursionError):
        raise MalformedPayload(f"{where}: content is no JSON") from None
    if not isinstance(content, dict):
        raise MalformedPayload(f"{where}: content is no JSON object")
    kind = message.get("message_type")
    if not isinstance(kind, str):
        raise MalformedPayload(f"{where}: message_type must be a string")
    if kind == "text":
        if not isinstance(content.get("text"), str):
            raise MalformedPayload(f"{where}: a text message without text")
        return _with_names(content["text"], message), ()
    if kind == "post":
        return _with_names(flatten_post(content), message), ()
    if kind in MEDIA_KINDS:
        attachment_kind, key_field, resource_type = MEDIA_KINDS[kind]
        key = _id(content.get(key_field), key_field, where)
        name = str(content.get("file_name") or "")[:200]
        return "", (Attachment(kind=attachment_kind, ref=resource_ref(message["message_id"], key, resource_type),
                               name=name),)
    raise MalformedPayload(f"{where}: message type {str(kind)[:20]!r} is not taken")


def resource_ref(message_id: str, key: str, resource_type: str) -> str:
    """An attachment's reference: what the message resource API needs to serve its bytes."""
    return f"{message_id}/{key}/{resource_type}"


def parse_resource_ref(ref: str) -> tuple[str, str, str]:
    message_id, key, resource_type = ref.split("/")
    return message_id, key, resource_type


def event_from_callback(payload: Any, platform: str, profile: str, bot_open_id: str = "") -> MessageEvent:
    if not isinstance(payload, dict):
        raise MalformedPayload(f"event is {type(payload).__name__}, not an object")
    where = f"event {str(event_id(payload))[:40]!r}"
    message = _message(payload)
    if not message:
        raise MalformedPayload(f"{where}: no event.message")
    message_id = _id(message.get("message_id"), "message_id", where)
    chat_id = _id(message.get("chat_id"), "chat_id", where)
    event = payload["event"]
    sender = event.get("sender") if isinstance(event.get("sender"), dict) else {}
    sender_ids = sender.get("sender_id") if isinstance(sender.get("sender_id"), dict) else {}
    user = _id(sender_ids.get("open_id"), "sender.sender_id.open_id", where)
    direct = message.get("chat_type") == "p2p"
    thread = message.get("thread_id")
    thread = _id(thread, "thread_id", where) if thread else None
    source = Source(platform=platform, chat_id=chat_id, chat_type="dm" if direct else "group", thread_id=thread,
                    user_id=user, profile=profile)
    text, attachments = _text_and_attachments(message, where)
    try:
        sent_at = int(message.get("create_time")) / 1000.0
    except (TypeError, ValueError):
        sent_at = None
    return MessageEvent(source=source, text=text, platform_message_id=message_id, received_at=time.time(),
                        attachments=attachments, sent_at=sent_at,
                        addressed=None if direct else mentions_bot(payload, bot_open_id))
