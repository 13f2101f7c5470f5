"""From a fetched mail to a ``MessageEvent``: pure functions, no network.

Which mail is input (``refusal``): mail a person wrote to the mailbox. Never answered, so no two robots can write to
each other for ever: auto-submitted mail (RFC 3834: vacation replies, our own replies), bulk and list mail
(``Precedence``, ``List-Id``), bounces and delivery reports (``multipart/report``, an empty return path,
``MAILER-DAEMON``), and mail from the mailbox's own address.

Identity: the dedup id is the mail's ``Message-ID`` (one mail delivered twice, or taken again after a UIDVALIDITY
change, is one row); a mail without one gets an id from its mailbox position, which is all there is. A conversation
is a thread: its root is the first id of ``References``, else ``In-Reply-To``, else the mail itself, so every reply
in the thread, from either side, continues one session. The chat id carries the correspondent's address with the
root (``chat_id``), so a reply needs nothing but the chat id to find its recipient and its thread.

What the model sees: the plain text part (HTML converted to text where there is none: ``html_to_text``), without the
quoted history and the signature (``trimmed``); a thread's first mail is preceded by its subject.
"""
from __future__ import annotations

import email.utils
import html
import re
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from html.parser import HTMLParser
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload
from actors.messages import Attachment, MessageEvent, Source

MAX_IDS = 50                      # References kept at most (a hostile header can hold thousands)
MAX_ID_CHARS = 998                # one id at most (a header line's limit)
MAX_TEXT_CHARS = 200_000          # text taken from a body at most, before trimming
MAX_ATTACHMENTS = 10              # files taken from one mail at most
ROBOT_SENDERS = ("mailer-daemon", "postmaster", "no-reply", "noreply", "do-not-reply", "donotreply")
ID = re.compile(r"<[^<>\s]{1,996}>")
ATTRIBUTION = re.compile(r"^(On .{1,300} wrote:|Le .{1,300} a écrit :|Am .{1,300} schrieb .{0,100}:|"
                         r"-{2,} ?Original Message ?-{2,}|From: .{1,300})\s*$", re.IGNORECASE)


def parse(mail: bytes) -> EmailMessage:
    return BytesParser(policy=policy.default).parsebytes(mail)


def header(message: EmailMessage, name: str) -> str:
    """A header's value as text ("" where it is missing or does not decode)."""
    try:
        value = message.get(name)
    except Exception:  # noqa: BLE001 - a header the parser cannot decode is as good as absent
        return ""
    return str(value).strip() if value is not None else ""


def message_ids(value: str) -> list[str]:
    return ID.findall((value or "")[:MAX_IDS * MAX_ID_CHARS])[:MAX_IDS]


def sender_address(message: EmailMessage) -> tuple[str, str]:
    """(address in lower case, display name) of From; ("", "") where there is none that parses."""
    name, address = email.utils.parseaddr(header(message, "From"))
    address = address.strip().lower()
    if "@" not in address or any(c in address for c in " \r\n\0<>"):
        return "", ""
    return address, name.strip()


def refusal(message: EmailMessage, own_address: str) -> Optional[str]:
    """Why this mail must not be answered (loop protection), or None for a person's mail."""
    auto = header(message, "Auto-Submitted").lower()
    if auto and auto != "no":
        return f"Auto-Submitted: {auto[:40]}"
    precedence = header(message, "Precedence").lower()
    if precedence in ("bulk", "junk", "list", "auto_reply"):
        return f"Precedence: {precedence}"
    for name in ("List-Id", "List-Unsubscribe", "X-Autoreply", "X-Autorespond"):
        if header(message, name):
            return f"{name} present"
    if message.get_content_type() == "multipart/report":
        return "a delivery or disposition report"
    if header(message, "Return-Path") == "<>":
        return "a bounce (empty return path)"
    address, _ = sender_address(message)      # none: normalise refuses the mail as malformed, loudly
    if address and address.split("@")[0] in ROBOT_SENDERS:
        return f"from {address.split('@')[0]}"
    if own_address and address == own_address.lower():
        return "from the mailbox itself"
    return None


def thread_root(message: EmailMessage, own_id: str) -> str:
    references = message_ids(header(message, "References"))
    if references:
        return references[0]
    in_reply_to = message_ids(header(message, "In-Reply-To"))
    return in_reply_to[0] if in_reply_to else own_id


def chat_id(address: str, root: str) -> str:
    return f"{address} {root}"


def chat_parts(chat: str) -> tuple[str, str]:
    """(recipient address, thread root id) of a chat id; ValueError for anything else."""
    address, _, root = chat.partition(" ")
    if "@" not in address or any(c in address for c in "\r\n\0<>,;") or (root and not ID.fullmatch(root)):
        raise ValueError(f"{chat[:80]!r} is no email chat id (\"address <root-message-id>\")")
    return address, root


