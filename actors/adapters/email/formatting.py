"""A reply as a mail (pure): the agent's Markdown as the plain part, with an HTML alternative rendered from it
(CommonMark, no raw HTML from the text, images left out, sanitised to the tags a mail reader shows); the thread's
headers; a Message-ID named by the reply's part and text (reply_key)."""
from __future__ import annotations

import email.utils
import hashlib
from email.message import EmailMessage
from typing import Optional

import nh3
from markdown_it import MarkdownIt

from actors.adapters.email.inbound import message_ids
from actors.adapters.idempotency import platform_key

MAX_RENDERED_CHARS = 100_000      # longer texts go as plain text only
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"]).disable("image")
_TAGS = {"p", "br", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li", "hr", "a",
         "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "b", "i"}
_CLEANER = nh3.Cleaner(tags=_TAGS, clean_content_tags={"script", "style"},
                       attributes={"a": {"href"}, "ol": {"start"}}, url_schemes={"http", "https", "mailto"},
                       url_relative="deny", link_rel=None)


def html_alternative(text: str) -> Optional[str]:
    """The text as a small HTML document, or None where it would say nothing the plain part does not."""
    if len(text) > MAX_RENDERED_CHARS:
        return None
    rendered = _CLEANER.clean(_MARKDOWN.render(text)).strip()
    if not rendered or (rendered.startswith("<p>") and rendered.endswith("</p>") and rendered.count("<") == 2):
        return None
    return f"<!DOCTYPE html><html><body>{rendered}</body></html>"


def reply_key(op) -> str:
    """What names a reply's mail (its Message-ID): for a part of a reply (``op.ledger``), its obligation, its index,
    its chat and its text, and not the op id nor the claim's fence, which every owner of the reply draws anew, so
    the owner after a crash computes the id the lost send carried and finds its copy in the Sent folder. One part
    with one text is one mail whoever sends it; a part sent again with other text (under the re-sent mark) is
    another mail with an id of its own. Outside a reply (a pairing code): the op's key (``platform_key``)."""
    if op.ledger is None:
        return platform_key(op)
    obligation, _fence, index = op.ledger
    named = repr(("email-part", obligation, index, op.chat_id, op.text))
    return hashlib.sha256(named.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def reply_message_id(key: str, sender: str) -> str:
    return f"<{key}@{sender.rsplit('@', 1)[1]}>"


def root_card(root: str) -> tuple[str, list[str]]:
    """The thread card of a chat known by its root id alone (a reply after a restart whose thread's mails are not in
    the mailbox any more): a generic subject, the root as the thread."""
    return ("Re: your message", [root]) if root else ("A message", [])


def reply_mail(text: str, key: str, sender: str, display_name: str, recipient: str, card: tuple[str, list[str]],
               reply_to: Optional[str], now: float) -> EmailMessage:
    """One reply: From the mailbox, To the chat's correspondent, in the thread ``card`` (subject, references) as
    an answer to ``reply_to`` (the mail it answers; the thread's last id where there is none), with the Message-ID
    ``<key@sender's domain>``: one key, one send with one content, so every attempt at it carries the same id.
    ``Auto-Submitted: auto-replied`` (RFC 3834): other robots do not answer it."""
    subject, references = card
    answered = message_ids(reply_to or "")[:1] or list(references[-1:])
    references = list(references) + [i for i in answered if i not in references]
    message = EmailMessage()
    message["From"] = email.utils.formataddr((display_name, sender))
    message["To"] = recipient
    message["Subject"] = subject
    message["Date"] = email.utils.formatdate(now, localtime=False)
    message["Message-ID"] = reply_message_id(key, sender)
    if answered:
        message["In-Reply-To"] = answered[0]
    if references:
        message["References"] = " ".join(references)
    message["Auto-Submitted"] = "auto-replied"
    message.set_content(text)
    rendered = html_alternative(text)
    if rendered is not None:
        message.add_alternative(rendered, subtype="html")
    return message
