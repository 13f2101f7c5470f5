"""Images in an OpenAI-style request: ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}``
parts of the last user message, decoded to bytes (pure; the endpoint caches them, docs/media.md); and the files
of a reply as parts of the same shape (``file_part``): a photo as ``image_url``, anything else as OpenAI's
``{"type": "file", "file": {"filename", "file_data": "data:...;base64,..."}}``.

Only ``data:`` URLs are taken. A remote URL is refused, never fetched: fetching what a client names would let any
API client make the gateway reach hosts of the client's choosing, the gateway's own network included. The type a
data URL declares is a claim like any platform's; the bytes are sniffed once cached.
"""
from __future__ import annotations

import base64
import binascii
from typing import Any

MAX_IMAGES = 8


class PartRefused(ValueError):
    """The reason, for a 400 answer."""


def data_url_images(content: Any) -> list[bytes]:
    if not isinstance(content, list):
        return []
    images = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") != "image_url":
            continue
        holder = part.get("image_url")
        url = holder.get("url") if isinstance(holder, dict) else holder
        if not isinstance(url, str) or not url:
            continue          # nothing to take (as before images were taken at all)
        if not url.startswith("data:"):
            raise PartRefused("an image_url must be a data: URL (base64); the gateway fetches no remote URLs")
        meta, comma, payload = url[5:].partition(",")
        if not comma or not meta.endswith(";base64"):
            raise PartRefused("an image_url data: URL must be base64-encoded")
        try:
            images.append(base64.b64decode(payload, validate=True))
        except (binascii.Error, ValueError):
            raise PartRefused("an image_url data: URL holds invalid base64") from None
        if len(images) > MAX_IMAGES:
            raise PartRefused(f"at most {MAX_IMAGES} images per message")
    return images


def file_part(file, data: bytes) -> dict:
    """A reply's file (an OutgoingFile and its bytes) as a content part, its bytes in a data URL."""
    url = f"data:{file.mime or 'application/octet-stream'};base64,{base64.b64encode(data).decode('ascii')}"
    if file.kind == "photo":
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "file", "file": {"filename": file.name or "file", "file_data": url}}
