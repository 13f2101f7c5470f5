"""Watches the agent created (docs/background.md, "Watches the agent creates"): ``Store.agent_watches``.

A watch the agent created with its ``create_watch`` tool is one row: its name (``agent-`` and a hash of the call
that created it: never given again, even where the chat's number N is, after its watch #N was removed), the chat's
conversation key and source (where a change's prompt goes), its number in that chat, what it reads (a URL, an MCP
server's resource, or a file under the operator's roots), when (an interval, or a cron schedule) and the prompt.
What it saw and its changes are kept as every watch's (storage/watches.py, under its name).

``create`` counts the chat's watches against its limit and inserts the row in one transaction; the tool call that
asks (``origin_ref``, unique) creates one watch at most: a call made again (a turn resumed after a crash) finds the
watch it created. The session writes it in the handler that records the call's result (actors/sessions/
watch_tool.py), so a kill -9 leaves both or neither.

What survives kill -9: every call that returned (one transaction each).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from . import records
from .db import Database, fetch_all, fetch_one
from .keys import hash_id

_COLUMNS = ("name, session_key, number, kind, server, target, interval_s, schedule, timezone, prompt, source, "
            "origin_ref, created_at")


@dataclass(frozen=True)
class AgentWatch:
    name: str
    session_key: str               # the chat's conversation: a change's prompt goes in its inbox
    number: int                    # per chat: #N
    kind: str                      # url | mcp | file
    server: str                    # kind mcp: the [mcp.NAME] server whose resource ``target`` is
    target: str                    # an http(s) URL, the resource's URI, or a file's absolute path
    interval_s: float
    schedule: str                  # "": every interval_s; else the cron times it is read at (in ``timezone``)
    timezone: str
    prompt: str
    source: dict                   # the chat's Source (its fields), as the turn that created it had it
    origin_ref: str                # the tool call that created it: one watch per call
    created_at: float


@dataclass(frozen=True)
class Created:
    """``create``'s answer: the watch, or None and how many the chat has (the limit refused it). ``again``: the
    call created this watch before (a turn resumed after a crash)."""
    watch: Optional[AgentWatch]
    count: int
    again: bool = False


def watch_name(origin_ref: str) -> str:
    """A watch's name, from the call that created it: unique, and no conversation key in it (names reach the log)."""
    return "agent-" + hash_id("agent-watch", origin_ref)


@dataclass(frozen=True)
class WatchAsked:
    """What a create_watch call asks for: a URL, a file or an MCP server's resource (``server``), read every
    ``interval_s`` or at the times of ``schedule``."""
    target: str
    interval_s: float
    prompt: str
    server: str = ""
    schedule: str = ""
    timezone: str = "UTC"
    kind: str = "url"


def _watch(r: tuple) -> AgentWatch:
    return AgentWatch(*r[:10], records.unpack(r[10]), r[11], r[12])


class AgentWatchStore:
    """Reached as ``Store.agent_watches``; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, session_key: str, source: dict, asked: WatchAsked, limit: int, origin_ref: str,
                     now: Optional[float] = None) -> Created:
        now = time.time() if now is None else now

        async def do(conn):
            count = (await fetch_one(conn, "SELECT COUNT(*) FROM agent_watches WHERE session_key = ?",
                                     (session_key,)))[0]
            before = await _one(conn, "origin_ref = ?", (origin_ref,))
            if before is not None:
                return Created(before, count, again=True)
            if count >= limit:
                return Created(None, count)
            number = (await fetch_one(conn, "SELECT COALESCE(MAX(number), 0) + 1 FROM agent_watches WHERE "
                                            "session_key = ?", (session_key,)))[0]
            name = watch_name(origin_ref)
            await conn.execute(f"INSERT INTO agent_watches ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                               f"?)", (name, session_key, number, asked.kind, asked.server, asked.target,
                                       float(asked.interval_s), asked.schedule, asked.timezone, asked.prompt,
                                       records.pack(dict(source)), origin_ref, now))
            return Created(await _one(conn, "name = ?", (name,)), count + 1)
        return await self._db.write(do)

    async def all(self) -> list[AgentWatch]:
        async def fetch(conn):
            return [_watch(r) for r in await fetch_all(conn, f"SELECT {_COLUMNS} FROM agent_watches ORDER BY name")]
        return await self._db.read(fetch)

    async def of_chat(self, session_key: str) -> list[AgentWatch]:
        async def fetch(conn):
            rows = await fetch_all(conn, f"SELECT {_COLUMNS} FROM agent_watches WHERE session_key = ? ORDER BY "
                                         f"number", (session_key,))
            return [_watch(r) for r in rows]
        return await self._db.read(fetch)

    async def remove(self, session_key: str, number: int) -> Optional[AgentWatch]:
        """Stop the chat's watch #``number``: its row goes (what it saw stays, as history, until retention);
        the watch as it was, or None if the chat has no such watch."""
        async def do(conn):
            found = await _one(conn, "session_key = ? AND number = ?", (session_key, number))
            if found is not None:
                await conn.execute("DELETE FROM agent_watches WHERE name = ?", (found.name,))
            return found
        return await self._db.write(do)


async def _one(conn, where: str, args: tuple) -> Optional[AgentWatch]:
    row = await fetch_one(conn, f"SELECT {_COLUMNS} FROM agent_watches WHERE {where}", args)
    return _watch(row) if row is not None else None
