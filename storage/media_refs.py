"""Which media cache files are still referenced: the one query behind the cache's retention (storage/media.py).

A file is referenced while an inbox row or a transcript event names its key (``attachments[].cache_key`` in the
payload). Inbox rows go with the inbox's retention and transcripts with the session's, so a cached file lives as
long as the message that brought it is kept, and no longer.

Only rows whose record holds the bytes ``cache_key`` are decoded (a scan of the payload column, not of every
record), which keeps a sweep of a large database to one pass over each table.
"""
from __future__ import annotations

from typing import Any, Optional

from . import records
from .db import Database, fetch_all

MARK = b"cache_key"


def keys_in(payload: Any) -> set[str]:
    """The cache keys a stored payload names (an inbox MessageEvent or a transcript user event)."""
    found: set[str] = set()
    attachments = payload.get("attachments") if isinstance(payload, dict) else None
    for item in attachments or ():
        key = item.get("cache_key") if isinstance(item, dict) else None
        if isinstance(key, str) and key:
            found.add(key)
    return found


class MediaRefs:
    """Reached as ``Store.media``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def referenced(self) -> set[str]:
        async def fetch(conn):
            keys: set[str] = set()
            for table in ("inbox", "transcript"):
                for (blob,) in await fetch_all(conn, f"SELECT payload FROM {table} WHERE instr(payload, ?) > 0",
                                               (MARK,)):
                    try:
                        keys |= keys_in(records.unpack(blob))
                    except records.RecordError:
                        continue
            return keys
        return await self._db.read(fetch)

    async def file_in_session(self, session_id: str, key: str) -> Optional[dict]:
        """The attachment (kind, mime, name, ...) that an event of this session's transcript names by ``key``, or
        None: what lets a chat's own page fetch its files and no other chat's (actors/adapters/webchat)."""
        async def fetch(conn):
            rows = await fetch_all(conn, "SELECT payload FROM transcript WHERE session_id = ? "
                                         "AND instr(payload, ?) > 0", (session_id, key.encode("ascii")))
            for (blob,) in rows:
                try:
                    payload = records.unpack(blob)
                except records.RecordError:
                    continue
                for item in (payload.get("attachments") or ()) if isinstance(payload, dict) else ():
                    if isinstance(item, dict) and item.get("cache_key") == key:
                        return item
            return None
        return await self._db.read(fetch)
