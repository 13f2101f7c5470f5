"""A reply's files as LINE message objects, and the table of files the webhook server serves for LINE to fetch.

LINE takes no upload from a bot: an image, video or audio message names HTTPS URLs that LINE's side fetches
(Messaging API reference, "Image message", "Video message", "Audio message"):

    image   originalContentUrl (JPEG or PNG, at most 10 MB), previewImageUrl (JPEG or PNG, at most 1 MB)
    video   originalContentUrl (mp4, at most 200 MB), previewImageUrl (as an image's)
    audio   originalContentUrl (m4a, at most 200 MB), duration (milliseconds)
    each URL at most 2,000 characters

LINE has no message type for a bot to send any other file (a PDF, an archive): ``message_for`` refuses one with a
``PermanentError`` that says so, and the reply shows a line naming the file in its place (reply_files.py).

The fetch is LINE's, and lazy: the chat shows the message at once and the recipient's app loads the preview, then
the file, when it is shown or opened, possibly long after the push (an app offline for an hour loads them an hour
later); what was loaded once LINE keeps. So a URL must stay good for a while after the send: ``ServedMedia`` keeps
each file for ``ttl_s`` (``[adapters.NAME] media_ttl_s``), within a bound on files and bytes.

Each URL's token is made from the push's retry key and a key derived from the channel secret (``media_token``):
unguessable without the secret, and the same for every attempt at one part in any life of the daemon. A push
repeated under its retry key after a restart (LINE answers 409 with the first push) serves the first push's URLs
again from the new life.

What survives kill -9: nothing of the table (memory only). A file pushed in an earlier life and not sent again is
answered 404 from then on: a recipient whose app had not loaded it sees it as unavailable (what LINE keeps of one
loaded before the kill still shows). A part whose push had not been recorded is sent again by the next life under
the same retry key, which puts its file back under the same URL.
"""
from __future__ import annotations

import base64
import collections
import dataclasses
import hashlib
import hmac
import io
import struct
import time
from typing import Optional
from urllib.parse import quote

from PIL import Image, ImageDraw

from actors.adapters.errors import PermanentError
from actors.media.images import ImageRefused, for_model
from actors.media.limits import human_size

IMAGE_TYPES = ("image/jpeg", "image/png")
VIDEO_TYPES = ("video/mp4",)
AUDIO_TYPES = ("audio/mp4",)            # m4a: sniffed from its ftyp brand (actors/media/sniff.py)
IMAGE_LIMIT = 10 * 1024 * 1024
PREVIEW_LIMIT = 1024 * 1024
PREVIEW_SIDE = 240                      # LINE's preview size before 2020; any size is taken now, 240 px is enough
VIDEO_AUDIO_LIMIT = 200 * 1024 * 1024
URL_LIMIT = 2000
MAX_FILES = 512                         # files served at once (each expires after ttl_s)
MAX_BYTES = 256 * 1024 * 1024           # their bytes held at once; the oldest go first past either bound


@dataclasses.dataclass(frozen=True)
class Served:
    data: bytes
    mime: str
    name: str
    expires: float


@dataclasses.dataclass(frozen=True)
class MediaMessage:
    """What one file becomes on LINE: its message ``type`` and fields, and the bytes to serve for each URL role
    (``original``, and ``preview`` for an image or a video), each (bytes, MIME type)."""
    type: str
    original: tuple[bytes, str]
    preview: Optional[tuple[bytes, str]] = None
    duration_ms: int = 0


class ServedMedia:
    """The files the webhook server answers under ``<media_path>/<token>/<name>`` (loop thread only): added by
    ``put`` as a push is made, each answered by ``get`` until it expires. Bounded: at most ``max_files`` and
    ``max_bytes``; past either the oldest are dropped first (their URLs answer 404)."""

    def __init__(self, ttl_s: float, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES):
        self.ttl_s, self.max_files, self.max_bytes = ttl_s, max_files, max_bytes
        self._files: collections.OrderedDict[str, Served] = collections.OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._files)

    def put(self, token: str, data: bytes, mime: str, name: str, now: Optional[float] = None) -> None:
        now = time.monotonic() if now is None else now
        self._forget(token)
        self._files[token] = Served(data, mime, name, now + self.ttl_s)
        self.bytes += len(data)
        self._expire(now)
        while len(self._files) > 1 and (len(self._files) > self.max_files or self.bytes > self.max_bytes):
            self._forget(next(iter(self._files)))   # the oldest; the file just put always stays

    def get(self, token: str, name: str, now: Optional[float] = None) -> Optional[Served]:
        """The file under ``token`` if ``name`` is its name and it has not expired; else None."""
        now = time.monotonic() if now is None else now
        self._expire(now)
        served = self._files.get(token)
        if served is None or not hmac.compare_digest(served.name.encode(), name.encode()):
            return None
        return served

    def _expire(self, now: float) -> None:
        for token in [t for t, s in self._files.items() if s.expires <= now]:
            self._forget(token)

    def _forget(self, token: str) -> None:
        served = self._files.pop(token, None)
        if served is not None:
            self.bytes -= len(served.data)


