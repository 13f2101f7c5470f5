"""Session export / import: one file per session, a stream of msgpack maps ending with a checksum trailer.

Format ``agent-gateway/session-export`` version 1 (all maps in this key order, canonical msgpack as written by
``msgpack.packb(obj, use_bin_type=True)``; no format byte; floats are float64):

    {"type": "header",  "format": "agent-gateway/session-export", "version": 1}
    {"type": "session", "session_id", "session_key", "state", "created_at", "updated_at", "title", "source"}
    {"type": "display", "data": {...}}
    {"type": "event",   "seq", "turn_id", "role", "kind", "created_at", "payload"}      x n, by seq
    {"type": "request", "turn_id", "created_at", "request"}                             x m, by turn_id
    {"type": "trailer", "records": <number of maps before this one>, "sha256": <hex of every byte before it>}

Runtime state is not exported: an imported session is never mid-turn. Version 2 (``moving.py``) is this file plus
the session's live state (runtime row, pending inbox rows, open obligations) after the requests, for moving a
session between hosts; this module reads both and writes version 1, and hands version 2 to ``moving.py``.

Guarantees: export is deterministic, and import accepts only files it would write itself (every map must re-encode
to exactly its own bytes), so ``export(import(x)) == x`` byte for byte. A truncated or corrupted file fails the
checksum or the decoding and is refused with ``ImportRefused`` before the database is touched; conflicts found
inside the transaction roll it back. Either way, nothing changes.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Optional

import msgpack

from . import records
from .db import fetch_all, fetch_one
from .errors import ImportRefused, NotFound, RecordError
from .keys import is_valid_key
from .sessions import CURRENT_STATES, ROLES, SESSION_COLUMNS, SESSION_STATES, SessionInfo

FORMAT = "agent-gateway/session-export"
VERSION = 1          # what a plain export writes
MOVE_VERSION = 2     # a session with its live state, for a move between hosts (moving.py)
VERSIONS = (VERSION, MOVE_VERSION)
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class ParsedExport:
    session: dict
    display: dict
    events: list
    requests: list


async def session_maps(conn, session_id: str, version: int = VERSION) -> list[dict]:
    """The maps of a session's export up to its requests (header, session, display, events, requests): all of a
    version 1 file but the trailer, and the start of a version 2 one (``moving.py``)."""
    row = await fetch_one(conn, f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,))
    if row is None:
        raise NotFound(f"no session {session_id!r}")
    maps: list[dict] = [{"type": "header", "format": FORMAT, "version": version}]
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
    return maps


def frame(maps: list[dict]) -> bytes:
    """The file: every map in canonical form, then the trailer that counts and checksums them."""
    body = b"".join(records.pack_body(m) for m in maps)
    return body + records.pack_body({"type": "trailer", "records": len(maps),
                                     "sha256": hashlib.sha256(body).hexdigest()})


async def export_rows(conn, session_id: str) -> bytes:
    return frame(await session_maps(conn, session_id))


REFUSED = "import refused, nothing was changed: "


def refuse(why: str) -> ImportRefused:
    return ImportRefused(REFUSED + why)


# What decoding may build, per byte of the file. msgpack spends one byte on an empty array or map (a Python object
# of ~60 bytes) and one on a nil in an array (an 8-byte slot): without a bound a 64 MiB file decoded to ~4.7 GiB.
# Real exports spend tens of bytes per container (keys, seqs, times, text) and several per element.
BYTES_PER_CONTAINER = 16   # at most one array or map per this many bytes of the file (and BASE_ALLOWANCE more)
BYTES_PER_ELEMENT = 2      # at most one array element or map entry per this many bytes (and BASE_ALLOWANCE more)
BASE_ALLOWANCE = 100_000


class DecodeBudget:
    """Counts what decoding builds, container by container (msgpack's list and object hooks run as each is made),
    and stops it past the budget: what one file can cost in memory is a small multiple of its size."""

    def __init__(self, size: int):
        self.containers = BASE_ALLOWANCE + size // BYTES_PER_CONTAINER
        self.elements = BASE_ALLOWANCE + size // BYTES_PER_ELEMENT

    def built(self, container):
        self.containers -= 1
        self.elements -= len(container)
        if self.containers < 0 or self.elements < 0:
            raise ValueError("more arrays, maps or elements than an export of this size holds (a decoding bomb?)")
        return container


def _decode(data: bytes) -> list[tuple[Any, int, int]]:
    """(map, start, end) for every msgpack object in ``data``; refuses trailing or undecodable bytes, and stops,
    refusing the file, once decoding would build more than ``DecodeBudget`` allows (before it has built it)."""
    budget = DecodeBudget(len(data))
    limit = BASE_ALLOWANCE + len(data) // BYTES_PER_ELEMENT     # one container alone is built before its hook runs
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=True, ext_hook=records.refuse_ext,
                                max_buffer_size=max(len(data), 1), list_hook=budget.built, object_hook=budget.built,
                                max_array_len=limit, max_map_len=limit)
    unpacker.feed(data)
    found, start = [], 0
    try:
        for obj in unpacker:
            end = unpacker.tell()
            found.append((obj, start, end))
            start = end
    except (ValueError, TypeError, RecordError, msgpack.UnpackException) as exc:
        raise refuse(f"undecodable bytes at offset {start}: {exc}") from None
    if start != len(data):
        raise refuse(f"truncated: {len(data) - start} bytes at the end do not form a complete record")
    return found


def check(cond: bool, why: str) -> None:
    if not cond:
        raise refuse(why)


def is_time(value: Any) -> bool:
    return type(value) is float and value == value  # a float, not NaN: what SQLite's REAL gives back


def decode_maps(data: bytes) -> list[dict]:
    """The maps of an export file, trailer excluded, once its checksum, count and canonical form are checked and its
    header names a version this code reads (``maps[0]["version"]``)."""
    check(isinstance(data, (bytes, bytearray, memoryview)), "export data must be bytes")
    data = bytes(data)
    found = _decode(data)
    check(len(found) >= 4, f"only {len(found)} records; an export has at least header, session, display, trailer")
    trailer, t_start, _ = found[-1]
    check(isinstance(trailer, dict) and trailer.get("type") == "trailer", "the trailer record is missing (truncated?)")
    check(trailer.get("sha256") == hashlib.sha256(data[:t_start]).hexdigest(), "checksum mismatch (corrupted)")
    check(trailer.get("records") == len(found) - 1, "record count in the trailer does not match")
    for obj, start, end in found:
        try:
            canonical = records.pack_body(obj)
        except RecordError as exc:
            raise refuse(f"record at offset {start} is not storable: {exc}") from None
        check(canonical == data[start:end], f"record at offset {start} is not in canonical form")
    maps = [obj for obj, _, _ in found[:-1]]
    check(all(isinstance(m, dict) for m in maps), "every record must be a map")
    header = maps[0]
    check(header.get("type") == "header" and header.get("format") == FORMAT, "not a session export (bad header)")
    check(header.get("version") in VERSIONS, f"export format version {header.get('version')!r}; this code reads "
                                             f"versions {', '.join(map(str, VERSIONS))}")
    check(list(header) == ["type", "format", "version"], "unexpected header fields")
    return maps


def parse_session(maps: list[dict]) -> tuple[ParsedExport, int]:
    """The session part of decoded maps (session, display, events, requests) and the index of the first map after
    it: the end of a version 1 file, the runtime / inbox / obligation records of a version 2 one."""
    session, display = maps[1], maps[2]
    check(list(session) == ["type", *SESSION_COLUMNS.split(", ")] and session["type"] == "session",
          "second record must be the session")
    check(isinstance(session["session_id"], str) and bool(_SESSION_ID.fullmatch(session["session_id"])),
          "bad session_id")
    check(is_valid_key(session["session_key"]), "bad session_key")
    check(session["state"] in SESSION_STATES, "bad session state")
    check(is_time(session["created_at"]) and is_time(session["updated_at"]), "bad session timestamps")
    check(session["title"] is None or isinstance(session["title"], str), "bad title")
    check(isinstance(session["source"], dict), "bad source")
    check(list(display) == ["type", "data"] and display["type"] == "display" and isinstance(display["data"], dict),
          "third record must be the display metadata")
    events, requests, last_seq, end = [], [], 0, 3
    for m in maps[3:]:
        if m.get("type") == "event" and not requests:
            check(list(m) == ["type", "seq", "turn_id", "role", "kind", "created_at", "payload"], "bad event fields")
            check(type(m["seq"]) is int and m["seq"] > last_seq, "event seqs must increase")
            check(m["turn_id"] is None or isinstance(m["turn_id"], str), "bad event turn_id")
            check(m["role"] in ROLES and isinstance(m["kind"], str) and m["kind"] != "", "bad event role or kind")
            check(is_time(m["created_at"]), "bad event created_at")
            last_seq = m["seq"]
            events.append(m)
        elif m.get("type") == "request":
            check(list(m) == ["type", "turn_id", "created_at", "request"], "bad request fields")
            check(isinstance(m["turn_id"], str) and is_time(m["created_at"]), "bad request turn_id or created_at")
            check(not requests or requests[-1]["turn_id"] < m["turn_id"], "requests must be ordered by turn_id")
            requests.append(m)
        else:
            break
        end += 1
    return ParsedExport(session, display["data"], events, requests), end


def parse_export(data: bytes):
    """Validate an export completely (checksum, canonical form, structure, field types) without a database: a
    ``ParsedExport`` for version 1, a ``moving.ParsedMove`` for version 2 (a session with its live state)."""
    maps = decode_maps(data)
    if maps[0]["version"] == MOVE_VERSION:
        # a cycle: moving.py extends this module's format (test_layering.py, KNOWN_CYCLES)
        from .moving import parse_moved
        return parse_moved(maps)
    parsed, end = parse_session(maps)
    if end < len(maps):
        raise refuse(f"unexpected record type {maps[end].get('type')!r}")
    return parsed


def version_of(data: bytes) -> Optional[int]:
    """The version a file's header names (None: not an export's header); reads only the first record."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=True, ext_hook=records.refuse_ext)
    unpacker.feed(bytes(data[:256]))
    try:
        header = next(unpacker)
    except (StopIteration, ValueError, TypeError, RecordError, msgpack.UnpackException):
        return None
    ok = isinstance(header, dict) and header.get("type") == "header" and header.get("format") == FORMAT
    return header.get("version") if ok and type(header.get("version")) is int else None


