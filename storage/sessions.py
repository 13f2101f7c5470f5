"""The session store: conversations as separate layers, each its own table (see docs/storage.md).

* sessions        one row per conversation; at most one *current* (active or suspended) row per session key;
* transcript      the facts (user / assistant / tool events), append-only, per-session seq 1, 2, 3, ...;
* display         small dict of display metadata (platform display name, chat title, ...);
* api sidecar     the exact request sent to the model per turn, kept apart from the transcript;
* runtime state   the turn in flight and the resume bookkeeping (``runtime.py``);
* search index    FTS5 over transcript text, derived, indexed in batches (``search_index.py``).

What survives kill -9: each method is one transaction; when it returns, the rows are committed. An append is
all-or-nothing: a batch is never half in the transcript, and seqs never have gaps.
"""
from __future__ import annotations

import enum
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Union

from . import records, search_index
import aiosqlite

from .approvals import withdraw_pending
from .db import Database, fetch_all, fetch_one
from .errors import IllegalTransition, ImportRefused, NotFound, RecordError, StorageUnavailable
from .keys import is_valid_key
from .runtime import RuntimeOps

if TYPE_CHECKING:
    from .moving import MoveOutcome

ROLES = ("user", "assistant", "tool", "system")


class SessionState(enum.StrEnum):
    """A session row's state: ACTIVE <-> SUSPENDED (both *current*: at most one per key); ACTIVE | SUSPENDED ->
    RESET (a new session replaced it) | CLOSED (closed, or idle past retention). str-valued: the values are what the
    ``state`` column holds and the admin views show, unchanged; a row read back holds the plain string, which
    compares equal to its member."""
    ACTIVE = "active"
    SUSPENDED = "suspended"
    RESET = "reset"
    CLOSED = "closed"


SESSION_STATES = tuple(s.value for s in SessionState)
CURRENT_STATES = (SessionState.ACTIVE.value, SessionState.SUSPENDED.value)
MAX_DISPLAY_BYTES = 16 * 1024
SUMMARY_BATCH = 500        # session ids a summaries query names (SQLite bounds a statement's parameters)

SESSION_COLUMNS = "session_id, session_key, state, created_at, updated_at, title, source"
# How a session id is shown to people (the admin listing, /status in the chat): its first characters, which any
# command taking a session accepts, as any unique prefix of the id.
SHORT_ID_CHARS = 12


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    session_key: str
    state: str
    created_at: float
    updated_at: float
    title: Optional[str]
    source: dict
    created: bool = False  # True when this call created it (get_or_create, reset)


@dataclass(frozen=True)
class TranscriptEvent:
    role: str
    kind: str
    payload: Any
    turn_id: Optional[str] = None
    created_at: Optional[float] = None
    seq: Optional[int] = None  # assigned by append


@dataclass(frozen=True)
class SearchHit:
    session_id: str
    session_key: str
    title: Optional[str]
    seq: int
    role: str
    kind: str
    created_at: float
    snippet: str


@dataclass(frozen=True)
class Summary:
    """What a listing shows of a session's transcript."""
    messages: int                       # user and assistant messages
    last_at: Optional[float]            # when its last event was appended
    last_role: Optional[str]            # the last message's role and payload
    last_payload: Any


def source_names(source: Mapping, platform: str, value: str) -> bool:
    """Whether a session's ``source`` names ``value`` as its user (name or id) or chat id, on ``platform`` if one
    is given (a pure function)."""
    if not isinstance(source, Mapping) or (platform and source.get("platform") != platform):
        return False
    return value in (source.get("user_name"), source.get("user_id"), source.get("chat_id"))


def short_id(session_id: str) -> str:
    return session_id[:SHORT_ID_CHARS]


def session_from_row(row: tuple, created: bool = False) -> SessionInfo:
    return SessionInfo(*row[:6], source=records.unpack(row[6]), created=created)


