"""Reactions users put on the bot's answers (👍 / 👎 ...), kept with the reply they judge: ``Store.feedback``.

An adapter records a reaction the moment the platform reports it (before the batch's offset is committed: a
crash between the two makes the platform report it again, and the upsert makes that harmless). The bot's message
is looked up among the parts the ledger recorded, so a reaction is tied to its obligation and through it to the
session and the inbound message it answered; a reaction on anything else (a user's message, a message from before
the ledger knew it) is kept without that link. One row per (adapter, chat, message, user): a user's later
reaction replaces the earlier one, and an empty list means they took it away.

What survives kill -9: every recorded reaction whose call returned (one transaction).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable, Optional

from . import records
from .db import Database, fetch_all, fetch_one

MAX_EMOJI_PER_REACTION = 16      # a hostile client cannot make a row arbitrarily large


@dataclass(frozen=True)
class Reaction:
    """What the adapter saw: on ``message_id`` in ``chat_id`` of adapter ``platform``, ``user_id`` now shows
    ``emoji`` (a list; empty: none)."""
    platform: str
    chat_id: str
    message_id: str
    user_id: str
    emoji: tuple
    at: float = 0.0


@dataclass(frozen=True)
class FeedbackRow:
    platform: str
    chat_id: str
    message_id: str
    user_id: str
    emoji: list
    obligation_id: Optional[str]
    session_key: Optional[str]
    at: float


class Feedback:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(self, reactions: Iterable[Reaction]) -> int:
        """Upsert each reaction, tied to the reply whose part it is on where the ledger knows that part; returns how
        many were recorded."""
        batch = list(reactions)

        async def do(conn):
            for r in batch:
                owner = await fetch_one(conn, "SELECT o.obligation_id, o.session_key FROM obligation_parts p "
                                              "JOIN obligations o ON o.obligation_id = p.obligation_id "
                                              "WHERE o.platform = ? AND o.chat_id = ? AND p.platform_message_id = ?",
                                        (r.platform, r.chat_id, r.message_id))
                await conn.execute(
                    "INSERT INTO feedback (platform, chat_id, message_id, user_id, emoji, obligation_id, "
                    "session_key, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (platform, chat_id, message_id, "
                    "user_id) DO UPDATE SET emoji = excluded.emoji, at = excluded.at, "
                    "obligation_id = coalesce(excluded.obligation_id, obligation_id), "
                    "session_key = coalesce(excluded.session_key, session_key)",
                    (r.platform, r.chat_id, r.message_id, r.user_id,
                     records.pack([str(e) for e in r.emoji][:MAX_EMOJI_PER_REACTION]),
                     owner[0] if owner else None, owner[1] if owner else None, r.at or time.time()))
            return len(batch)
        return await self._db.write(do) if batch else 0

    async def of_session(self, session_key: str, limit: int = 100) -> list[FeedbackRow]:
        async def fetch(conn):
            return await fetch_all(conn, f"SELECT {_COLUMNS} FROM feedback WHERE session_key = ? ORDER BY at DESC "
                                         "LIMIT ?", (session_key, limit))
        return [_row(r) for r in await self._db.read(fetch)]

    async def counts(self) -> dict[str, int]:
        """emoji -> how many users show it now, over every kept reaction (for status and /metrics)."""
        async def fetch(conn):
            return await fetch_all(conn, "SELECT emoji FROM feedback")
        totals: dict[str, int] = {}
        for (blob,) in await self._db.read(fetch):
            for emoji in records.unpack(blob):
                totals[emoji] = totals.get(emoji, 0) + 1
        return totals


_COLUMNS = "platform, chat_id, message_id, user_id, emoji, obligation_id, session_key, at"


def _row(row) -> FeedbackRow:
    return FeedbackRow(row[0], row[1], row[2], row[3], records.unpack(row[4]), row[5], row[6], row[7])
