"""The name an attachment is shown under: the sender's file name made harmless, or one made up from its kind.

A display name is only ever text in a prompt or a reply; the file itself lives under its hash (storage/media.py).
Still it is cleaned as if it were a path part, so that nothing downstream could be led astray by it: only the last
path component is kept (``../../etc/passwd`` -> ``passwd``, ``C:\\x\\evil.exe`` -> ``evil.exe``), control and format
characters (NUL, newlines, bidirectional overrides that make ``exe.txt`` look like ``txt.exe``) are removed, leading
dots go (no hidden ``.bashrc``), and the result is at most MAX_NAME characters, keeping the extension.
"""
from __future__ import annotations

import re
import unicodedata

MAX_NAME = 100
_DEFAULT_EXT = {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp",
                "audio/ogg": ".ogg", "audio/mpeg": ".mp3", "video/mp4": ".mp4", "application/pdf": ".pdf",
                "text/plain": ".txt"}
_SPACES = re.compile(r"\s+")


def display_name(raw: object, kind: str = "document", mime: str = "") -> str:
    name = raw if isinstance(raw, str) else ""
    name = re.split(r"[/\\]", name)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")   # Cc, Cf (bidi), Cs, Co, Cn
    name = _SPACES.sub(" ", name).strip().lstrip(".").strip()
    if name in ("", ".", ".."):
        return kind + _DEFAULT_EXT.get(mime, "")
    if len(name) > MAX_NAME:
        stem, dot, ext = name.rpartition(".")
        ext = "." + ext if dot and len(ext) <= 10 else ""
        name = (stem if dot else name)[:MAX_NAME - len(ext)].rstrip() + ext
    return name