def media_key(channel_secret: str) -> bytes:
    """The key media tokens are made with: derived from the channel secret, never the secret itself."""
    return hmac.new(channel_secret.encode(), b"line media urls", hashlib.sha256).digest()


def media_token(key: bytes, retry_key: str, role: str) -> str:
    """The token of one URL (``role``: original or preview) of the push under ``retry_key``: 43 URL-safe
    characters, the same in every life for the same part, unguessable without the channel secret."""
    digest = hmac.new(key, f"{retry_key}\n{role}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def media_url(public_url: str, media_path: str, token: str, name: str) -> str:
    return f"{public_url.rstrip('/')}{media_path.rstrip('/')}/{token}/{quote(name, safe='')}"


def served_name(name: str, mime: str) -> str:
    """The last part of a URL: the file's display name (already free of paths), or one made from its type."""
    return name or {"image/jpeg": "image.jpg", "image/png": "image.png", "video/mp4": "video.mp4",
                    "audio/mp4": "audio.m4a"}.get(mime, "file")


def message_for(kind: str, mime: str, name: str, data: bytes) -> MediaMessage:
    """The LINE message a file becomes (pure; CPU-bound for a large image: run off the loop), or PermanentError
    saying why LINE cannot show it."""
    size = human_size(len(data))
    if mime in IMAGE_TYPES:
        if len(data) > IMAGE_LIMIT:
            raise PermanentError(f"{name or 'the image'} is {size}: LINE shows images up to "
                                 f"{human_size(IMAGE_LIMIT)}", method="push")
        return MediaMessage("image", (data, mime), preview_of(data, mime))
    if mime in VIDEO_TYPES or mime in AUDIO_TYPES:
        if len(data) > VIDEO_AUDIO_LIMIT:
            raise PermanentError(f"{name or 'the file'} is {size}: LINE takes videos and audio up to "
                                 f"{human_size(VIDEO_AUDIO_LIMIT)}", method="push")
        if mime in VIDEO_TYPES:
            return MediaMessage("video", (data, mime), (VIDEO_PREVIEW, "image/png"))
        duration = mp4_duration_ms(data)
        if duration is None:
            raise PermanentError(f"{name or 'the audio'} states no length LINE could be told", method="push")
        return MediaMessage("audio", (data, mime), duration_ms=max(1, duration))
    if kind == "photo":
        raise PermanentError(f"LINE shows JPEG and PNG images only, not {mime}", method="push")
    raise PermanentError(f"LINE has no message a bot can send a {mime} file in (images, mp4 videos and m4a audio "
                         "only)", method="push")


def preview_of(data: bytes, mime: str) -> Optional[tuple[bytes, str]]:
    """An image's preview: None (the image is its own) within LINE's 1 MB, else a small copy of it."""
    if len(data) <= PREVIEW_LIMIT:
        return None
    try:
        preview_mime, preview = for_model(data, PREVIEW_SIDE, PREVIEW_LIMIT // 2)
    except ImageRefused as exc:
        raise PermanentError(f"no preview could be made of the image ({exc})", method="push") from None
    return preview, preview_mime


def _video_preview() -> bytes:
    """The preview every video shows (the gateway decodes no video): a dark square with a play mark."""
    image = Image.new("RGB", (PREVIEW_SIDE, PREVIEW_SIDE), (40, 40, 48))
    ImageDraw.Draw(image).polygon([(90, 70), (90, 170), (170, 120)], fill=(235, 235, 235))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


VIDEO_PREVIEW = _video_preview()


def mp4_duration_ms(data: bytes) -> Optional[int]:
    """The length an MP4 (m4a) file states in its movie header (``moov``/``mvhd``), in milliseconds; None where
    the boxes are missing or malformed. Reads box headers only, never past ``data``."""
    moov = _box(data, 0, len(data), b"moov")
    if moov is None:
        return None
    mvhd = _box(data, moov[0], moov[1], b"mvhd")
    if mvhd is None:
        return None
    start, end = mvhd
    # version and flags (4 bytes), then created, modified, timescale, duration: 64-bit times in version 1
    layout, length = (">4xQQIQ", 32) if data[start] == 1 else (">4xIIII", 20)
    if end - start < length:
        return None
    _created, _modified, timescale, duration = struct.unpack_from(layout, data, start)
    if timescale <= 0:
        return None
    return duration * 1000 // timescale


def _box(data: bytes, start: int, end: int, kind: bytes) -> Optional[tuple[int, int]]:
    """The body (start, end) of the first box of type ``kind`` among the boxes in data[start:end]."""
    at = start
    while at + 8 <= end:
        size, found = struct.unpack_from(">I4s", data, at)
        header = 8
        if size == 1:
            if at + 16 > end:
                return None
            size, header = struct.unpack_from(">Q", data, at + 8)[0], 16
        elif size == 0:
            size = end - at
        if size < header or at + size > end:
            return None
        if found == kind:
            return at + header, at + size
        at += size
    return None
