"""Session export / import: one file per session, a stream of msgpack maps ending with a checksum trailer.

Format ``agent-gateway/session-export`` version 1 (all maps in this key order, canonical msgpack as written by
``msgpack.packb(obj, use_bin_type=True)``; no format byte; floats are float64):

    {"type": "header",  "format": "agent-gateway/session-export", "version": 1}
    {"type": "session", "session_id", "session_key", "state", "created_at", "updated_at", "title", "source"}
    {"type": "display", "data": {...}}
    {"type": "event",   "seq", "turn_id", "role", "kind", "created_at", "payload"}      x n, by seq
    {"type": "request", "turn_id", "created_at", "request"}                             x m, by turn_id
    {"type": "trailer", "records": <number of maps before this one>, "sha256": <hex of every byte before it>}

Runtime state is not exported: an imported session is never mid-turn.

Guarantees: export is deterministic, and import accepts only files it would write itself (every map must re-encode
to exactly its own bytes), so ``export(import(x)) == x`` byte for byte. A truncated or corrupted file fails the
checksum or the decoding and is refused with ``ImportRefused`` before the database is touched; conflicts found
inside the transaction roll it back. Either way, nothing changes.
"""
from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass
from typing import Any

import msgpack

from . import records
from .db import fetch_all, fetch_one
from .errors import ImportRefused, NotFound, RecordError
from .keys import is_valid_key
from .sessions import CURRENT_STATES, ROLES, SESSION_COLUMNS, SESSION_STATES, SessionInfo, index_event

FORMAT = "agent-gateway/session-export"
VERSION = 1
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class ParsedExport:
    session: dict
    display: dict
    events: list
    requests: list


async def export_rows(conn, session_id: str) -> bytes:
    row = await fetch_one(conn, f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,))
    if row is None:
        raise NotFound(f"no session {session_id!r}")
    maps: list[dict] = [{"type": "header", "format": FORMAT, "version": VERSION}]
    sid, key, state, created_at, updated_at, title, source = row
    maps.append({"type": "session", "session_id": sid, "session_key": key, "state": state, "created_at": created_at,
                 "updated_at": updated_at, "title": title, "source": records.unpack(source)})
    display = await fetch_one(conn, "SELECT data FROM session_display WHERE session_id = ?", (session_id,))
    maps.append({"type": "display", "data": records.unpack(display[0]) if display else {}})
    for seq, turn_id, role, kind, at, blob in await fetch_all(
            conn, "SELECT seq, turn_id, role, kind, created_at, payload FROM transcript WHERE session_id = ? "
                  "ORDER BY seq", (session_id,)):
        maps.append({"type": "event", "seq": seq, "turn_id": turn_id, "role": role, "kind": kind, "created_at": at,
                     "payload": records.unpack(blob)})
    for turn_id, at, blob in await fetch_all(
            conn, "SELECT turn_id, created_at, request FROM api_sidecar WHERE session_id = ? ORDER BY turn_id",
            (session_id,)):
        maps.append({"type": "request", "turn_id": turn_id, "created_at": at, "request": records.unpack(blob)})
    out = io.BytesIO()
    for m in maps:
        out.write(records.pack_body(m))
    body = out.getvalue()
    return body + records.pack_body({"type": "trailer", "records": len(maps),
                                     "sha256": hashlib.sha256(body).hexdigest()})


def _refuse(why: str) -> ImportRefused:
    return ImportRefused(f"import refused, nothing was changed: {why}")


