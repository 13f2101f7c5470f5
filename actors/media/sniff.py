"""What a file is, from its bytes: a small table of magic numbers, then a look at whether it is text.

The platform's MIME type and the sender's file name are claims, made by whoever sent the file; the bytes are the
only evidence. So the type is sniffed here and never taken from the platform. A file name may refine *text* into a
text subtype (``.csv`` -> text/csv, ``.md`` -> text/markdown), because CSV and Markdown have no signature; it can
never turn bytes into a type they do not show (an HTML page named ``photo.png`` stays text/html, and a PNG whose
tail is also HTML, a polyglot, is image/png: it is only ever decoded as an image, re-encoded, never shown as a page).

Scripts in disguise stay what they are: SVG (XML that may carry script) is ``image/svg+xml`` but never counts as a
raster image (``RASTER``), so it reaches the model as text at most.
"""
from __future__ import annotations

import json
from typing import Optional

OCTET = "application/octet-stream"
RASTER = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp")
TEXT_SUBTYPES = {".csv": "text/csv", ".md": "text/markdown", ".markdown": "text/markdown", ".tsv":
                 "text/tab-separated-values", ".json": "application/json"}
SAMPLE = 8192

# (offset, signature, MIME). Checked in order; the first match wins.
MAGIC: tuple = (
    (0, b"\x89PNG\r\n\x1a\n", "image/png"),
    (0, b"\xff\xd8\xff", "image/jpeg"),
    (0, b"GIF87a", "image/gif"),
    (0, b"GIF89a", "image/gif"),
    (0, b"BM", "image/bmp"),
    (0, b"%PDF-", "application/pdf"),
    (0, b"PK\x03\x04", "application/zip"),
    (0, b"PK\x05\x06", "application/zip"),
    (0, b"\x1f\x8b", "application/gzip"),
    (0, b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (0, b"Rar!\x1a\x07", "application/vnd.rar"),
    (0, b"OggS", "audio/ogg"),
    (0, b"fLaC", "audio/flac"),
    (0, b"ID3", "audio/mpeg"),
    (0, b"\x1aE\xdf\xa3", "video/webm"),
    (0, b"\x7fELF", "application/x-executable"),
    (0, b"MZ", "application/x-msdownload"),
)
FTYP = {b"M4A ": "audio/mp4", b"M4B ": "audio/mp4", b"qt  ": "video/quicktime", b"heic": "image/heic",
        b"heix": "image/heic", b"mif1": "image/heif", b"avif": "image/avif"}


def sniff(data: bytes, name: str = "") -> str:
    """The MIME type the bytes show; ``name`` only refines text into a text subtype (module docstring)."""
    head = data[:SAMPLE]
    found = _binary(head)
    if found is not None:
        return found
    if not is_text(head, complete=len(data) <= SAMPLE):
        return OCTET
    return _text_type(head, name)


def _binary(head: bytes) -> Optional[str]:
    if head[:4] == b"RIFF" and len(head) >= 12:
        return {b"WEBP": "image/webp", b"WAVE": "audio/wav", b"AVI ": "video/x-msvideo"}.get(head[8:12], OCTET)
    if head[4:8] == b"ftyp":
        return FTYP.get(head[8:12], "video/mp4")
    if len(head) >= 2 and head[0] == 0xFF and head[1] in (0xFB, 0xF3, 0xF2):
        return "audio/mpeg"
    for offset, signature, mime in MAGIC:
        if head[offset:offset + len(signature)] == signature:
            return mime
    return None


def is_text(head: bytes, complete: bool = True) -> bool:
    """UTF-8 without NULs and with few control characters. A sample cut inside a character is still text."""
    if b"\x00" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if complete or exc.start < len(head) - 3:
            return False
        text = head[:exc.start].decode("utf-8")
    controls = sum(1 for ch in text if ord(ch) < 32 and ch not in "\t\n\r\f")
    return controls <= max(1, len(text) // 100)


def _text_type(head: bytes, name: str) -> str:
    start = head.lstrip()[:256].lower()
    if start.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<script")):
        return "text/html"
    if start.startswith(b"<svg") or (start.startswith(b"<?xml") and b"<svg" in head[:1024].lower()):
        return "image/svg+xml"
    if start.startswith(b"<?xml"):
        return "application/xml"
    suffix = name[name.rfind("."):].lower() if "." in name else ""
    if start[:1] in (b"{", b"[") and (suffix == ".json" or _json(head)):
        return "application/json"
    return TEXT_SUBTYPES.get(suffix, "text/plain") if suffix != ".json" else "text/plain"


def _json(head: bytes) -> bool:
    try:
        json.loads(head)
    except ValueError:
        return False
    return True


def is_textual(mime: str) -> bool:
    """Shown to the model as text (docs/media.md): text/*, JSON, XML. SVG counts as text, never as an image."""
    return mime.startswith("text/") or mime in ("application/json", "application/xml", "image/svg+xml")


def short_type(mime: str) -> str:
    """image/png -> PNG, audio/ogg -> OGG: how a reply names a type."""
    sub = mime.split("/", 1)[-1].split("+", 1)[0]
    return {"jpeg": "JPEG", "octet-stream": "binary", "plain": "text"}.get(sub, sub.upper())
