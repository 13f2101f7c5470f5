"""From signal-cli's ``receive`` event to a ``MessageEvent``: pure functions, no network.

What signal-cli puts on its event stream (``JsonReceiveMessageHandler``): ``{"account": BOT, "envelope": {...}}``,
the envelope with ``sourceUuid`` (the sender's ACI), ``sourceNumber`` (null when the sender hides it), ``sourceName``,
``timestamp`` (the sender's clock: in Signal, a message is named by its author and this timestamp),
``serverReceivedTimestamp`` (Signal's server clock) and one of ``dataMessage``, ``syncMessage``, ``receiptMessage``,
``typingMessage``, ``editMessage``, ``storyMessage``, ``callMessage``.

Which events become input: a ``dataMessage`` from someone else with text or files. Reactions, remote deletes,
group updates (``groupInfo.type`` UPDATE), expiry-timer changes and stickers carry no question; edits of earlier
messages (``editMessage``) are not new questions either; receipts, typing and what the bot's own linked devices
sent (``syncMessage``) are not from a person to the bot. In a group only a message that mentions the bot or quotes
one of its messages counts, unless ``require_mention = false``: a Signal number in a group sees every message.

Identity: the dedup id is ``<sender>:<timestamp>``, the pair Signal itself names a message by; the sender is its
ACI (``sourceUuid``) where signal-cli gives one, else its number. A direct chat's id is the sender; a group's is
``group:<groupId>``. A message over 2 KiB arrives with its whole text as ``message`` (signal-cli reads the long-text
attachment, ``text/x-signal-plain``, for us), so that attachment is not handed on as a file.
"""
from __future__ import annotations

import time
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload, an_object
from actors.messages import Attachment, MessageEvent, Source

GROUP_PREFIX = "group:"
LONG_TEXT = "text/x-signal-plain"
MENTION_PLACEHOLDER = "\ufffc"     # where a mention sits in the body (its name is in ``mentions``)
SKIPPED_DATA = ("reaction", "remoteDelete", "sticker", "pollVote", "pollTerminate", "pinMessage", "unpinMessage",
                "adminDelete")


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value else None


def sender_of(envelope: dict) -> Optional[str]:
    """The sender as the dedup id and a direct chat name it: the ACI, else the number."""
    return _text(envelope.get("sourceUuid")) or _text(envelope.get("sourceNumber")) or _text(envelope.get("source"))


def group_chat(group_id: str) -> str:
    return GROUP_PREFIX + group_id


def recipient_params(chat_id: str) -> dict:
    """How signal-cli's ``send``, ``sendTyping`` and ``remoteDelete`` name the chat: ``groupId`` or ``recipient``."""
    if chat_id.startswith(GROUP_PREFIX):
        return {"groupId": chat_id[len(GROUP_PREFIX):]}
    return {"recipient": [chat_id]}


class BotIdentity:
    """Who the bot is on Signal: its number (the account signal-cli runs) and, where configured, its ACI, so that a
    mention or a quote of the bot is recognised when Signal hides the bot's number."""

    def __init__(self, number: str, uuid: str = ""):
        self.number, self.uuid = number, uuid

    def is_me(self, number: Any, uuid: Any) -> bool:
        return bool((self.number and number == self.number) or (self.uuid and uuid == self.uuid))


def _group_of(data: dict) -> Optional[dict]:
    group = data.get("groupInfo")
    return group if isinstance(group, dict) else None


def _addressed_to_bot(data: dict, bot: BotIdentity) -> bool:
    mentions = data.get("mentions") if isinstance(data.get("mentions"), list) else []
    if any(isinstance(m, dict) and bot.is_me(m.get("number"), m.get("uuid")) for m in mentions):
        return True
    quote = data.get("quote")
    return isinstance(quote, dict) and bot.is_me(quote.get("authorNumber"), quote.get("authorUuid"))


def _files(data: dict) -> list:
    items = data.get("attachments") if isinstance(data.get("attachments"), list) else []
    return [a for a in items if not (isinstance(a, dict) and a.get("contentType") == LONG_TEXT)]


def is_input(event: Any, bot: BotIdentity, require_mention: bool = True) -> bool:
    """True for an event to store as a person's message. Anything that is no event object, or an envelope whose
    ``dataMessage`` is no object, goes on to ``event_from_receive`` so that it is rejected loudly."""
    if not isinstance(event, dict):
        return True
    if event.get("account") not in (None, bot.number) and bot.number:
        return False     # a multi-account daemon's other accounts
    envelope = event.get("envelope")
    if not isinstance(envelope, dict):
        return "exception" not in event    # signal-cli could not decrypt: it logs that, there is nothing to read
    if "dataMessage" not in envelope:
        return False
    data = envelope["dataMessage"]
    if not isinstance(data, dict):
        return True
    if bot.is_me(envelope.get("sourceNumber"), envelope.get("sourceUuid")):
        return False
    if any(data.get(key) is not None for key in SKIPPED_DATA) or data.get("isExpirationUpdate"):
        return False
    group = _group_of(data)
    if group is not None and group.get("type") == "UPDATE":
        return False
    if data.get("message") is not None and not isinstance(data["message"], str):
        return True      # refused by event_from_receive, loudly
    if not (isinstance(data.get("message"), str) and data["message"].strip()) and not _files(data):
        return False
    if require_mention and group is not None:
        return _addressed_to_bot(data, bot) or _text(group.get("groupId")) is None   # no id: refused loudly
    return True