def _decode(data: bytes) -> list[tuple[Any, int, int]]:
    """(map, start, end) for every msgpack object in ``data``; refuses trailing or undecodable bytes."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=True, ext_hook=records.refuse_ext,
                                max_buffer_size=max(len(data), 1))
    unpacker.feed(data)
    found, start = [], 0
    try:
        for obj in unpacker:
            end = unpacker.tell()
            found.append((obj, start, end))
            start = end
    except (ValueError, TypeError, RecordError, msgpack.UnpackException) as exc:
        raise _refuse(f"undecodable bytes at offset {start}: {exc}") from None
    if start != len(data):
        raise _refuse(f"truncated: {len(data) - start} bytes at the end do not form a complete record")
    return found


def _check(cond: bool, why: str) -> None:
    if not cond:
        raise _refuse(why)


def _is_time(value: Any) -> bool:
    return type(value) is float and value == value  # a float, not NaN: what SQLite's REAL gives back


def parse_export(data: bytes) -> ParsedExport:
    """Validate an export completely (checksum, canonical form, structure, field types) without a database."""
    _check(isinstance(data, (bytes, bytearray, memoryview)), "export data must be bytes")
    data = bytes(data)
    found = _decode(data)
    _check(len(found) >= 4, f"only {len(found)} records; an export has at least header, session, display, trailer")
    trailer, t_start, _ = found[-1]
    _check(isinstance(trailer, dict) and trailer.get("type") == "trailer", "the trailer record is missing (truncated?)")
    _check(trailer.get("sha256") == hashlib.sha256(data[:t_start]).hexdigest(), "checksum mismatch (corrupted)")
    _check(trailer.get("records") == len(found) - 1, "record count in the trailer does not match")
    for obj, start, end in found:
        try:
            canonical = records.pack_body(obj)
        except RecordError as exc:
            raise _refuse(f"record at offset {start} is not storable: {exc}") from None
        _check(canonical == data[start:end], f"record at offset {start} is not in canonical form")
    maps = [obj for obj, _, _ in found[:-1]]
    _check(all(isinstance(m, dict) for m in maps), "every record must be a map")
    header, session, display = maps[0], maps[1], maps[2]
    _check(header.get("type") == "header" and header.get("format") == FORMAT, "not a session export (bad header)")
    _check(header.get("version") == VERSION, f"export format version {header.get('version')!r}; this code reads "
                                             f"version {VERSION}")
    _check(list(header) == ["type", "format", "version"], "unexpected header fields")
    _check(list(session) == ["type", *SESSION_COLUMNS.split(", ")] and session["type"] == "session",
           "second record must be the session")
    _check(isinstance(session["session_id"], str) and bool(_SESSION_ID.fullmatch(session["session_id"])),
           "bad session_id")
    _check(is_valid_key(session["session_key"]), "bad session_key")
    _check(session["state"] in SESSION_STATES, "bad session state")
    _check(_is_time(session["created_at"]) and _is_time(session["updated_at"]), "bad session timestamps")
    _check(session["title"] is None or isinstance(session["title"], str), "bad title")
    _check(isinstance(session["source"], dict), "bad source")
    _check(list(display) == ["type", "data"] and display["type"] == "display" and isinstance(display["data"], dict),
           "third record must be the display metadata")
    events, requests, last_seq = [], [], 0
    for m in maps[3:]:
        if m.get("type") == "event" and not requests:
            _check(list(m) == ["type", "seq", "turn_id", "role", "kind", "created_at", "payload"], "bad event fields")
            _check(type(m["seq"]) is int and m["seq"] > last_seq, "event seqs must increase")
            _check(m["turn_id"] is None or isinstance(m["turn_id"], str), "bad event turn_id")
            _check(m["role"] in ROLES and isinstance(m["kind"], str) and m["kind"] != "", "bad event role or kind")
            _check(_is_time(m["created_at"]), "bad event created_at")
            last_seq = m["seq"]
            events.append(m)
        elif m.get("type") == "request":
            _check(list(m) == ["type", "turn_id", "created_at", "request"], "bad request fields")
            _check(isinstance(m["turn_id"], str) and _is_time(m["created_at"]), "bad request turn_id or created_at")
            _check(not requests or requests[-1]["turn_id"] < m["turn_id"], "requests must be ordered by turn_id")
            requests.append(m)
        else:
            raise _refuse(f"unexpected record type {m.get('type')!r}")
    return ParsedExport(session, display["data"], events, requests)


async def import_rows(conn, parsed: ParsedExport, new_id: str | None = None) -> SessionInfo:
    """The parsed export as stored rows. ``new_id``: a copy under that id, closed if its key has a current session
    already (a key has at most one); without it the session keeps its id and state, or the import is refused."""
    s = dict(parsed.session)
    if new_id is not None:
        s["session_id"] = new_id
    if await fetch_one(conn, "SELECT 1 FROM sessions WHERE session_id = ?", (s["session_id"],)):
        raise _refuse(f"session {s['session_id']} already exists (import it with --as-new for a copy beside it)")
    if s["state"] in CURRENT_STATES:
        other = await fetch_one(conn, "SELECT session_id FROM sessions WHERE session_key = ? AND state IN "
                                      "('active', 'suspended')", (s["session_key"],))
        if other and new_id is not None:
            s["state"] = "closed"
        elif other:
            raise _refuse(f"key {s['session_key']} already has a current session {other[0]}; "
                          f"reset or close it first, or import a closed copy with --as-new")
    source = records.pack(s["source"])
    await conn.execute(f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (s["session_id"], s["session_key"], s["state"], s["created_at"], s["updated_at"], s["title"],
                        source))
    if parsed.display:
        await conn.execute("INSERT INTO session_display (session_id, data) VALUES (?, ?)",
                           (s["session_id"], records.pack(parsed.display)))
    for e in parsed.events:
        cur = await conn.execute(
            "INSERT INTO transcript (session_id, seq, turn_id, role, kind, created_at, payload) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)", (s["session_id"], e["seq"], e["turn_id"], e["role"], e["kind"],
                                             e["created_at"], records.pack(e["payload"])))
        await index_event(conn, cur.lastrowid, e["payload"])
    for r in parsed.requests:
        await conn.execute("INSERT INTO api_sidecar (session_id, turn_id, created_at, request) "
                           "VALUES (?, ?, ?, ?)",
                           (s["session_id"], r["turn_id"], r["created_at"], records.pack(r["request"])))
    return SessionInfo(s["session_id"], s["session_key"], s["state"], s["created_at"], s["updated_at"], s["title"],
                       s["source"], created=True)
