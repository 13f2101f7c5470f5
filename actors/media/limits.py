"""How large an attachment may be, as data: a cap per kind and one per platform; the smaller applies.

Telegram bots can download files of at most 20 MB through ``getFile`` (core.telegram.org/bots/api#getfile); a
larger one is refused before any byte is fetched, and the sender is told why (``too_large_notice``).
"""
from __future__ import annotations

MB = 1024 * 1024
KIND_CAPS = {"photo": 20 * MB, "document": 20 * MB, "voice": 20 * MB, "audio": 20 * MB, "video": 20 * MB}
PLATFORM_CAPS = {"telegram": 20 * MB}
DEFAULT_CAP = 20 * MB

# What the model is given, past the download caps (actors/media/parts.py).
IMAGE_LONG_SIDE = 1568            # px: an image larger than this is downscaled before it is sent
IMAGE_MAX_BYTES = 3 * MB          # an encoded image part larger than this is re-encoded smaller
MAX_PIXELS = 50_000_000           # an image claiming more is refused before it is decoded (decompression bomb)
TEXT_DOCUMENT_CHARS = 20_000      # a text document is cut here (with a note) before it joins the prompt


def cap_for(platform: str, kind: str) -> int:
    return min(KIND_CAPS.get(kind, DEFAULT_CAP), PLATFORM_CAPS.get(platform, DEFAULT_CAP))


def human_size(size: int) -> str:
    if size >= MB:
        value = size / MB
        return f"{value:.0f} MB" if value >= 10 or value == int(value) else f"{value:.1f} MB"
    if size >= 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size} bytes"


def too_large_notice(size: int, cap: int, name: str = "") -> str:
    what = f"“{name}”" if name else "That file"
    return (f"{what} is {human_size(size)}; I can take files up to {human_size(cap)}, so I did not open it. "
            "Please send a smaller one.")
