"""What the model is shown of a user's attachments: OpenAI-style content parts (docs/media.md).

* an image (a raster type, sniffed) -> a line describing it and an ``image_url`` part holding a data URL of the image
  re-encoded and bounded (actors/media/images.py); the bytes as sent never leave;
* a text document (text/*, JSON, XML, CSV, Markdown) -> a line and its text, cut at ``TEXT_DOCUMENT_CHARS``;
* anything else (voice, audio, video, archives, PDFs) -> a line saying what it is, e.g.
  ``[attachment: voice note (12 s, audio/ogg) — no transcription configured]``;
* one that could not be fetched -> a line saying so, so the model can tell the user.

Every attachment gets its ``[attachment: ...]`` line, whatever else it gets: a model without vision still knows a
photo came, and the offline agent answers from these lines. The full parts go only with the messages of the turn
being answered (``full``); older messages keep their lines, so a long chat does not send every photo again each turn.
"""
from __future__ import annotations

import base64
from typing import Any, Optional

from actors.media.limits import TEXT_DOCUMENT_CHARS, human_size
from actors.media.sniff import RASTER, is_textual, short_type
from storage import MediaCache

KIND_WORDS = {"photo": "photo", "document": "document", "voice": "voice note", "audio": "audio file",
              "video": "video"}
LINE_PREFIX = "[attachment: "


def details(att: dict) -> str:
    """PNG, 640×480, 12 KB — what a reply or a prompt says of a cached file."""
    mime = att.get("mime") or ""
    bits = [short_type(mime) if mime.startswith("image/") else mime or "unknown type"]
    if att.get("width") and att.get("height") and (mime.startswith(("image/", "video/"))):
        bits.append(f"{att['width']}×{att['height']}")
    if att.get("duration_s"):
        bits.insert(0, f"{att['duration_s']} s")
    bits.append(human_size(int(att.get("size") or 0)))
    if att.get("name") and att.get("kind") in ("document", "audio", "video"):
        bits.append(f"“{att['name']}”")
    return ", ".join(bits)


def line(att: dict, note: str = "") -> str:
    kind = KIND_WORDS.get(att.get("kind"), "file")
    if att.get("state") != "cached":
        return f"{LINE_PREFIX}{kind} — it could not be fetched from the platform, so I have not seen it]"
    return f"{LINE_PREFIX}{kind} ({details(att)}){' — ' + note if note else ''}]"


def user_content(text: str, attachments: list, cache: Optional[MediaCache], full: bool,
                 notes: Optional[dict] = None) -> Any:
    """A user message's ``content``: the text alone when there are no attachments, else a list of parts.
    ``notes``: cache key -> what to say of a voice note or audio file (its transcript: transcription.py)."""
    if not attachments:
        return text
    parts: list[dict] = [{"type": "text", "text": text}] if text else []
    for att in attachments:
        parts.extend(_parts(att, cache if full else None, notes or {}))
    return parts


def _parts(att: dict, cache: Optional[MediaCache], notes: dict) -> list[dict]:
    mime = att.get("mime") or ""
    cached = att.get("state") == "cached"
    if not cached or cache is None:
        return [_text(line(att))]
    if mime in RASTER or is_textual(mime):
        data = cache.read(att.get("cache_key") or "")
        if data is None:
            return [_text(line(att, "the file is no longer kept"))]
        if mime in RASTER:
            from actors.media.images import ImageRefused, for_model   # Pillow: loaded by the first image only
            try:
                shown, encoded = for_model(data)
            except ImageRefused as exc:
                return [_text(line(att, f"not shown: {exc}"))]
            url = f"data:{shown};base64,{base64.b64encode(encoded).decode('ascii')}"
            return [_text(line(att)), {"type": "image_url", "image_url": {"url": url}}]
        body = data.decode("utf-8", errors="replace")
        cut = len(body) > TEXT_DOCUMENT_CHARS
        note = f"the first {TEXT_DOCUMENT_CHARS:,} characters of {len(body):,} follow" if cut else "its text follows"
        return [_text(line(att, note)), _text(body[:TEXT_DOCUMENT_CHARS])]
    if att.get("kind") in ("voice", "audio"):
        return [_text(line(att, notes.get(att.get("cache_key"), "no transcription configured")))]
    return [_text(line(att))]


def _text(text: str) -> dict:
    return {"type": "text", "text": text + ("" if text.endswith("\n") else "\n")}
