"""Session identity and path safety: pure functions, no database.

A session key names a conversation. It is stable (same source, same key, across restarts and versions), made only
of ``[a-z0-9._-]``, readable at a glance, and carries no raw platform id, because keys end up in file names, logs,
prompts and admin output:

    <profile>.<platform>.<chat_type>.chat-<h>[.thread-<h>][.user-<h>]
    e.g.  default.telegram.group.chat-3f9c0a7d51e2b804.thread-a01b9e33c2d47f61

* ``profile`` and ``platform`` appear as is when they already are short clean names (``[a-z0-9][a-z0-9_-]{0,31}``);
  any other name becomes a cleaned prefix plus 8 hex of its hash, so two different names never share a slug.
* ``<h>`` = ``hash_id(kind, value)``: the first 16 hex digits (64 bits) of
  ``sha256("agent-gateway/id/v1" NUL kind NUL value)`` (UTF-8). The domain string and the kind keep these hashes
  from matching any other system's hashes of the same ids, or a chat hash from matching a user hash. Values
  include the platform (and the chat for threads) because ids are only unique within them.
* This is hygiene, not anonymity: numeric ids are few enough to be brute-forced from an unsalted hash. The key
  keeps ids out of sight; the database itself still stores the source (it must know where to reply).

Grouping: a dm is one session per chat (thread and user ignored). A group, channel or thread chat is one session per
chat, plus per thread when the source has a thread_id, plus per user when ``per_user_in_groups=True`` and the source
has a user_id (anonymous posts, e.g. channel posts, stay per chat).

A linked identity (``[[identities]]``, actors/profiles/identities.py) makes the direct chats of its members one
conversation per profile, whatever platform they come from: ``<profile>.linked.dm.person-<hash of its name>``.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any, Optional, Union

HASH_DOMAIN = "agent-gateway/id/v1"
HASH_HEX_CHARS = 16
CHAT_TYPES = ("dm", "group", "channel", "thread")
MAX_PART_BYTES = 255
LINKED_PLATFORM = "linked"     # the platform part of a linked identity's direct chat key

KEY_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]*")
_CLEAN_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
_DRIVE = re.compile(r"^[A-Za-z]:")


class UnsafePathError(ValueError):
    """A path part could escape its root (separator, '..', drive letter, NUL, empty, too long, symlink out)."""


def hash_id(kind: str, value: Union[str, int]) -> str:
    """Stable 16-hex-digit digest of an id; see the module docstring for the exact construction."""
    if not isinstance(kind, str) or not kind or "\0" in kind:
        raise ValueError(f"hash kind must be a non-empty string without NUL, not {kind!r}")
    if value is None:
        raise ValueError(f"cannot hash a missing {kind} id")
    material = f"{HASH_DOMAIN}\0{kind}\0{value}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(material).hexdigest()[:HASH_HEX_CHARS]


def _slug(name: str, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"source.{what} must be a non-empty string, not {name!r}")
    if _CLEAN_NAME.fullmatch(name):
        return name
    cleaned = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")[:23] or "x"
    return f"{cleaned}-{hash_id(what, name)[:8]}"


def _id_text(value: Any, what: str) -> str:
    text = "" if value is None else str(value)
    if not text:
        raise ValueError(f"source.{what} is empty; a session key needs it")
    return text


def session_key(source: Any, per_user_in_groups: bool = False, identity: Optional[str] = None) -> str:
    """The session key of a message source.

    ``source`` is duck-typed: any object with ``platform, chat_id, chat_type, thread_id, user_id, profile``
    (``actors.messages.Source`` is one; thread_id, user_id and profile may be absent or None). ``identity``: the
    linked identity of its sender, which a direct chat's key is made from instead of the chat."""
    platform = _id_text(getattr(source, "platform", None), "platform")
    chat_id = _id_text(getattr(source, "chat_id", None), "chat_id")
    chat_type = getattr(source, "chat_type", None)
    if chat_type not in CHAT_TYPES:
        raise ValueError(f"source.chat_type must be one of {CHAT_TYPES}, not {chat_type!r}")
    profile = getattr(source, "profile", None) or "default"
    if identity and chat_type == "dm":
        return ".".join((_slug(profile, "profile"), LINKED_PLATFORM, "dm", "person-" + hash_id("identity", identity)))
    parts = [_slug(profile, "profile"), _slug(platform, "platform"), chat_type,
             "chat-" + hash_id("chat", f"{platform}\0{chat_id}")]
    if chat_type != "dm":
        thread_id = getattr(source, "thread_id", None)
        if thread_id is not None and str(thread_id) != "":
            parts.append("thread-" + hash_id("thread", f"{platform}\0{chat_id}\0{thread_id}"))
        user_id = getattr(source, "user_id", None)
        if per_user_in_groups and user_id is not None and str(user_id) != "":
            parts.append("user-" + hash_id("user", f"{platform}\0{user_id}"))
    return ".".join(parts)


def is_valid_key(key: Any) -> bool:
    """True for strings shaped like session keys: safe as one file name component."""
    return (isinstance(key, str) and len(key) <= MAX_PART_BYTES and KEY_PATTERN.fullmatch(key) is not None
            and ".." not in key)


def check_part(part: Any) -> str:
    """Return ``part`` if it is safe as one path component, else raise ``UnsafePathError`` saying why."""
    if not isinstance(part, str):
        raise UnsafePathError(f"path part must be a string, not {type(part).__name__}")
    if not part:
        raise UnsafePathError("path part is empty")
    if "\0" in part:
        raise UnsafePathError(f"path part {part!r} contains a NUL byte")
    if "/" in part or "\\" in part:
        raise UnsafePathError(f"path part {part!r} contains a path separator")
    if part in (".", "..") or ".." in part:
        raise UnsafePathError(f"path part {part!r} contains '..' or is '.'")
    if _DRIVE.match(part):
        raise UnsafePathError(f"path part {part!r} starts with a drive letter")
    try:
        size = len(part.encode("utf-8"))
    except UnicodeEncodeError:
        raise UnsafePathError(f"path part {part!r} is not valid Unicode (lone surrogate)") from None
    if size > MAX_PART_BYTES:
        raise UnsafePathError(f"path part is {size} bytes long; the limit is {MAX_PART_BYTES}")
    return part


def safe_path(root: Union[str, os.PathLike], *parts: str) -> Path:
    """``root / part / ...`` after checking every part, and that the resolved path (symlinks followed) stays
    strictly under the resolved root. Raises ``UnsafePathError`` otherwise."""
    if not parts:
        raise UnsafePathError("safe_path needs at least one part under the root")
    for part in parts:
        check_part(part)
    real_root = Path(root).resolve()
    candidate = real_root.joinpath(*parts).resolve()
    if real_root not in candidate.parents:
        raise UnsafePathError(f"path {candidate} resolves outside its root {real_root}")
    return real_root.joinpath(*parts)
