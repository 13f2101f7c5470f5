"""A visitor's earlier conversations: the list the page shows after New chat, and one of them opened to read. Pure
functions (no I/O, no actor); the adapter reads the store and answers the frames with them.

Whose they are: a conversation is a session of the visitor's own session key (the key its messages are stored
under, adapter.py ``_key``), and that key comes from the visitor cookie alone (server.py). A page names a session by
its id only to open it; the adapter then checks the session's key against the visitor's, and a session of another
key is answered exactly as one that does not exist, so a forged or guessed id reveals nothing, not even that it is
a session.

    page -> server                                  server -> page
    {"type": "conversations"}                       {"type": "conversations", "items": [ITEM, ...]}
    {"type": "conversation", "id": SESSION_ID}      {"type": "conversation", "id": SESSION_ID, "current": bool,
                                                     "messages": [...]}   (as a history frame's)

A frame the server cannot answer with what was asked comes back as its own type with ``error`` (and ``retry``: the
same request may succeed later), e.g. ``{"type": "conversation", "error": "no such conversation in this chat",
"retry": false}``: the page shows it in the panel that asked, never as a refused message.

An ITEM is ``{"id", "current", "started", "updated", "preview", "messages"}``: times in epoch seconds, the preview
the last words the visitor wrote there (or the session's title), ``messages`` how many of them the preview was
counted from (the newest PREVIEW_EVENTS events). Reading is all a page can do with an earlier conversation here:
writing goes to the current one.
"""
from __future__ import annotations

import re
from typing import Iterable, Optional

SESSION_ID = re.compile(r"[0-9a-f]{32}")     # storage/sessions.py: uuid4().hex
LISTED = 20                # conversations a list shows, most recently used first
PREVIEW_EVENTS = 40        # transcript events read per listed conversation for its preview
PREVIEW_CHARS = 120
NOT_YOURS = "no such conversation in this chat"


def session_id_of(frame: dict) -> Optional[str]:
    """The session id a ``conversation`` frame names, if it is one's shape (else None: answered as not found)."""
    value = frame.get("id")
    return value if isinstance(value, str) and SESSION_ID.fullmatch(value) else None


def preview(events: Iterable, title: Optional[str]) -> tuple[str, int]:
    """What a list item shows of a conversation: its title, else the newest words the visitor wrote in it, one
    line, at most PREVIEW_CHARS; and how many messages of the visitor the events held."""
    said = [str(e.payload.get("text") or "") for e in events
            if e.kind == "message" and e.role == "user" and isinstance(e.payload, dict)]
    said = [text for text in said if text.strip() and not text.strip().startswith("/")]   # commands say nothing
    shown = title or (said[-1] if said else "")
    shown = " ".join(shown.split())
    return (shown[:PREVIEW_CHARS - 1] + "…" if len(shown) > PREVIEW_CHARS else shown), len(said)


def list_item(info, events: Iterable) -> dict:
    text, count = preview(events, info.title)
    return {"id": info.session_id, "current": info.state in ("active", "suspended"), "started": info.created_at,
            "updated": info.updated_at, "preview": text, "messages": count}


def is_visitors(info, key: str) -> bool:
    """The session belongs to the visitor whose conversations are keyed ``key`` (and so may be read by them)."""
    return info is not None and info.session_key == key


def refusal(kind: str, reason: str, retry: bool = False) -> dict:
    """The answer to a ``conversations`` or ``conversation`` frame that cannot be given: why, and whether to ask
    again later."""
    return {"type": kind, "error": reason, "retry": retry}
