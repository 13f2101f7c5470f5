"""What each profile remembers: ``Store.memory``. An entry belongs to a profile and a scope within it (a user, a
linked identity, a chat, or the whole profile: actors/memory/scope.py makes the scope's name), and holds one short
text. Nothing here reads across profiles: every read and write names its profile.

Bounds are enforced in the transaction that writes (``add``): a scope holding ``max_entries`` refuses the next one,
so a hostile user cannot grow the file without limit however fast they write. The same text twice in one scope is
one entry (``UNIQUE (profile, scope, text)``): a remember repeated after a crash, or by a model that repeats
itself, adds nothing.

What survives kill -9: every call that returned (one transaction each).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from .db import Database, fetch_all, fetch_one

_COLUMNS = "memory_id, profile, scope, text, created_at, session_key"
MAX_LISTED = 10_000


@dataclass(frozen=True)
class MemoryEntry:
    memory_id: int
    profile: str
    scope: str
    text: str
    created_at: float
    session_key: Optional[str] = None


@dataclass(frozen=True)
class Added:
    """What ``add`` did: ``entry`` is the new entry, or the one that already held this text (``inserted`` False);
    ``None`` with ``full`` True when the scope held ``max_entries`` already."""
    entry: Optional[MemoryEntry]
    inserted: bool
    full: bool = False
    count: int = 0                  # entries of the scope after the call


def _entry(r: tuple) -> MemoryEntry:
    return MemoryEntry(r[0], r[1], r[2], r[3], r[4], r[5])


class MemoryStore:
    """Reached as ``Store.memory``; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, profile: str, scope: str, text: str, max_entries: int, session_key: Optional[str] = None,
                  now: Optional[float] = None) -> Added:
        now = time.time() if now is None else now

        async def do(conn):
            same = await fetch_one(conn, f"SELECT {_COLUMNS} FROM memory WHERE profile = ? AND scope = ? AND "
                                         "text = ?", (profile, scope, text))
            count = (await fetch_one(conn, "SELECT COUNT(*) FROM memory WHERE profile = ? AND scope = ?",
                                     (profile, scope)))[0]
            if same is not None:
                return Added(_entry(same), False, count=count)
            if count >= max_entries:
                return Added(None, False, full=True, count=count)
            cur = await conn.execute("INSERT INTO memory (profile, scope, text, created_at, session_key) "
                                     "VALUES (?, ?, ?, ?, ?)", (profile, scope, text, now, session_key))
            return Added(MemoryEntry(cur.lastrowid, profile, scope, text, now, session_key), True, count=count + 1)
        return await self._db.write(do)

    async def entries(self, profile: str, scope: str, limit: int = MAX_LISTED) -> list[MemoryEntry]:
        """The scope's entries, oldest first (the newest ``limit`` of them)."""
        async def fetch(conn):
            rows = await fetch_all(conn, f"SELECT {_COLUMNS} FROM memory WHERE profile = ? AND scope = ? "
                                         "ORDER BY memory_id DESC LIMIT ?", (profile, scope, int(limit)))
            return [_entry(r) for r in reversed(rows)]
        return await self._db.read(fetch)

    async def listing(self, profile: Optional[str] = None, scope: Optional[str] = None,
                      limit: int = MAX_LISTED) -> list[MemoryEntry]:
        """Entries of every profile (or of ``profile``; of ``scope`` too when given), by profile, scope, age."""
        where, args = [], []
        for column, value in (("profile", profile), ("scope", scope)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        clause = f"WHERE {' AND '.join(where)}" if where else ""

        async def fetch(conn):
            rows = await fetch_all(conn, f"SELECT {_COLUMNS} FROM memory {clause} ORDER BY profile, scope, "
                                         "memory_id LIMIT ?", (*args, int(limit)))
            return [_entry(r) for r in rows]
        return await self._db.read(fetch)

    async def get(self, memory_id: int) -> Optional[MemoryEntry]:
        async def fetch(conn):
            row = await fetch_one(conn, f"SELECT {_COLUMNS} FROM memory WHERE memory_id = ?", (int(memory_id),))
            return _entry(row) if row else None
        return await self._db.read(fetch)

    async def forget(self, memory_ids: list[int], profile: Optional[str] = None,
                     scope: Optional[str] = None) -> list[MemoryEntry]:
        """Delete the entries ``memory_ids`` (only those of ``profile`` and ``scope`` when given: a tool forgets in
        its own scope only); answers the entries deleted."""
        ids = [int(i) for i in memory_ids]

        async def do(conn):
            gone = []
            for memory_id in ids:
                row = await fetch_one(conn, f"SELECT {_COLUMNS} FROM memory WHERE memory_id = ?", (memory_id,))
                if row is None or (profile is not None and row[1] != profile) or (scope is not None and
                                                                                  row[2] != scope):
                    continue
                await conn.execute("DELETE FROM memory WHERE memory_id = ?", (memory_id,))
                gone.append(_entry(row))
            return gone
        return await self._db.write(do)
