"""The search index: FTS5 over transcript text, derived from the transcript, brought up to date in batches.

Indexing an event as it is appended cost a turn about as much as the rest of its transcript writes (measured: two
appends 0.68 ms with it, 0.33 ms without), and FTS5 is far cheaper per row when many rows go in one transaction.
So an append only marks its events pending (a trigger puts each new event_id into ``search_pending``, whoever
writes the transcript: a session, an import), and ``catch_up`` indexes what is pending in one transaction: each
session shard does every CATCH_UP_S (actors/sessions/shard.py), and a search does before it looks, so a search
sees every event committed before it (unless storage cannot be written then, a full disk: it searches the index as
it stands).

What survives kill -9: an event and its pending mark commit together (the trigger runs in the append's
transaction); the index rows and the removal of their marks commit together. Nothing is indexed twice or missed.
Marks are event ids, not a high-water mark: SQLite may give a deleted (forgotten) session's highest ids to new
events, and a mark names exactly the rows still to index. A deleted event takes its index row and its mark with it
(triggers of the schema).

On PostgreSQL (storage/postgres.py) the index is a table of (rowid, body, doc): ``doc`` the body's words as a
``tsvector`` of the 'simple' configuration (no stemming, no stop words, as unicode61), with their diacritics removed
here before they go in (as ``remove_diacritics``: PostgreSQL's own ``unaccent`` is an extension an operator may not be
allowed to install); a GIN index serves the search, ``ts_rank`` orders it and ``ts_headline`` cuts the snippet.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Any, Mapping

import aiosqlite

from . import records
from .db import fetch_all

SEARCHABLE_FIELDS = ("text", "content", "name")
CATCH_UP_BATCH = 2_000   # events per catch_up call: a shard's timer transaction stays short on a large backlog
# Events per tick of a shard's timer: ~2 ms of its loop at ~16 us an event (the benchmarks' machine), so a turn that
# arrives meanwhile waits that long at most (a tick of 2,000 would hold it ~32 ms: a turn's latency tail under steady
# load); a backlog goes tick after tick, other mail in between.
TICK_BATCH = 128
CATCH_UP_S = 2.0         # how often a session shard indexes what its sessions appended


def searchable_text(payload: Any) -> str:
    """The text of an event worth finding: its 'text', 'content' (string or list of parts) and tool 'name'."""
    if not isinstance(payload, Mapping):
        return payload if isinstance(payload, str) else ""
    found = []
    for field in SEARCHABLE_FIELDS:
        value = payload.get(field)
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list):
            found.extend(p["text"] for p in value if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return "\n".join(found)


def fold(text: str) -> str:
    """Text with its diacritics removed (café -> cafe), as FTS5's unicode61 tokenizer indexes it."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))


def match_query(dialect: str, text: str) -> str:
    """Plain words -> a query matching all of them; user text never reaches the query syntax (FTS5's or
    tsquery's: on PostgreSQL the words go through plainto_tsquery, which has none)."""
    words = re.findall(r"\w+", text)
    if dialect == "postgresql":
        return " ".join(fold(word) for word in words)
    return " ".join('"' + word.replace('"', '""') + '"' for word in words)


def search_sql(dialect: str, by_key: bool) -> str:
    """The search, best matches first: (session_id, session_key, title, seq, role, kind, created_at, snippet) per
    hit; its parameters are the match query, the session key where ``by_key``, and the limit."""
    key = "AND s.session_key = ? " if by_key else ""
    if dialect == "postgresql":
        return ("SELECT t.session_id, s.session_key, s.title, t.seq, t.role, t.kind, t.created_at, "
                "ts_headline('simple', f.body, q, 'StartSel=[, StopSel=], FragmentDelimiter=..., MaxFragments=1, "
                "MaxWords=12, MinWords=3') FROM transcript_fts f CROSS JOIN plainto_tsquery('simple', ?) AS q "
                "JOIN transcript t ON t.event_id = f.rowid JOIN sessions s ON s.session_id = t.session_id "
                f"WHERE f.doc @@ q {key}ORDER BY ts_rank(f.doc, q) DESC, f.rowid LIMIT ?")
    return ("SELECT t.session_id, s.session_key, s.title, t.seq, t.role, t.kind, t.created_at, "
            "snippet(transcript_fts, 0, '[', ']', '...', 12) FROM transcript_fts "
            "JOIN transcript t ON t.event_id = transcript_fts.rowid JOIN sessions s ON s.session_id = t.session_id "
            f"WHERE transcript_fts MATCH ? {key}ORDER BY rank LIMIT ?")


async def catch_up(conn: aiosqlite.Connection, limit: int | None = CATCH_UP_BATCH) -> int:
    """Index up to ``limit`` pending events (None: all), oldest first, inside the caller's write transaction;
    returns how many were taken."""
    sql = ("SELECT p.event_id, t.payload FROM search_pending p JOIN transcript t ON t.event_id = p.event_id "
           "ORDER BY p.event_id")
    rows = await fetch_all(conn, sql + (" LIMIT ?" if limit is not None else ""),
                           (int(limit),) if limit is not None else ())
    if not rows:
        return 0
    indexed = [(event_id, text) for event_id, blob in rows if (text := searchable_text(records.unpack(blob)))]
    if getattr(conn, "dialect", "sqlite") == "postgresql":
        for event_id, text in indexed:
            await conn.execute("INSERT INTO transcript_fts (rowid, body, doc) VALUES (?, ?, to_tsvector('simple', ?))",
                               (event_id, text, fold(text)))
    else:
        for event_id, text in indexed:
            await conn.execute("INSERT INTO transcript_fts (rowid, body) VALUES (?, ?)", (event_id, text))
    # Every mark up to the last one read was read (they come in id order, and this transaction is the only writer).
    await conn.execute("DELETE FROM search_pending WHERE event_id <= ?", (rows[-1][0],))
    return len(rows)


async def rebuild(conn: aiosqlite.Connection) -> int:
    """Recreate the whole index from the transcript, inside the caller's write transaction; returns the number of
    events read."""
    await conn.execute("DELETE FROM transcript_fts")
    await conn.execute("DELETE FROM search_pending")
    await conn.execute("INSERT INTO search_pending (event_id) SELECT event_id FROM transcript")
    return await catch_up(conn, limit=None)


async def pending(conn: aiosqlite.Connection, at_most: int | None = None) -> int:
    """How many events wait to be indexed (counted up to ``at_most``)."""
    limit = f" LIMIT {int(at_most)}" if at_most is not None else ""
    return (await fetch_all(conn, f"SELECT COUNT(*) FROM (SELECT 1 FROM search_pending{limit}) AS waiting"))[0][0]
