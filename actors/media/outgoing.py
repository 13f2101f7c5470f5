"""Files a reply carries, from a tool's bytes to an ``OutgoingFile`` in the media cache (docs/media.md, "Outbound").

A tool returns bytes and a name (``actors/agents/tools.py``: ``ToolFile``); what the platforms are told comes from
the bytes alone, as for a user's upload: the MIME type is sniffed, an image is measured from its header, and only
a raster image the platforms render (PNG, JPEG, GIF, WebP) within ``PHOTO_MAX_PIXELS`` goes as a ``photo``;
everything else, a polyglot or an SVG included, is a ``document`` (downloaded, never rendered by the chat). The
name is a display name (never a path), the caption is bounded, and a file over ``MAX_TOOL_FILE_BYTES`` is refused
before it is cached: the model is told why in the tool's result.

What survives kill -9: the bytes are in the cache (``MediaCache.put``: written whole or not at all) before any
message names them; the transcript's tool result then names the key, which keeps the file as long as the
transcript (storage/media_refs.py), and the reply's obligation holds the file as one of its parts.
"""
from __future__ import annotations

from dataclasses import dataclass

from actors.media.images import image_size
from actors.media.limits import MB, human_size
from actors.media.names import display_name
from actors.media.sniff import sniff, short_type
from actors.messages import OutgoingFile
from storage import MediaCache

MAX_TOOL_FILE_BYTES = 50 * MB        # the largest upload any platform here takes (Telegram bots: 50 MB)
MAX_FILES_PER_RESULT = 10
MAX_CAPTION_CHARS = 1024
PHOTO_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
PHOTO_MAX_PIXELS = 40_000_000        # a "photo" larger than this goes as a document (platforms refuse or shrink it)


@dataclass(frozen=True)
class ToolFile:
    """A file a tool made: its bytes, the name it suggests and a caption. Returned inside a ``ToolOutput``."""
    data: bytes
    name: str = ""
    caption: str = ""


@dataclass(frozen=True)
class ToolOutput:
    """What a tool returns when it makes files: its text for the model and the files for the chat."""
    text: str
    files: tuple = ()              # of ToolFile


class FileRefused(ValueError):
    """The file cannot be sent; the reason is safe to show the model and the chat."""


def cache_tool_file(cache: MediaCache, tool_file: ToolFile) -> OutgoingFile:
    """Put the file's bytes in the cache and describe them from the bytes (module docstring). Blocking (a file
    write and an image header read): called in a worker thread."""
    data = tool_file.data
    if not isinstance(data, (bytes, bytearray)) or not data:
        raise FileRefused("a file must have some bytes")
    if len(data) > MAX_TOOL_FILE_BYTES:
        raise FileRefused(f"the file is {human_size(len(data))}; files up to {human_size(MAX_TOOL_FILE_BYTES)} "
                          "can be sent")
    data = bytes(data)
    mime = sniff(data, tool_file.name if isinstance(tool_file.name, str) else "")
    width = height = 0
    kind = "document"
    if mime in PHOTO_TYPES and (size := image_size(data)) is not None:
        width, height = size
        if width * height <= PHOTO_MAX_PIXELS:
            kind = "photo"
    caption = tool_file.caption if isinstance(tool_file.caption, str) else ""
    return OutgoingFile(cache_key=cache.put(data), mime=mime, kind=kind,
                        name=display_name(tool_file.name, kind, mime), caption=caption[:MAX_CAPTION_CHARS],
                        size=len(data), width=width, height=height)


def sent_note(file: OutgoingFile) -> str:
    """What the model reads in the tool's result about a file it made: that it is shown, and what it is."""
    shape = f", {file.width}×{file.height}" if file.width else ""
    return f"[file sent to the chat: {file.name} ({short_type(file.mime)}{shape}, {human_size(file.size)})]"


def unsent_line(file: OutgoingFile, why: str) -> str:
    """The line a reply shows instead of a file the platform cannot take."""
    return f"[file: {file.name} ({short_type(file.mime)}, {human_size(file.size)}) — {why}]"
