"""From a WhatsApp webhook to ``MessageEvent``s: pure functions, no network.

Meta POSTs JSON signed with the app secret: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>``
(``check_signature``: checked on the raw bytes before anything is parsed). The body::

    {"object": "whatsapp_business_account",
     "entry": [{"id": "<WABA id>", "changes": [{"field": "messages", "value": {
         "messaging_product": "whatsapp",
         "metadata": {"display_phone_number": "15550001111", "phone_number_id": "<id>"},
         "contacts": [{"profile": {"name": "Alice"}, "wa_id": "15551234567"}],
         "messages": [{"from": "15551234567", "id": "wamid.HBgL...", "timestamp": "1712345678", "type": "text",
                       "text": {"body": "hello"}, "context": {"from": "...", "id": "wamid.<replied to>"}}],
         "statuses": [{"id": "wamid.<ours>", "status": "sent|delivered|read|failed", "timestamp": "...",
                       "recipient_id": "...", "errors": [{"code": 131047, "title": "...", ...}]}]}}]}]}

``webhook_items`` splits one body into the messages addressed to this phone number (each with its sender's
contact) and the status callbacks; a change for another phone number id or another field is skipped (one app's
webhook may serve several numbers). Which messages become input (``event_from_message``): ``text``; ``image``,
``audio`` (a voice note when ``voice`` is true), ``document``, ``video``, ``sticker`` as attachments (their media id
fetched through the media-URL indirection before the row is stored: media_intake.py), the caption as text;
``location`` and ``contacts`` as a line saying what was shared; ``interactive`` replies (``button_reply``,
``list_reply``) and template quick-reply ``button``s as the title the user tapped; ``context`` as the message
answered. A ``reaction`` is never input: it is feedback on a message (``reaction_of``). ``system``,
``unsupported`` and other kinds are acknowledged and skipped (``skip_reason``).

Identity: the Cloud API serves one-to-one chats, so the chat is the user's WhatsApp id (``chat_id`` = ``user_id`` =
``from``, a dm), and the answer goes to ``to`` = that id. A message is its ``wamid``, which every redelivery carries:
the inbox dedup makes three deliveries one row (G2).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload
from actors.messages import Attachment, MessageEvent, Source
from storage import Reaction

MEDIA_KINDS = {"image": "photo", "document": "document", "video": "video", "sticker": "photo"}
TEXT_KINDS = ("text", "location", "contacts", "interactive", "button")
SKIPPED_KINDS = ("system", "unsupported", "unknown", "order", "request_welcome")
MAX_ITEMS = 256        # messages and statuses in one body: Meta batches a few; nothing legitimate comes close


class WebhookRefused(Exception):
    """The request is not Meta's (signature) or not a webhook at all: answered ``status``, nothing stored."""

    def __init__(self, reason: str, status: int = 400):
        super().__init__(reason)
        self.reason, self.status = reason, status


def signature_of(body: bytes, app_secret: str) -> str:
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def check_signature(body: bytes, header: Optional[str], app_secret: str) -> None:
    """``X-Hub-Signature-256`` must be the HMAC-SHA256 of the raw body keyed with the app secret (compared in
    constant time); WebhookRefused(401) otherwise."""
    if not header:
        raise WebhookRefused("no X-Hub-Signature-256 header", status=401)
    if not hmac.compare_digest(header.strip().lower().encode(), signature_of(body, app_secret).encode()):
        raise WebhookRefused("X-Hub-Signature-256 does not match the body (not signed with this app's secret)",
                             status=401)


