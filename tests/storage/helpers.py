"""Helpers shared by the storage tests."""
from __future__ import annotations

import sqlite3

from dataclasses import dataclass
from typing import Optional

from storage import Store


@dataclass(frozen=True)
class Src:
    """Stands in for actors.messages.Source (storage must not import actors)."""
    platform: str = "telegram"
    chat_id: str = "1001"
    chat_type: str = "dm"
    thread_id: Optional[str] = None
    user_id: Optional[str] = None
    profile: str = "default"


class open_store:
    """``async with open_store(path) as store``: a Store closed at the end of the block."""

    def __init__(self, path, durability: str = "normal") -> None:
        self.path, self.durability = path, durability

    async def __aenter__(self) -> Store:
        self.store = await Store.open(self.path, self.durability)
        return self.store

    async def __aexit__(self, *exc) -> None:
        await self.store.close()


def execute(where, statement: str, params: tuple = (), timeout: float = 5.0) -> list:
    """Run one statement (written for SQLite, as in storage/) on the store's database directly, as another program
    would, on either backend, in a transaction of its own; returns its rows. ``timeout``: SQLite's wait for a lock."""
    if str(where).startswith("postgresql://"):
        import psycopg
        from storage.postgres import translate
        with psycopg.connect(str(where), autocommit=True) as conn:
            cursor = conn.execute(translate(statement).text, params)
            return cursor.fetchall() if cursor.description is not None else []
    conn = sqlite3.connect(where, timeout=timeout)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        with conn:
            return conn.execute(statement, params).fetchall()
    finally:
        conn.close()


def dump(path) -> list[str]:
    """The whole database as SQL text (PostgreSQL: every row of every table, in order): equal dumps, nothing
    changed."""
    if str(path).startswith("postgresql://"):
        tables = [name for (name,) in execute(path, "SELECT table_name FROM information_schema.tables WHERE "
                                                    "table_schema = current_schema() ORDER BY table_name")]
        return [f"{table}: {row}" for table in tables
                for row in sorted(repr(tuple(r)) for r in execute(path, f"SELECT * FROM {table}"))]
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()
