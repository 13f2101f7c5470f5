"""What the bot sends: the content of a message, an edit and a thread reply, its formatted body, the transaction
id of each PUT, and the size check against the 65,536-byte event limit. Pure functions, no network.

The limit is the whole event as the server stores it (canonical JSON: the content, and the envelope the server
adds: room id, sender, timestamps, auth and prev events, hashes, signatures). Canonical JSON writes non-ASCII as
UTF-8 but escapes quotes, backslashes and control characters, so a text's JSON can be twice its UTF-8 size (a
text of newlines), and an edit carries the text twice (the fallback ``body`` and ``m.new_content``). So:

* the chunker cuts replies at the pacing table's ``text_limit`` in UTF-8 bytes (24,000): body and formatted body
  of an ordinary text fit with the envelope;
* control characters no client shows are left out (JSON writes each as six bytes), so any text within the
  byte limit fits as a message and as an edit;
* ``fit`` measures the content as it will be sent and drops what it can when it is too big: first the formatted
  body (clients show ``body``), then, in an edit, the fallback body shrinks to a short prefix (clients show
  ``m.new_content``); only a content that is still over ``MAX_CONTENT_BYTES`` is refused (TooLongError), before
  anything leaves.

Transaction ids: a send that is a reply's part carries the key the sender derives from the ledger obligation
(``PlatformOp.idempotency_key``), so the PUT after a crash, from the same access token, names the same
transaction and the server answers with the event the first PUT made. An operation without a key (a pairing
code, an edit, a redaction) uses its op id: repeated within the operation's retries it is still one event.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Optional

import nh3
from markdown_it import MarkdownIt

from actors.adapters.errors import TooLongError

MAX_EVENT_BYTES = 65_536
ENVELOPE_ALLOWANCE = 4_096      # room v12 envelope with a few auth/prev events, hashes, signatures: ~1.5 KB
MAX_CONTENT_BYTES = MAX_EVENT_BYTES - ENVELOPE_ALLOWANCE
FALLBACK_PREVIEW_CHARS = 200    # an edit's fallback body when the whole text would not fit twice
MAX_RENDERED_BYTES = 24_000     # longer texts go without formatted_body (rendering costs ~3 ms per 1,000 chars)
_TXN = re.compile(r"[A-Za-z0-9._~-]{1,64}")
# C0 control characters but tab, newline and carriage return: no chat shows them, and canonical JSON writes each
# as six bytes (\u00XX), which could push a text within the byte limit out of the event limit.
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")

_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"]).disable("image")
# The tags the client-server spec lists for org.matrix.custom.html that an answer uses.
_TAGS = {"p", "br", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li", "hr", "a",
         "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "b", "i", "span"}
_CLEANER = nh3.Cleaner(tags=_TAGS, clean_content_tags={"script", "style"},
                       attributes={"a": {"href"}, "code": {"class"}, "ol": {"start"}},
                       url_schemes={"http", "https", "mailto"}, url_relative="deny", link_rel=None)


def canonical_size(content: dict) -> int:
    """UTF-8 bytes of the content as canonical JSON (sorted keys, no spaces, non-ASCII unescaped)."""
    return len(json.dumps(content, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode("utf-8"))


def formatted(text: str) -> Optional[str]:
    """The markdown text as Matrix HTML, sanitised; None when it would say nothing more than the plain body."""
    if len(text.encode("utf-8")) > MAX_RENDERED_BYTES:
        return None
    rendered = _CLEANER.clean(_MARKDOWN.render(text)).strip()
    if rendered.startswith("<p>") and rendered.endswith("</p>") and rendered.count("<") == 2:
        return None   # one plain paragraph: body says it all
    return rendered or None


def shown_text(text: str) -> str:
    """The text as it is sent: without the control characters no client shows."""
    return _CONTROLS.sub("", text)


def message(text: str, html: Optional[str] = None) -> dict:
    content = {"msgtype": "m.text", "body": text}
    if html:
        content.update(format="org.matrix.custom.html", formatted_body=html)
    return content


def relation_for(thread_id: Optional[str], reply_to: Optional[str]) -> Optional[dict]:
    """In a thread: the ``m.thread`` relation (with the reply fallback clients without threads show); else a plain
    reply to ``reply_to``; else none."""
    if thread_id:
        return {"rel_type": "m.thread", "event_id": thread_id, "is_falling_back": reply_to is None,
                "m.in_reply_to": {"event_id": reply_to or thread_id}}
    if reply_to:
        return {"m.in_reply_to": {"event_id": reply_to}}
    return None


def new_message(text: str, thread_id: Optional[str] = None, reply_to: Optional[str] = None) -> dict:
    """A message's content, fitted within the event limit (TooLongError if it cannot be)."""
    text = shown_text(text)
    def build(html: Optional[str]) -> dict:
        content = message(text, html)
        relates = relation_for(thread_id, reply_to)
        if relates:
            content["m.relates_to"] = relates
        return content
    return fit([build(formatted(text)), build(None)])