def webhook_items(body: bytes, phone_number_id: str) -> tuple[list[dict], list[dict]]:
    """(messages, statuses) of one signed body for this phone number. A message comes as ``{"message": ...,
    "contact": ...}`` (the raw event ``event_from_message`` takes); WebhookRefused(400) for a body that is no
    webhook. Entries for other numbers and other fields are left out."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise WebhookRefused(f"the body is no JSON ({type(exc).__name__})") from None
    if not isinstance(payload, dict) or payload.get("object") != "whatsapp_business_account":
        raise WebhookRefused("not a whatsapp_business_account webhook")
    messages: list[dict] = []
    statuses: list[dict] = []
    for entry in _list(payload.get("entry")):
        for change in _list(entry.get("changes") if isinstance(entry, dict) else None):
            if not isinstance(change, dict) or change.get("field") != "messages":
                continue
            value = change.get("value")
            if not isinstance(value, dict):
                continue
            metadata = value.get("metadata") if isinstance(value.get("metadata"), dict) else {}
            if str(metadata.get("phone_number_id", "")) != phone_number_id:
                continue
            contacts = {c.get("wa_id"): c for c in _list(value.get("contacts")) if isinstance(c, dict)}
            for message in _list(value.get("messages")):
                sender = message.get("from") if isinstance(message, dict) else None
                messages.append({"message": message, "contact": contacts.get(sender) or {}})
            statuses.extend(s for s in _list(value.get("statuses")) if isinstance(s, dict))
    if len(messages) + len(statuses) > MAX_ITEMS:
        raise WebhookRefused(f"{len(messages) + len(statuses)} items in one webhook, over {MAX_ITEMS}")
    return messages, statuses


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def wamid_of(raw: Any) -> Optional[str]:
    message = raw.get("message") if isinstance(raw, dict) else None
    wamid = message.get("id") if isinstance(message, dict) else None
    return wamid if isinstance(wamid, str) and wamid else None


def skip_reason(raw: Any) -> Optional[str]:
    """None when the message is input (or malformed: ``event_from_message`` says why); otherwise why it is
    acknowledged and skipped."""
    message = raw.get("message") if isinstance(raw, dict) else None
    if isinstance(message, dict) and message.get("type") in SKIPPED_KINDS + ("reaction",):
        return f"message type {message.get('type')!r}"
    return None


def sent_at_of(message: dict) -> Optional[float]:
    stamp = message.get("timestamp")
    return float(stamp) if isinstance(stamp, str) and stamp.isdigit() else None


def newest_stored(rows: list, chat_id: str) -> Optional[tuple[float, str]]:
    """(time, wamid) of the newest of a chat's messages among inbox rows the gateway stored (``InboxRow``s of
    this adapter): Meta's time of each (``sent_at``), else when the row was stored; None when none is the chat's
    (rows of a linked identity's other chats, internal events)."""
    newest = None
    for row in rows:
        payload = row.payload if isinstance(row.payload, dict) else {}
        source = payload.get("source") if isinstance(payload.get("source"), dict) else {}
        if payload.get("internal") or source.get("chat_id") != chat_id:
            continue
        at = payload.get("sent_at")
        at = float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else row.received_at
        if newest is None or at > newest[0]:
            newest = (at, row.platform_message_id)
    return newest


def reaction_of(raw: Any, platform: str) -> Optional[Reaction]:
    """A ``reaction`` message as the Reaction the user now shows on one of the bot's messages (empty emoji: taken
    away); None for anything else."""
    message = raw.get("message") if isinstance(raw, dict) else None
    if not isinstance(message, dict) or message.get("type") != "reaction":
        return None
    reaction, sender = message.get("reaction"), message.get("from")
    if not isinstance(reaction, dict) or not isinstance(sender, str) or not isinstance(reaction.get("message_id"),
                                                                                       str):
        return None
    emoji = reaction.get("emoji") or ""
    return Reaction(platform=platform, chat_id=sender, message_id=reaction["message_id"], user_id=sender,
                    emoji=(str(emoji)[:16],) if emoji else (), at=sent_at_of(message) or time.time())


def _part(message: dict, kind: str, where: str) -> dict:
    part = message.get(kind)
    if not isinstance(part, dict):
        raise MalformedPayload(f"{where}: a {kind} message without its {kind!r} object")
    return part


def _text_of(kind: str, message: dict, where: str) -> str:
    if kind == "text":
        body = _part(message, "text", where).get("body")
        if not isinstance(body, str):
            raise MalformedPayload(f"{where}: a text message without text.body")
        return body
    if kind == "location":
        place = _part(message, "location", where)
        label = ", ".join(str(place[k]) for k in ("name", "address") if place.get(k)) or "a place"
        return f"[shared a location: {label} ({place.get('latitude', '?')}, {place.get('longitude', '?')})]"
    if kind == "contacts":
        names = [str((c.get("name") or {}).get("formatted_name") or "?") for c in _list(message.get("contacts"))
                 if isinstance(c, dict)]
        return f"[shared contact(s): {', '.join(names[:10]) or '?'}]"
    if kind == "interactive":
        interactive = _part(message, "interactive", where)
        chosen = interactive.get(interactive.get("type") or "")
        if interactive.get("type") not in ("button_reply", "list_reply") or not isinstance(chosen, dict):
            raise MalformedPayload(f"{where}: interactive reply of type {str(interactive.get('type'))[:20]!r}")
        return str(chosen.get("title") or chosen.get("id") or "")
    if kind == "button":
        button = _part(message, "button", where)
        return str(button.get("text") or button.get("payload") or "")
    media = _part(message, kind, where)
    return str(media.get("caption") or "")


def event_from_message(raw: Any, platform: str, profile: str) -> MessageEvent:
    """One message of ``webhook_items`` as a MessageEvent; MalformedPayload for anything that is none."""
    message = raw.get("message") if isinstance(raw, dict) else None
    if not isinstance(message, dict):
        raise MalformedPayload(f"message is {type(message).__name__}, not an object")
    wamid, sender, kind = message.get("id"), message.get("from"), message.get("type")
    where = f"message {str(wamid)[:40]!r}"
    if not isinstance(wamid, str) or not wamid:
        raise MalformedPayload(f"{where}: no message id (wamid)")
    if not isinstance(sender, str) or not sender.isdigit():
        raise MalformedPayload(f"{where}: 'from' must be a WhatsApp id (digits), got {str(sender)[:24]!r}")
    attachments: tuple = ()
    if kind in MEDIA_KINDS or kind == "audio":
        media = _part(message, kind, where)
        if not isinstance(media.get("id"), str) or not media["id"]:
            raise MalformedPayload(f"{where}: a {kind} message without its media id")
        attachment_kind = ("voice" if media.get("voice") else "audio") if kind == "audio" else MEDIA_KINDS[kind]
        attachments = (Attachment(kind=attachment_kind, ref=media["id"], name=str(media.get("filename") or ""),
                                  caption=str(media.get("caption") or "")),)
    elif kind not in TEXT_KINDS:
        raise MalformedPayload(f"{where}: message type {str(kind)[:20]!r} is not taken")
    context = message.get("context") if isinstance(message.get("context"), dict) else {}
    reply_to = context.get("id") if isinstance(context.get("id"), str) else None
    profile_name = (raw.get("contact") or {}).get("profile") if isinstance(raw.get("contact"), dict) else None
    name = profile_name.get("name") if isinstance(profile_name, dict) else None
    source = Source(platform=platform, chat_id=sender, chat_type="dm", user_id=sender,
                    user_name=str(name)[:100] if isinstance(name, str) and name else None, profile=profile)
    return MessageEvent(source=source, text=_text_of(kind, message, where), platform_message_id=wamid,
                        received_at=time.time(), reply_to_message_id=reply_to, attachments=attachments,
                        sent_at=sent_at_of(message))


def status_line(status: dict) -> str:
    """A status callback as one log line: which of our messages, what became of it, and why if it failed."""
    errors = _errors_text(status)
    line = f"message {str(status.get('id'))[:60]} to {str(status.get('recipient_id'))[:20]}: {status.get('status')}"
    return line + (f" ({errors})" if errors else "")


def _errors_text(status: dict) -> str:
    return "; ".join(f"{e.get('code')} {str(e.get('title') or e.get('message') or '')[:100]}" for e in
                     _list(status.get("errors"))[:3] if isinstance(e, dict))


RECEIPTS = ("sent", "delivered", "read", "failed")


def receipt_of(status: dict) -> Optional[tuple[str, str]]:
    """(our message's wamid, what became of it) of a status callback; None for one the ledger cannot take (no
    wamid, or a status outside sent / delivered / read / failed, such as ``deleted``)."""
    wamid, state = status.get("id"), status.get("status")
    if not isinstance(wamid, str) or not 0 < len(wamid) <= 256 or state not in RECEIPTS:
        return None
    return wamid, state


def failure_reason(status: dict) -> str:
    """The errors of a failed status as one line: ``131026 Message undeliverable``; "" for any other."""
    return _errors_text(status) if status.get("status") == "failed" else ""


def failed_codes(status: dict) -> list:
    return [e.get("code") for e in _list(status.get("errors")) if isinstance(e, dict)] \
        if status.get("status") == "failed" else []