class _TextOfHtml(HTMLParser):
    """Text of an HTML body: scripts, styles and heads left out, block elements as line breaks, entities decoded.
    Nothing is rendered or fetched (no images, no links followed)."""
    SKIP = {"script", "style", "head", "title", "template"}
    BLOCK = {"p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "table", "hr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0
        self.quoting = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skipping += 1
        elif tag == "blockquote":
            self.quoting += 1     # quoted history in an HTML reply: trimmed like "> " lines
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skipping:
            self.skipping -= 1
        elif tag == "blockquote" and self.quoting:
            self.quoting -= 1
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self.skipping and not self.quoting:
            self.parts.append(data)


def html_to_text(markup: str) -> str:
    reader = _TextOfHtml()
    reader.feed(markup[:MAX_TEXT_CHARS * 4])
    reader.close()
    text = html.unescape("".join(reader.parts))
    lines = [re.sub(r"[ \t\u00a0]+", " ", line).strip() for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def body_text(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain",))
    if part is not None:
        return _content(part)
    part = message.get_body(preferencelist=("html",))
    return html_to_text(_content(part)) if part is not None else ""


def _content(part) -> str:
    try:
        content = part.get_content()
    except Exception:  # noqa: BLE001 - an unknown charset or a broken transfer encoding: decoded as well as can be
        payload = part.get_payload(decode=True) or b""
        content = payload.decode("utf-8", "replace")
    return content[:MAX_TEXT_CHARS] if isinstance(content, str) else ""


def trimmed(text: str) -> str:
    """The new part of a reply: without the signature ("-- " and what follows), the quoted history at its end
    ("> " lines, and the attribution line before them, "On ... wrote:"), and a forwarded or top-posted original
    after an attribution line."""
    lines = text.replace("\r\n", "\n").split("\n")
    for i, line in enumerate(lines):
        if line in ("-- ", "--"):
            lines = lines[:i]
            break
    for i, line in enumerate(lines):
        if ATTRIBUTION.match(line.strip()) and i > 0 and any(l.strip() for l in lines[:i]):
            following = [l for l in lines[i + 1:] if l.strip()]
            if not following or following[0].lstrip().startswith(">") or line.strip().lower().startswith(
                    ("-", "from:")):
                lines = lines[:i]
                break
    kept = [line for line in lines if not line.lstrip().startswith(">")]
    return "\n".join(kept).strip()


def event_from_mail(raw: Any, adapter_name: str, profile: str) -> MessageEvent:
    """``raw``: {"uid": int, "uidvalidity": int, "mail": bytes} as the intake fetched it."""
    if not isinstance(raw, dict) or not isinstance(raw.get("mail"), (bytes, bytearray)):
        raise MalformedPayload("a fetched mail is a dict with its bytes under \"mail\"")
    message = parse(bytes(raw["mail"]))
    address, name = sender_address(message)
    if not address:
        raise MalformedPayload("the mail has no From address that parses")
    ids = message_ids(header(message, "Message-ID"))
    own_id = ids[0] if ids else f"<uid.{raw.get('uidvalidity')}.{raw.get('uid')}@mailbox>"
    root = thread_root(message, own_id)
    in_reply_to = message_ids(header(message, "In-Reply-To"))
    text = trimmed(body_text(message))
    subject = header(message, "Subject")
    if root == own_id and subject:
        text = f"{subject}\n\n{text}" if text else subject
    sent_at = None
    try:
        when = email.utils.parsedate_to_datetime(header(message, "Date"))
        sent_at = when.timestamp() if when and when.tzinfo else None
    except (TypeError, ValueError, IndexError, OverflowError):
        pass
    source = Source(platform=adapter_name, chat_id=chat_id(address, root), chat_type="dm", user_id=address,
                    user_name=name or address, profile=profile)
    return MessageEvent(source=source, text=text, platform_message_id=own_id, received_at=0.0,
                        reply_to_message_id=in_reply_to[0] if in_reply_to else None, sent_at=sent_at,
                        attachments=attachments(message, raw.get("uidvalidity"), raw.get("uid")))


def attachment_kind(content_type: str) -> str:
    major = content_type.split("/")[0]
    return {"image": "photo", "audio": "audio", "video": "video"}.get(major, "document")


def attachments(message: EmailMessage, uidvalidity, uid) -> tuple:
    """The mail's files, pending (the intake takes their bytes from the mail: ``attachment_bytes``); ref
    ``"<uidvalidity>:<uid>:<index>"``, the index among the mail's attachments."""
    found = []
    for index, part in enumerate(message.iter_attachments()):
        if index >= MAX_ATTACHMENTS:
            break
        found.append(Attachment(kind=attachment_kind(part.get_content_type()), name=(part.get_filename() or "")[:200],
                                ref=f"{uidvalidity}:{uid}:{index}"))
    return tuple(found)


def attachment_bytes(mail: bytes, index: int) -> bytes:
    """The decoded bytes of attachment ``index`` of the mail; IndexError where it has no such attachment."""
    for number, part in enumerate(parse(mail).iter_attachments()):
        if number == index:
            return part.get_payload(decode=True) or b""
    raise IndexError(f"the mail has no attachment {index}")


def thread_card(message: EmailMessage) -> tuple[str, list[str]]:
    """(subject, references) a reply to ``message`` carries: "Re: " once, and the thread's ids with its own."""
    subject = header(message, "Subject").replace("\r", " ").replace("\n", " ")[:300]
    if not re.match(r"(?i)^re:", subject):
        subject = f"Re: {subject}" if subject else "Re: your message"
    references = message_ids(header(message, "References")) or message_ids(header(message, "In-Reply-To"))
    references += message_ids(header(message, "Message-ID"))[:1]
    return subject, references[-MAX_IDS:]