async def import_rows(conn, parsed: ParsedExport, new_id: str | None = None) -> SessionInfo:
    """The parsed export as stored rows. ``new_id``: a copy under that id, closed if its key has a current session
    already (a key has at most one); without it the session keeps its id and state, or the import is refused."""
    s = dict(parsed.session)
    if new_id is not None:
        s["session_id"] = new_id
    if await fetch_one(conn, "SELECT 1 FROM sessions WHERE session_id = ?", (s["session_id"],)):
        raise refuse(f"session {s['session_id']} already exists (import it with --as-new for a copy beside it)")
    if s["state"] in CURRENT_STATES:
        other = await fetch_one(conn, "SELECT session_id FROM sessions WHERE session_key = ? AND state IN "
                                      "('active', 'suspended')", (s["session_key"],))
        if other and new_id is not None:
            s["state"] = "closed"
        elif other:
            raise refuse(f"key {s['session_key']} already has a current session {other[0]}; "
                          f"reset or close it first, or import a closed copy with --as-new")
    source = records.pack(s["source"])
    await conn.execute(f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (s["session_id"], s["session_key"], s["state"], s["created_at"], s["updated_at"], s["title"],
                        source))
    if parsed.display:
        await conn.execute("INSERT INTO session_display (session_id, data) VALUES (?, ?)",
                           (s["session_id"], records.pack(parsed.display)))
    for e in parsed.events:
        await conn.execute(   # indexed for search later, like any append (a trigger marks it: search_index.py)
            "INSERT INTO transcript (session_id, seq, turn_id, role, kind, created_at, payload) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)", (s["session_id"], e["seq"], e["turn_id"], e["role"], e["kind"],
                                             e["created_at"], records.pack(e["payload"])))
    for r in parsed.requests:
        await conn.execute("INSERT INTO api_sidecar (session_id, turn_id, created_at, request) "
                           "VALUES (?, ?, ?, ?)",
                           (s["session_id"], r["turn_id"], r["created_at"], records.pack(r["request"])))
    return SessionInfo(s["session_id"], s["session_key"], s["state"], s["created_at"], s["updated_at"], s["title"],
                       s["source"], created=True)