def strip_bot_mentions(text: str, mentions: Any, bot: BotIdentity) -> str:
    """The body without the placeholders of the bot's own mentions (``start``/``length`` in UTF-16 units): they
    address the bot and are not part of the question. Other people's mentions stay as their placeholder."""
    if not isinstance(mentions, list):
        return text
    units = text.encode("utf-16-le", "surrogatepass")
    spans = sorted(((m["start"], m["length"]) for m in mentions
                    if isinstance(m, dict) and bot.is_me(m.get("number"), m.get("uuid"))
                    and type(m.get("start")) is int and type(m.get("length")) is int
                    and 0 <= m["start"] and 0 < m["length"] and m["start"] + m["length"] <= len(units) // 2),
                   reverse=True)
    for start, length in spans:
        units = units[:start * 2] + units[(start + length) * 2:]
    return units.decode("utf-16-le", "surrogatepass").strip() if spans else text


def attachment_kind(content_type: str, name: str = "") -> str:
    """An audio attachment without a file name is a voice note: signal-cli does not pass on Signal's voice-message
    flag, and clients send a recording unnamed while a shared audio file keeps its name."""
    major = content_type.split("/", 1)[0].lower()
    if major == "audio" and not name:
        return "voice"
    return {"image": "photo", "audio": "audio", "video": "video"}.get(major, "document")


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def attachment_of(item: Any, chat_id: str) -> Attachment:
    """A pending attachment fetched later with ``getAttachment`` (``ref`` = chat + id), or, for an entry without
    an id (nothing to fetch it by), one marked unavailable so that the turn says a file could not be read."""
    if not isinstance(item, dict):
        return Attachment(kind="document", state="unavailable")
    content_type = item.get("contentType") if isinstance(item.get("contentType"), str) else ""
    name = item.get("filename") if isinstance(item.get("filename"), str) else ""
    caption = item.get("caption") if isinstance(item.get("caption"), str) else ""
    attachment_id = _text(item.get("id"))
    kind = attachment_kind(content_type, name)
    if attachment_id is None:
        return Attachment(kind=kind, name=name, caption=caption, state="unavailable")
    return Attachment(kind=kind, size=_count(item.get("size")), name=name, caption=caption,
                      ref=f"{chat_id}|{attachment_id}", width=_count(item.get("width")),
                      height=_count(item.get("height")))


def split_ref(ref: str) -> tuple[str, str]:
    """(chat id, attachment id) of an attachment's ``ref``."""
    chat_id, _, attachment_id = ref.partition("|")   # a chat id holds no "|"
    if not chat_id or not attachment_id:
        raise ValueError(f"no Signal attachment reference: {ref!r}")
    return chat_id, attachment_id


def event_from_receive(event: Any, platform: str, profile: str, bot: BotIdentity) -> MessageEvent:
    an_object(event, "receive event")
    envelope = event.get("envelope")
    if not isinstance(envelope, dict):
        raise MalformedPayload("receive event has no envelope object")
    data = envelope.get("dataMessage")
    if not isinstance(data, dict):
        raise MalformedPayload(f"dataMessage must be an object, got {type(data).__name__}")
    sender, timestamp = sender_of(envelope), envelope.get("timestamp")
    if sender is None:
        raise MalformedPayload("envelope names no sender (sourceUuid or sourceNumber)")
    if type(timestamp) is not int or timestamp <= 0:
        raise MalformedPayload(f"envelope timestamp must be a positive integer, got {timestamp!r}")
    body = data.get("message")
    if body is not None and not isinstance(body, str):
        raise MalformedPayload(f"message must be a string, got {type(body).__name__}")
    group = _group_of(data)
    if group is not None:
        group_id = _text(group.get("groupId"))
        if group_id is None:
            raise MalformedPayload(f"groupInfo.groupId must be a non-empty string, got {group.get('groupId')!r}")
        chat_id, chat_type = group_chat(group_id), "group"
    else:
        chat_id, chat_type = sender, "dm"
    source = Source(platform=platform, chat_id=chat_id, chat_type=chat_type, user_id=sender,
                    user_name=_text(envelope.get("sourceName")) or _text(envelope.get("sourceNumber")),
                    profile=profile)
    quote = data.get("quote")
    quoted = (f"{_text(quote.get('authorUuid')) or _text(quote.get('authorNumber'))}:{quote['id']}"
              if isinstance(quote, dict) and type(quote.get("id")) is int
              and (_text(quote.get("authorUuid")) or _text(quote.get("authorNumber"))) else None)
    server_ms = envelope.get("serverReceivedTimestamp")   # Signal's clock: a sender cannot choose it
    return MessageEvent(source=source, text=strip_bot_mentions(body or "", data.get("mentions"), bot),
                        platform_message_id=f"{sender}:{timestamp}", received_at=time.time(),
                        reply_to_message_id=quoted,
                        sent_at=server_ms / 1000.0 if type(server_ms) is int and server_ms > 0 else None,
                        attachments=tuple(attachment_of(item, chat_id) for item in _files(data)))