VOICE_MARK = "org.matrix.msc3245.voice"          # what makes clients show an m.audio as a voice message
AUDIO_MARK = "org.matrix.msc1767.audio"          # the extensible-events audio block MSC3245 pairs it with


def voice_message(mxc: str, mime: str, size: int, caption: str = "", thread_id: Optional[str] = None,
                  duration_ms: int = 0) -> dict:
    """An ``m.audio`` of the uploaded audio at ``mxc``, marked as a voice message (MSC3245): clients show a voice
    message's player. ``body`` is what a client without audio shows (the caption, else "Voice message")."""
    content = {"msgtype": "m.audio", "body": shown_text(caption) or "Voice message", "url": mxc,
               "info": {"mimetype": mime or "audio/ogg", "size": size},
               AUDIO_MARK: {"duration": duration_ms} if duration_ms else {}, VOICE_MARK: {}}
    if duration_ms:
        content["info"]["duration"] = duration_ms
    relates = relation_for(thread_id, None)
    if relates:
        content["m.relates_to"] = relates
    return content


def edit(original_event_id: str, text: str) -> dict:
    """An edit (``m.replace``) of the bot's own message: ``m.new_content`` is what clients show; the fallback
    ``body`` (prefixed "* ", as the spec asks) is for clients that do not know edits."""
    text = shown_text(text)
    def build(html: Optional[str], fallback: str) -> dict:
        return {**message("* " + fallback), "m.new_content": message(text, html),
                "m.relates_to": {"rel_type": "m.replace", "event_id": original_event_id}}
    html = formatted(text)
    preview = text[:FALLBACK_PREVIEW_CHARS] + ("…" if len(text) > FALLBACK_PREVIEW_CHARS else "")
    return fit([build(html, text), build(None, text), build(html, preview), build(None, preview)])


def fit(candidates: list[dict]) -> dict:
    """The first candidate within MAX_CONTENT_BYTES (they go from richest to leanest)."""
    for content in candidates:
        if canonical_size(content) <= MAX_CONTENT_BYTES:
            return content
    raise TooLongError(f"the event would be {canonical_size(candidates[-1]):,} bytes of content; the limit is "
                       f"{MAX_EVENT_BYTES:,} for the whole event", method="send")


def txn_id(key: Optional[str], op_id: str, kind: str = "m") -> str:
    """The transaction id of a PUT: the ledger's key when there is one (the same after a crash), else the op's
    ``platform_key`` (actors/adapters/idempotency.py: new for every operation with new content, in every life).
    Matrix allows any string; this keeps it short and URL-safe so it reads the same in logs and in the path."""
    source = key if key else f"{kind}:{op_id}"
    if key and _TXN.fullmatch(key):
        return f"gw.{key}"
    return f"gw.{hashlib.sha256(source.encode('utf-8')).hexdigest()[:32]}"