def _coerce_event(event: Union[TranscriptEvent, Mapping]) -> TranscriptEvent:
    if isinstance(event, Mapping):
        event = TranscriptEvent(**event)
    if event.role not in ROLES:
        raise ValueError(f"event role must be one of {ROLES}, not {event.role!r}")
    if not isinstance(event.kind, str) or not event.kind:
        raise ValueError(f"event kind must be a non-empty string, not {event.kind!r}")
    return event


async def _require_session(conn: aiosqlite.Connection, session_id: str) -> str:
    row = await fetch_one(conn, "SELECT state FROM sessions WHERE session_id = ?", (session_id,))
    if row is None:
        raise NotFound(f"no session {session_id!r}")
    return row[0]


class SessionStore(RuntimeOps):
    """Conversations and their layers. Reached as ``Store.sessions``; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # ----------------------------------------------------------------------------------------- session rows

    async def get_or_create(self, session_key: str, source_fields: Optional[Mapping] = None) -> SessionInfo:
        """The current session of ``session_key`` (active or suspended), created active if there is none."""
        if not is_valid_key(session_key):
            raise ValueError(f"not a session key: {session_key!r} (make keys with storage.keys.session_key)")
        source = records.pack(dict(source_fields or {}))
        return await self._db.write(self._get_or_create, session_key, source, uuid.uuid4().hex, time.time())

    @staticmethod
    async def _get_or_create(conn, key, source, new_id, now) -> SessionInfo:
        row = await fetch_one(conn, f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_key = ? "
                                    f"AND state IN ('active', 'suspended')", (key,))
        if row is not None:
            return session_from_row(row)
        await conn.execute(f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES (?, ?, 'active', ?, ?, NULL, ?)",
                           (new_id, key, now, now, source))
        return SessionInfo(new_id, key, SessionState.ACTIVE.value, now, now, None, records.unpack(source), created=True)

    async def get(self, session_id: str) -> Optional[SessionInfo]:
        async def fetch(conn):
            row = await fetch_one(conn, f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,))
            return session_from_row(row) if row else None
        return await self._db.read(fetch)

    async def with_id_prefix(self, prefix: str, limit: int = 10) -> list[SessionInfo]:
        """Sessions whose id starts with ``prefix`` (most recent first, at most ``limit``): the operator may type
        the start of an id."""
        async def fetch(conn):
            rows = await fetch_all(conn, f"SELECT {SESSION_COLUMNS} FROM sessions WHERE substr(session_id, 1, ?) = ? "
                                         f"ORDER BY updated_at DESC, session_id LIMIT ?",
                                   (len(prefix), prefix, int(limit)))
            return [session_from_row(r) for r in rows]
        return await self._db.read(fetch) if prefix else []

    async def current(self, session_key: str) -> Optional[SessionInfo]:
        """The active or suspended session of a key, or None (never creates)."""
        async def fetch(conn):
            row = await fetch_one(conn, f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_key = ? "
                                        f"AND state IN ('active', 'suspended')", (session_key,))
            return session_from_row(row) if row else None
        return await self._db.read(fetch)

    async def current_keys(self) -> list[str]:
        """Every key with an active or suspended session here, sorted: what a shard looks over when the shard map
        changes (a key another shard now wins moves there)."""
        async def fetch(conn):
            return [r[0] for r in await fetch_all(conn, "SELECT DISTINCT session_key FROM sessions WHERE state IN "
                                                        "('active', 'suspended') ORDER BY session_key")]
        return await self._db.read(fetch)

    async def list(self, state: Optional[str] = None, session_key: Optional[str] = None,
                   limit: int = 100, offset: int = 0) -> list[SessionInfo]:
        """Sessions, most recently updated first, optionally of one state and/or one key."""
        where, args = [], []
        if state is not None:
            where.append("state = ?")
            args.append(state)
        if session_key is not None:
            where.append("session_key = ?")
            args.append(session_key)
        sql = (f"SELECT {SESSION_COLUMNS} FROM sessions {'WHERE ' + ' AND '.join(where) if where else ''} "
               f"ORDER BY updated_at DESC, session_id LIMIT ? OFFSET ?")

        async def fetch(conn):
            return [session_from_row(r) for r in await fetch_all(conn, sql, (*args, int(limit), int(offset)))]
        return await self._db.read(fetch)

    async def summaries(self, session_ids: Iterable[str]) -> dict[str, "Summary"]:
        """For each session of ``session_ids`` that has messages: how many user and assistant messages it holds,
        when the last event was appended, and the last message (a listing's preview). Read SUMMARY_BATCH ids a
        query, in one read transaction."""
        ids = list(dict.fromkeys(session_ids))

        async def fetch(conn):
            out = {}
            for at in range(0, len(ids), SUMMARY_BATCH):
                batch = ids[at:at + SUMMARY_BATCH]
                counts = await fetch_all(conn, f"SELECT session_id, count(*) FILTER (WHERE kind = 'message' AND role "
                                               f"IN ('user', 'assistant')), max(created_at), max(event_id) FILTER "
                                               f"(WHERE kind = 'message' AND role IN ('user', 'assistant')) FROM "
                                               f"transcript WHERE session_id IN ({', '.join('?' * len(batch))}) "
                                               f"GROUP BY session_id", batch)
                last = {event_id: (role, payload) for event_id, role, payload in await fetch_all(
                    conn, f"SELECT event_id, role, payload FROM transcript WHERE event_id IN "
                          f"({', '.join('?' * len(counts))})", [c[3] for c in counts])} if counts else {}
                for session_id, messages, last_at, last_id in counts:
                    role, payload = last.get(last_id, (None, None))
                    out[session_id] = Summary(messages, last_at, role, records.unpack(payload) if payload else None)
            return out
        return await self._db.read(fetch) if ids else {}

    async def with_source(self, name: str, limit: int = 10) -> list[SessionInfo]:
        """Sessions whose source names ``name`` (most recent first, at most ``limit``): its user's name or id, or
        its chat id, alone or as ``PLATFORM:VALUE``; what an operator knows of a conversation before its id. Every
        session whose source holds the value's bytes is read (the source is a record, not columns)."""
        platform, _, value = name.partition(":") if ":" in name else ("", "", name)
        if not value:
            return []
        # Each row's source is a record: those holding the value's bytes anywhere are decoded and checked.
        sql = (f"SELECT {SESSION_COLUMNS} FROM sessions WHERE instr(source, ?) > 0 "
               f"ORDER BY updated_at DESC, session_id")

        async def fetch(conn):
            found = []
            for row in await fetch_all(conn, sql, (value.encode("utf-8"),)):
                info = session_from_row(row)
                # PLATFORM:VALUE, or a value that holds a colon itself (a Matrix user id)
                if source_names(info.source, platform, value) or source_names(info.source, "", name):
                    found.append(info)
                    if len(found) >= limit:
                        break
            return found
        return await self._db.read(fetch)

    async def rename(self, session_id: str, title: Optional[str]) -> None:
        async def do(conn):
            await _require_session(conn, session_id)
            await conn.execute("UPDATE sessions SET title = ?, updated_at = ? WHERE session_id = ?",
                               (title, time.time(), session_id))
        await self._db.write(do)

    async def reset(self, session_key: str, source_fields: Optional[Mapping] = None) -> SessionInfo:
        """/new: the key's current session becomes 'reset' (kept, listed, searchable) and a fresh one becomes
        active, in one transaction, in which the key's tool questions still waiting are withdrawn. The source is
        carried over unless ``source_fields`` is given."""
        if not is_valid_key(session_key):
            raise ValueError(f"not a session key: {session_key!r}")
        given = records.pack(dict(source_fields)) if source_fields is not None else None
        return await self._db.write(self._reset, session_key, given, uuid.uuid4().hex, time.time())

    @staticmethod
    async def _reset(conn, key, source, new_id, now) -> SessionInfo:
        old = await fetch_one(conn, "SELECT session_id, source FROM sessions WHERE session_key = ? "
                                    "AND state IN ('active', 'suspended')", (key,))
        if old is not None:
            await conn.execute("UPDATE sessions SET state = 'reset', updated_at = ? WHERE session_id = ?",
                               (now, old[0]))
        await withdraw_pending(conn, key, now)   # its tool questions go with it (storage/approvals.py)
        source = source if source is not None else (old[1] if old else records.pack({}))
        await conn.execute(f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES (?, ?, 'active', ?, ?, NULL, ?)",
                           (new_id, key, now, now, source))
        return SessionInfo(new_id, key, SessionState.ACTIVE.value, now, now, None, records.unpack(source), created=True)

    async def suspend(self, session_id: str) -> None:
        """active -> suspended: still the key's current session (get_or_create returns it), marked paused."""
        await self._transition(session_id, (SessionState.ACTIVE,), SessionState.SUSPENDED)

    async def resume(self, session_id: str) -> None:
        """suspended -> active."""
        await self._transition(session_id, (SessionState.SUSPENDED,), SessionState.ACTIVE)

    async def close(self, session_id: str) -> None:
        """active|suspended -> closed: the next get_or_create of the key starts a new session."""
        await self._transition(session_id, CURRENT_STATES, SessionState.CLOSED)

    async def _transition(self, session_id: str, allowed: tuple, target: str) -> None:
        async def do(conn):
            state = await _require_session(conn, session_id)
            if state not in allowed:
                raise IllegalTransition(f"session {session_id}: {state} -> {target} is not allowed")
            await conn.execute("UPDATE sessions SET state = ?, updated_at = ? WHERE session_id = ?",
                               (target, time.time(), session_id))
        await self._db.write(do)

    # ------------------------------------------------------------------------------------------- transcript

    async def append(self, session_id: str, events: Iterable[Union[TranscriptEvent, Mapping]]) -> list[int]:
        """Append a batch of events atomically; returns their seqs (consecutive, after every earlier seq)."""
        now = time.time()
        rows = [(e, records.pack(e.payload)) for e in map(_coerce_event, events)]
        return await self._db.write(self._append, session_id, rows, now) if rows else []

    @staticmethod
    async def _append(conn, session_id, rows, now) -> list[int]:
        await _require_session(conn, session_id)
        seq = (await fetch_one(conn, "SELECT COALESCE(MAX(seq), 0) FROM transcript WHERE session_id = ?",
                               (session_id,)))[0]
        seqs = []
        for event, blob in rows:
            seq += 1
            await conn.execute(
                "INSERT INTO transcript (session_id, seq, turn_id, role, kind, created_at, payload) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)", (session_id, seq, event.turn_id, event.role, event.kind,
                                                 event.created_at if event.created_at is not None else now, blob))
            seqs.append(seq)
        await conn.execute("UPDATE sessions SET updated_at = ? WHERE session_id = ?", (now, session_id))
        return seqs

    async def load(self, session_id: str, last_n: Optional[int] = None, since_seq: int = 0,
                   until_seq: Optional[int] = None, kind: Optional[str] = None) -> list[TranscriptEvent]:
        """Events in seq order: those with since_seq < seq <= until_seq (of ``kind`` only, if given: e.g. the model
        /model chose, with last_n=1), of which only the last ``last_n``."""
        async def fetch(conn):
            await _require_session(conn, session_id)
            sql = ("SELECT seq, turn_id, role, kind, created_at, payload FROM transcript WHERE session_id = ? "
                   "AND seq > ? AND seq <= ? " + ("AND kind = ? " if kind else "") + "ORDER BY seq DESC")
            args = [session_id, since_seq, until_seq if until_seq is not None else 2 ** 62] + ([kind] if kind else [])
            if last_n is not None:
                sql += " LIMIT ?"
                args.append(int(last_n))
            out = [TranscriptEvent(role, kind, records.unpack(blob), turn_id, created, seq)
                   for seq, turn_id, role, kind, created, blob in await fetch_all(conn, sql, args)]
            out.reverse()
            return out
        return await self._db.read(fetch)

    async def search(self, query: str, limit: int = 20, session_key: Optional[str] = None) -> list[SearchHit]:
        """Full-text search over every session's transcript (all words must match), best matches first."""
        match = search_index.match_query(self._db.dialect, query)
        if not match:
            return []
        sql = search_index.search_sql(self._db.dialect, bool(session_key))
        args = (match, session_key, int(limit)) if session_key else (match, int(limit))
        async def fetch(conn):
            return [SearchHit(*row) for row in await fetch_all(conn, sql, args)]
        try:
            await self.index_pending(limit=None)   # every event committed before the search is found
        except StorageUnavailable:
            pass   # a full disk, a lock held too long: the index as it stands (the last seconds may be missing)
        return await self._db.read(fetch)

    async def rebuild_search_index(self) -> int:
        """Recreate the derived FTS index from the transcript; returns the number of events indexed."""
        return await self._db.write(search_index.rebuild)

    async def index_pending(self, limit: int | None = search_index.CATCH_UP_BATCH) -> int:
        """Index up to ``limit`` (None: all) events appended since the last catch-up (search_index.py); returns how
        many. A read looks first: an idle shard's tick, or a search with nothing pending, takes no write lock."""
        if not await self._db.read(search_index.pending, 1):
            return 0
        return await self._db.write(search_index.catch_up, limit)

    async def pending_search_index(self) -> int:
        """How many transcript events wait for the search index (the shards' next catch-up, or a search)."""
        return await self._db.read(search_index.pending)

    # ---------------------------------------------------------------------------------- display and sidecar

    async def set_display(self, session_id: str, fields: Mapping[str, Any]) -> dict:
        """Merge ``fields`` into the display metadata (a None value removes the field); returns the result."""
        async def do(conn):
            await _require_session(conn, session_id)
            row = await fetch_one(conn, "SELECT data FROM session_display WHERE session_id = ?", (session_id,))
            data = records.unpack(row[0]) if row else {}
            data.update(fields)
            data = {k: v for k, v in data.items() if v is not None}
            blob = records.pack(data)
            if len(blob) > MAX_DISPLAY_BYTES:
                raise RecordError(f"display metadata is {len(blob)} bytes; the limit is {MAX_DISPLAY_BYTES}")
            await conn.execute("INSERT OR REPLACE INTO session_display (session_id, data) VALUES (?, ?)",
                               (session_id, blob))
            return data
        return await self._db.write(do)

    async def get_display(self, session_id: str) -> dict:
        async def fetch(conn):
            row = await fetch_one(conn, "SELECT data FROM session_display WHERE session_id = ?", (session_id,))
            return records.unpack(row[0]) if row else {}
        return await self._db.read(fetch)

    async def put_request(self, session_id: str, turn_id: str, request: Any) -> None:
        """Keep the exact request sent to the model for ``turn_id`` (a later call of the same turn replaces it:
        the last request of a tool loop contains the earlier ones)."""
        blob = records.pack(request)

        async def do(conn):
            await _require_session(conn, session_id)
            await conn.execute("INSERT OR REPLACE INTO api_sidecar (session_id, turn_id, created_at, request) "
                               "VALUES (?, ?, ?, ?)", (session_id, turn_id, time.time(), blob))
        await self._db.write(do)

    async def get_request(self, session_id: str, turn_id: str) -> Any:
        async def fetch(conn):
            row = await fetch_one(conn, "SELECT request FROM api_sidecar WHERE session_id = ? AND turn_id = ?",
                                  (session_id, turn_id))
            return records.unpack(row[0]) if row else None
        return await self._db.read(fetch)

    # --------------------------------------------------------------------------------- retention and transfer

    async def prune(self, older_than_s: float, keep_transcripts: bool = True,
                    now: Optional[float] = None) -> dict:
        """Sessions idle for ``older_than_s``: current ones are closed; their sidecars and runtime state go.
        With ``keep_transcripts=False`` they are deleted entirely (transcript, index, metadata, row)."""
        cutoff = (time.time() if now is None else now) - older_than_s

        async def do(conn):
            old = "SELECT session_id FROM sessions WHERE updated_at < ?"
            counts = {
                "closed": (await conn.execute("UPDATE sessions SET state = 'closed' WHERE updated_at < ? "
                                              "AND state IN ('active', 'suspended')", (cutoff,))).rowcount,
                "sidecars_deleted": (await conn.execute(f"DELETE FROM api_sidecar WHERE session_id IN ({old})",
                                                        (cutoff,))).rowcount,
                "runtime_deleted": (await conn.execute(f"DELETE FROM runtime_state WHERE session_id IN ({old})",
                                                       (cutoff,))).rowcount,
                "sessions_deleted": 0,
            }
            if not keep_transcripts:
                counts["sessions_deleted"] = (await conn.execute("DELETE FROM sessions WHERE updated_at < ?",
                                                                 (cutoff,))).rowcount
            return counts
        return await self._db.write(do)

    async def export_session(self, session_id: str) -> bytes:
        """The session in the export format (``transfer.py``, docs/storage.md); deterministic bytes."""
        # a cycle: transfer.py and moving.py read this module's records (test_layering.py, KNOWN_CYCLES)
        from .transfer import export_rows
        return await self._db.read(export_rows, session_id)

    async def import_session(self, data: bytes, as_new: bool = False) -> SessionInfo:
        """Store a session from export bytes, all or nothing; ``ImportRefused`` if anything is wrong.

        ``as_new``: a copy under a new session id (the same export imported twice, or beside the conversation it
        was taken from); if its key already has a current session, the copy is stored closed, beside it."""
        # a cycle: transfer.py and moving.py read this module's records (test_layering.py, KNOWN_CYCLES)
        from .moving import ParsedMove
        from .transfer import REFUSED, import_rows, parse_export
        parsed = parse_export(data)  # every check that needs no database happens before the transaction
        if isinstance(parsed, ParsedMove):
            if as_new:   # a copy beside it would share the inbox's dedupe keys and the obligations' ids
                raise ImportRefused(REFUSED + "a file written with --with-state moves the session under its own "
                                              "id; --as-new is for plain exports")
            return (await self.import_moved(parsed)).session
        return await self._db.write(import_rows, parsed, uuid.uuid4().hex if as_new else None)

    async def export_for_move(self, session_id: str, interrupted: bool = False) -> bytes:
        """The session with its live state (runtime row, pending inbox rows, open obligations), export format
        version 2 (``moving.py``): to move it to another host. ``TurnRunning`` if a turn of it is in flight, unless
        ``interrupted`` (then the destination resumes that turn)."""
        # a cycle: transfer.py and moving.py read this module's records (test_layering.py, KNOWN_CYCLES)
        from .moving import export_for_move
        return await self._db.read(export_for_move, session_id, interrupted)

    async def import_moved(self, data, served_here_ok: bool = False) -> "MoveOutcome":
        """Store a version 2 file on this host, all or nothing; the same file again changes nothing.
        ``served_here_ok``: a live move's second file of a session already here (``moving.import_moved``)."""
        # a cycle: transfer.py and moving.py read this module's records (test_layering.py, KNOWN_CYCLES)
        from .moving import import_moved, parse_move_file
        return await self._db.write(import_moved, parse_move_file(data), served_here_ok)

    async def forget_moved(self, data) -> "MoveOutcome":
        """On the host a session moved from, once the destination holds it: delete what the file holds, all or
        nothing; refused if any of it changed since the export; the same file again changes nothing."""
        # a cycle: transfer.py and moving.py read this module's records (test_layering.py, KNOWN_CYCLES)
        from .moving import forget_moved
        return await self._db.write(forget_moved, data)
