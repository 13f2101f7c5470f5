"""Platform rate-limit bans that must outlive the adapter process: ``Store.pacing``.

A platform's "429, retry after N seconds" binds the chat on the platform's side whatever happens to us; an adapter
killed and restarted inside that window must keep waiting. So each ban is written when it is received (bans are
rare: one small write each), keyed by (adapter, chat), holding the wall-clock time it ends. Wall-clock, because a
monotonic clock means nothing to the next process; the adapter converts at load (actors/adapters/pacing.py).

What survives kill -9: every ban whose ``ban`` call returned (one committed transaction). A kill between the 429's
arrival and that commit loses the ban; the restarted adapter's budgets start spent, which covers the common case
of a ban shorter than one refill interval.
"""
from __future__ import annotations

import time
from typing import Optional

from .db import Database, fetch_all


class PacingBans:
    """Reached as ``Store.pacing``; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def ban(self, adapter_id: str, chat_id: str, until: float, now: Optional[float] = None) -> None:
        """Record that ``chat_id`` of ``adapter_id`` may not be written to before ``until`` (wall-clock seconds).
        A later end never shortens an earlier one; expired bans of the adapter are dropped on the way."""
        now = time.time() if now is None else now

        async def do(conn):
            await conn.execute("DELETE FROM pacing_bans WHERE adapter_id = ? AND until <= ?", (adapter_id, now))
            await conn.execute("INSERT INTO pacing_bans (adapter_id, chat_id, until) VALUES (?, ?, ?) "
                               "ON CONFLICT (adapter_id, chat_id) DO UPDATE SET until = max(pacing_bans.until, excluded.until)",
                               (adapter_id, str(chat_id), float(until)))
        await self._db.write(do)

    async def active(self, adapter_id: str, now: Optional[float] = None) -> dict[str, float]:
        """The bans of ``adapter_id`` still running at ``now``: chat id -> wall-clock end."""
        now = time.time() if now is None else now

        async def fetch(conn):
            rows = await fetch_all(conn, "SELECT chat_id, until FROM pacing_bans WHERE adapter_id = ? AND until > ?",
                                   (adapter_id, now))
            return {chat_id: until for chat_id, until in rows}
        return await self._db.read(fetch)
