"""Moving a live session between hosts: export format version 2, and the three steps of a move.

Each host keeps its own SQLite state dir, so a conversation moves as a file. Version 2 of
``agent-gateway/session-export`` is version 1 (``transfer.py``) with the session's live state after the requests:

    {"type": "runtime", "turn_token", "compression_cursor", "resume_pending", "resume_inbox", "resume_started_at",
                        "resume_attempted", "updated_at", "resume_attempts", "resumes_total", "notices_total"}  x 0..1
    {"type": "inbox", "platform", "platform_message_id", "state", "payload", "received_at", "updated_at",
                      "reason"}                                                          x n, received/taken, by seq
    {"type": "obligation", "obligation_id", "inbound_ref", "platform", "chat_id", "thread_id", "reply_to",
                           "content", "chunks", "state", "fence", "attempts", "owner", "last_error", "created_at",
                           "updated_at", "send_intent", "ambiguous", "parts"}  x m, pending/attempting/failed,
                                                                                  by (created_at, obligation_id)

Inbox seqs are numbered by each host, so nothing in the file names one: an inbox row is known by its dedupe key
(platform, platform_message_id), and the runtime row names the row its turn answers the same way (``resume_inbox``,
``[platform, platform_message_id]`` or null; ``resume_attempted``: whether the resume count is that row's). ``owner``
is ``[pid, start_time, host]`` or null; another host's owner counts as dead there (owner.py), so the destination's
sweeper takes an attempting reply over. ``parts`` is ``[[part_index, platform_message_id, recorded_at], ...]``.
Inbox rows and obligations are kept per session key, so they travel with the key's current (active or suspended)
session only; a reset or closed session's file carries its runtime row alone.

The move, in this order (``sessions export ID FILE --with-state``, ``sessions import FILE`` on the destination,
``sessions forget FILE`` on the source); the source must not serve the session meanwhile (its gateway stopped, or
the key routed to the destination already):

1. ``export_for_move`` reads; it changes nothing. A session whose turn is in flight is refused (``TurnRunning``)
   unless ``interrupted=True``: then its runtime row says the turn was cut, and the destination resumes it (G8).
2. ``import_moved`` on the destination, one transaction. Idempotent: a session already there identical to the file
   is left alone, an inbox row whose dedupe key is there already (for the same key) is kept as it is, an obligation
   whose id is there already too; so the same file imported twice changes nothing the second time. Conflicts (the
   session there but different, its key with another current session, a dedupe key of another session key) raise
   ``ImportRefused`` and the transaction is rolled back.
3. ``forget_moved`` on the source, one transaction: deletes exactly what the file holds (session with its
   transcript, display, requests and runtime row; its inbox rows; its obligations with their parts). Refused, with
   nothing deleted, if any of it changed since the export or the key got input the file does not hold (the source
   served again: export again). Idempotent: what is gone already is skipped.

What kill -9 leaves at each point: during or after 1, the source is untouched. During 2, the destination's
transaction either committed or did not; run it again (idempotent). Between 2 and 3 both hosts hold the session, and
nothing is lost; nothing is doubled either, as long as the source does not serve it before 3 commits (the condition
above; if it did, 3 refuses and says so instead of deleting newer state). During 3, all or nothing: run it again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from . import records
from .db import fetch_all, fetch_one
from .errors import ImportRefused, TurnRunning
from .inbox import PENDING_STATES
from .ledger import OPEN_OBLIGATIONS, obligation_id
from .sessions import CURRENT_STATES, SessionInfo
from .transfer import (MOVE_VERSION, REFUSED, ParsedExport, check, decode_maps, frame, import_rows, is_time,
                       parse_session, refuse, session_maps)

OPEN_STATES = OPEN_OBLIGATIONS   # an obligation still to deliver
RUNTIME_FIELDS = ["type", "turn_token", "compression_cursor", "resume_pending", "resume_inbox", "resume_started_at",
                  "resume_attempted", "updated_at", "resume_attempts", "resumes_total", "notices_total"]
INBOX_FIELDS = ["type", "platform", "platform_message_id", "state", "payload", "received_at", "updated_at", "reason"]
OBLIGATION_FIELDS = ["type", "obligation_id", "inbound_ref", "platform", "chat_id", "thread_id", "reply_to",
                     "content", "chunks", "state", "fence", "attempts", "owner", "last_error", "created_at",
                     "updated_at", "send_intent", "ambiguous", "parts"]
_OBLIGATION_COLUMNS = ("obligation_id, inbound_ref, platform, chat_id, thread_id, reply_to, content, chunks, state, "
                       "fence, attempts, owner_pid, owner_start, owner_host, last_error, created_at, updated_at, "
                       "send_intent, ambiguous")
_INBOX_COLUMNS = "platform, platform_message_id, state, payload, received_at, updated_at, reason"


@dataclass(frozen=True)
class ParsedMove:
    base: ParsedExport         # the version 1 part: session, display, events, requests
    head: list                 # its maps, header included, as written (compared with a host's own copy)
    runtime: Optional[dict]
    inbox: list
    obligations: list


@dataclass(frozen=True)
class MoveOutcome:
    """What one step of a move did on this host."""
    session: SessionInfo       # as the file holds it
    changed: bool              # False: all of it was done here before (the same file imported or forgotten again)
    events: int                # transcript events the file holds
    inbox: int                 # inbox rows inserted (import) or deleted (forget)
    obligations: int           # obligations inserted (import) or deleted (forget)


# ------------------------------------------------------------------------------------------------ reading a host

def _carries_key_rows(session: dict) -> bool:
    """Inbox rows and obligations belong to a key, whose input the current session answers."""
    return session["state"] in CURRENT_STATES


async def _runtime_map(conn, session_id: str, key: Optional[str]) -> Optional[dict]:
    """The runtime record (None: no row). ``key``: the session key whose pending rows the file carries (None: it
    carries none, so the turn's inbox row cannot be named)."""
    row = await fetch_one(conn, "SELECT turn_token, compression_cursor, resume_pending, resume_inbox_seq, "
                                "resume_started_at, resume_attempted_seq, updated_at, resume_attempts, resumes_total, "
                                "notices_total FROM runtime_state WHERE session_id = ?", (session_id,))
    if row is None:
        return None
    token, cursor, pending, inbox_seq, started, attempted, updated, attempts, resumes, notices = row
    ref = None
    if inbox_seq is not None and key is not None:
        found = await fetch_one(conn, "SELECT platform, platform_message_id FROM inbox WHERE seq = ? AND "
                                      "session_key = ? AND state IN ('received', 'taken')", (inbox_seq, key))
        ref = list(found) if found else None
    # A done or dropped row is not carried: the resume finds no row and ends the turn, as it would here.
    return {"type": "runtime", "turn_token": token, "compression_cursor": cursor, "resume_pending": bool(pending),
            "resume_inbox": ref, "resume_started_at": started,
            "resume_attempted": ref is not None and attempted == inbox_seq, "updated_at": updated,
            "resume_attempts": attempts, "resumes_total": resumes, "notices_total": notices}


def _inbox_map(row: tuple) -> dict:
    platform, message_id, state, payload, received_at, updated_at, reason = row
    return {"type": "inbox", "platform": platform, "platform_message_id": message_id, "state": state,
            "payload": records.unpack(payload), "received_at": received_at, "updated_at": updated_at,
            "reason": reason}


async def _obligation_map(conn, row: tuple) -> dict:
    (oid, ref, platform, chat_id, thread_id, reply_to, content, chunks, state, fence, attempts, pid, start, host,
     error, created_at, updated_at, intent, ambiguous) = row
    parts = await fetch_all(conn, "SELECT part_index, platform_message_id, recorded_at FROM obligation_parts "
                                  "WHERE obligation_id = ? ORDER BY part_index", (oid,))
    return {"type": "obligation", "obligation_id": oid, "inbound_ref": ref, "platform": platform, "chat_id": chat_id,
            "thread_id": thread_id, "reply_to": reply_to, "content": content, "chunks": records.unpack(chunks),
            "state": state, "fence": fence, "attempts": attempts,
            "owner": None if pid is None else [pid, start, host], "last_error": error, "created_at": created_at,
            "updated_at": updated_at, "send_intent": intent, "ambiguous": bool(ambiguous),
            "parts": [list(p) for p in parts]}


async def _pending_inbox(conn, key: str) -> list[dict]:
    return [_inbox_map(r) for r in await fetch_all(
        conn, f"SELECT {_INBOX_COLUMNS} FROM inbox WHERE session_key = ? AND state IN ('received', 'taken') "
              f"ORDER BY seq", (key,))]


async def _open_obligations(conn, key: str) -> list[dict]:
    rows = await fetch_all(conn, f"SELECT {_OBLIGATION_COLUMNS} FROM obligations WHERE session_key = ? AND state IN "
                                 f"('pending', 'attempting', 'failed') ORDER BY created_at, obligation_id", (key,))
    return [await _obligation_map(conn, r) for r in rows]


async def export_for_move(conn, session_id: str, interrupted: bool = False) -> bytes:
    """The session and its live state as a version 2 file; deterministic. ``TurnRunning`` if a turn of it is in
    flight and not ``interrupted``."""
    head = await session_maps(conn, session_id, MOVE_VERSION)
    session = head[1]
    key = session["session_key"] if _carries_key_rows(session) else None
    runtime = await _runtime_map(conn, session_id, key)
    if runtime is not None and runtime["turn_token"] is not None and not interrupted:
        raise TurnRunning(f"session {session_id} has a turn in flight (running, or cut by a crash); move it as an "
                          f"interrupted turn, which the destination resumes, with --interrupted")
    maps = head + ([runtime] if runtime is not None else [])
    if key is not None:
        maps += await _pending_inbox(conn, key) + await _open_obligations(conn, key)
    return frame(maps)


# ------------------------------------------------------------------------------------------------- parsing

def _is_time_or_none(value: Any) -> bool:
    return value is None or is_time(value)


def _is_text_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _check_runtime(m: dict) -> None:
    check(list(m) == RUNTIME_FIELDS, "bad runtime fields")
    check(_is_text_or_none(m["turn_token"]) and _is_count(m["compression_cursor"]), "bad runtime turn or cursor")
    check(type(m["resume_pending"]) is bool and type(m["resume_attempted"]) is bool, "bad runtime flags")
    ref = m["resume_inbox"]
    check(ref is None or (isinstance(ref, list) and len(ref) == 2 and all(isinstance(x, str) for x in ref)),
          "bad runtime resume_inbox")
    check(not m["resume_attempted"] or ref is not None, "resume_attempted without resume_inbox")
    check(_is_time_or_none(m["resume_started_at"]) and is_time(m["updated_at"]), "bad runtime timestamps")
    check(all(_is_count(m[f]) for f in ("resume_attempts", "resumes_total", "notices_total")), "bad runtime counts")


def _check_inbox(m: dict) -> None:
    check(list(m) == INBOX_FIELDS, "bad inbox fields")
    check(isinstance(m["platform"], str) and m["platform"] != "" and isinstance(m["platform_message_id"], str)
          and m["platform_message_id"] != "", "bad inbox dedupe key")
    check(m["state"] in PENDING_STATES, "an inbox row in a move is received or taken")
    check(is_time(m["received_at"]) and is_time(m["updated_at"]), "bad inbox timestamps")
    check(_is_text_or_none(m["reason"]), "bad inbox reason")


def _check_obligation(m: dict, key: str) -> None:
    check(list(m) == OBLIGATION_FIELDS, "bad obligation fields")
    check(all(isinstance(m[f], str) for f in ("inbound_ref", "platform", "chat_id", "content")),
          "bad obligation target or content")
    # The id is what makes a second import find it: it must be the one the ledger derives from its fields.
    check(m["obligation_id"] == obligation_id(key, m["inbound_ref"], m["content"]), "obligation id does not match")
    check(_is_text_or_none(m["thread_id"]) and _is_text_or_none(m["reply_to"]), "bad obligation thread or reply_to")
    check(isinstance(m["chunks"], list) and m["state"] in OPEN_STATES, "bad obligation chunks or state")
    check(_is_count(m["fence"]) and _is_count(m["attempts"]), "bad obligation fence or attempts")
    owner = m["owner"]
    check(owner is None or (isinstance(owner, list) and len(owner) == 3 and type(owner[0]) is int
                            and _is_time_or_none(owner[1]) and _is_text_or_none(owner[2])), "bad obligation owner")
    check(_is_text_or_none(m["last_error"]) and is_time(m["created_at"]) and is_time(m["updated_at"]),
          "bad obligation error or timestamps")
    check((m["send_intent"] is None or _is_count(m["send_intent"])) and type(m["ambiguous"]) is bool,
          "bad obligation send_intent or ambiguous")
    parts = m["parts"]
    check(isinstance(parts, list) and all(isinstance(p, list) and len(p) == 3 and _is_count(p[0])
                                          and isinstance(p[1], str) and is_time(p[2]) for p in parts),
          "bad obligation parts")
    check(all(a[0] < b[0] for a, b in zip(parts, parts[1:])), "obligation parts must be ordered by index")


def _take(maps: list, i: int, kind: str) -> list:
    taken = []
    while i + len(taken) < len(maps) and maps[i + len(taken)].get("type") == kind:
        taken.append(maps[i + len(taken)])
    return taken


def parse_moved(maps: list[dict]) -> ParsedMove:
    """A version 2 file's decoded maps (``transfer.decode_maps``), checked completely, without a database."""
    base, end = parse_session(maps)
    key = base.session["session_key"]
    runtime_maps = _take(maps, end, "runtime")
    check(len(runtime_maps) <= 1, "at most one runtime record")
    inbox = _take(maps, end + len(runtime_maps), "inbox")
    obligations = _take(maps, end + len(runtime_maps) + len(inbox), "obligation")
    rest = end + len(runtime_maps) + len(inbox) + len(obligations)
    if rest < len(maps):
        raise refuse(f"unexpected record type {maps[rest].get('type')!r}")
    for m in runtime_maps:
        _check_runtime(m)
    for m in inbox:
        _check_inbox(m)
    for m in obligations:
        _check_obligation(m, key)
    check(_carries_key_rows(base.session) or not (inbox or obligations),
          "a session that is not its key's current one carries no inbox rows or obligations")
    dedupe = [(m["platform"], m["platform_message_id"]) for m in inbox]
    check(len(set(dedupe)) == len(dedupe), "an inbox dedupe key appears twice")
    order = [(m["created_at"], m["obligation_id"]) for m in obligations]
    check(all(a < b for a, b in zip(order, order[1:])), "obligations must be ordered by created_at, id")
    runtime = runtime_maps[0] if runtime_maps else None
    check(runtime is None or runtime["resume_inbox"] is None or tuple(runtime["resume_inbox"]) in dedupe,
          "the runtime names an inbox row the file does not hold")
    return ParsedMove(base, maps[:end], runtime, inbox, obligations)


def parse_move_file(blob) -> ParsedMove:
    if isinstance(blob, ParsedMove):
        return blob
    maps = decode_maps(blob)
    if maps[0]["version"] != MOVE_VERSION:
        raise refuse(f"version {maps[0]['version']} file: it holds no live state to move "
                     f"(write one with 'sessions export ID FILE --with-state')")
    return parse_moved(maps)


# ---------------------------------------------------------------------------------------------- the steps

def _same(ours: list, theirs: list) -> bool:
    """Byte for byte (Python's == takes True for 1 and 1.0 for 1)."""
    return len(ours) == len(theirs) and all(records.pack_body(a) == records.pack_body(b)
                                            for a, b in zip(ours, theirs))


async def _holds_same_session(conn, parsed: ParsedMove) -> bool:
    sid = parsed.base.session["session_id"]
    key = parsed.base.session["session_key"] if _carries_key_rows(parsed.base.session) else None
    runtime = await _runtime_map(conn, sid, key)
    return _same(await session_maps(conn, sid, MOVE_VERSION), parsed.head) and \
        _same([runtime] if runtime else [], [parsed.runtime] if parsed.runtime else [])


async def _session_here(conn, session_id: str) -> bool:
    return await fetch_one(conn, "SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)) is not None


def _info(parsed: ParsedMove) -> SessionInfo:
    s = parsed.base.session
    return SessionInfo(s["session_id"], s["session_key"], s["state"], s["created_at"], s["updated_at"], s["title"],
                       s["source"])


async def _insert_runtime(conn, session_id: str, m: dict, seqs: dict) -> None:
    seq = seqs[tuple(m["resume_inbox"])] if m["resume_inbox"] is not None else None
    await conn.execute(
        "INSERT INTO runtime_state (session_id, turn_token, compression_cursor, resume_pending, resume_inbox_seq, "
        "resume_started_at, resume_attempted_seq, updated_at, resume_attempts, resumes_total, notices_total) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (session_id, m["turn_token"], m["compression_cursor"], int(m["resume_pending"]), seq,
         m["resume_started_at"], seq if m["resume_attempted"] else None, m["updated_at"], m["resume_attempts"],
         m["resumes_total"], m["notices_total"]))


async def _insert_obligation(conn, key: str, m: dict) -> None:
    pid, start, host = m["owner"] or (None, None, None)
    await conn.execute(
        "INSERT INTO obligations (obligation_id, session_key, inbound_ref, platform, chat_id, thread_id, reply_to, "
        "content, chunks, state, fence, attempts, owner_pid, owner_start, owner_host, last_error, created_at, "
        "updated_at, send_intent, ambiguous) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (m["obligation_id"], key, m["inbound_ref"], m["platform"], m["chat_id"], m["thread_id"], m["reply_to"],
         m["content"], records.pack(m["chunks"]), m["state"], m["fence"], m["attempts"], pid, start, host,
         m["last_error"], m["created_at"], m["updated_at"], m["send_intent"], int(m["ambiguous"])))
    for index, message_id, at in m["parts"]:
        await conn.execute("INSERT INTO obligation_parts (obligation_id, part_index, platform_message_id, "
                           "recorded_at) VALUES (?, ?, ?, ?)", (m["obligation_id"], index, message_id, at))


async def _inbox_row(conn, m: dict) -> Optional[tuple]:
    """(seq, session_key, the row as a record) of the file's inbox row here, by its dedupe key; None if absent."""
    row = await fetch_one(conn, f"SELECT seq, session_key, {_INBOX_COLUMNS} FROM inbox WHERE platform = ? AND "
                                f"platform_message_id = ?", (m["platform"], m["platform_message_id"]))
    return (row[0], row[1], _inbox_map(row[2:])) if row else None


async def _obligation_here(conn, oid: str) -> Optional[dict]:
    row = await fetch_one(conn, f"SELECT {_OBLIGATION_COLUMNS} FROM obligations WHERE obligation_id = ?", (oid,))
    return await _obligation_map(conn, row) if row else None


async def import_moved(conn, blob, served_here_ok: bool = False) -> MoveOutcome:
    """Store a version 2 file (bytes, or a ``ParsedMove``) on this host, inside the caller's transaction;
    idempotent, ``ImportRefused`` on a conflict (see the module docstring). ``served_here_ok``: the file is the
    source's second export of a session imported here before, written because its forget met input that came after
    the first (a live move, actors/sessions/moves_out.py). The source has not served the session since, so what
    is here is the newer truth: the session is left as it is and only the inbox rows and obligations not here yet
    are added."""
    parsed = parse_move_file(blob)
    s = parsed.base.session
    sid, key = s["session_id"], s["session_key"]
    fresh = not await _session_here(conn, sid)
    if fresh:
        await import_rows(conn, parsed.base)    # refuses a key that has another current session
    elif not served_here_ok and not await _holds_same_session(conn, parsed):
        raise refuse(f"session {sid} is here already and differs from the file (it was imported before and has "
                     f"served here since, or it is another copy)")
    seqs, inbox = {}, 0
    for m in parsed.inbox:
        dedupe = (m["platform"], m["platform_message_id"])
        found = await _inbox_row(conn, m)
        if found is not None and found[1] != key:
            raise refuse(f"inbox message {dedupe[0]}:{dedupe[1]} is stored here for another session key")
        if found is not None:
            seqs[dedupe] = found[0]     # the same platform message: the row here is the newer truth (dedup, G2)
            continue
        cur = await conn.execute(
            "INSERT INTO inbox (session_key, platform, platform_message_id, state, payload, received_at, updated_at, "
            "reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (key, *dedupe, m["state"], records.pack(m["payload"]),
                                                         m["received_at"], m["updated_at"], m["reason"]))
        seqs[dedupe] = cur.lastrowid
        inbox += 1
    if fresh and parsed.runtime is not None:
        await _insert_runtime(conn, sid, parsed.runtime, seqs)
    obligations = 0
    for m in parsed.obligations:
        if await _obligation_here(conn, m["obligation_id"]) is None:   # same id: same key, message and reply
            await _insert_obligation(conn, key, m)
            obligations += 1
    return MoveOutcome(_info(parsed), fresh or bool(inbox or obligations), len(parsed.base.events), inbox,
                       obligations)


def _refuse_forget(why: str) -> ImportRefused:
    return ImportRefused(f"forget refused, nothing was changed: {why}")


async def _unlisted_input(conn, parsed: ParsedMove) -> Optional[str]:
    """What the key holds here that the file does not (it arrived after the export), described; None if nothing."""
    key = parsed.base.session["session_key"]
    listed = {(m["platform"], m["platform_message_id"]) for m in parsed.inbox}
    extra = [m for m in await _pending_inbox(conn, key) if (m["platform"], m["platform_message_id"]) not in listed]
    owed = {m["obligation_id"] for m in parsed.obligations}
    more = [m for m in await _open_obligations(conn, key) if m["obligation_id"] not in owed]
    if not extra and not more:
        return None
    return f"{len(extra)} inbox row(s) and {len(more)} open obligation(s) of key {key} are not in the file"


async def forget_moved(conn, blob) -> MoveOutcome:
    """Delete from this host exactly what the file holds, inside the caller's transaction; idempotent, refused
    (``ImportRefused``) with nothing deleted if any of it changed since the export (see the module docstring)."""
    try:
        parsed = parse_move_file(blob)
    except ImportRefused as exc:
        raise _refuse_forget(str(exc).removeprefix(REFUSED)) from None
    sid = parsed.base.session["session_id"]
    present = await _session_here(conn, sid)
    if present and not await _holds_same_session(conn, parsed):
        raise _refuse_forget(f"session {sid} changed here since the file was written (it served again); export it "
                             f"again and move that file")
    if present and _carries_key_rows(parsed.base.session):
        unlisted = await _unlisted_input(conn, parsed)
        if unlisted:
            raise _refuse_forget(f"{unlisted} (they arrived after the export); export it again and move that file")
    inbox = 0
    for m in parsed.inbox:
        found = await _inbox_row(conn, m)
        if found is None:
            continue
        if found[1] != parsed.base.session["session_key"] or not _same([found[2]], [m]):
            raise _refuse_forget(f"inbox message {m['platform']}:{m['platform_message_id']} changed here since the "
                                 f"file was written")
        await conn.execute("DELETE FROM inbox WHERE seq = ?", (found[0],))
        inbox += 1
    obligations = 0
    for m in parsed.obligations:
        here = await _obligation_here(conn, m["obligation_id"])
        if here is None:
            continue
        if not _same([here], [m]):
            raise _refuse_forget(f"obligation {m['obligation_id'][:16]} changed here since the file was written "
                                 f"(its delivery went on here)")
        await conn.execute("DELETE FROM obligations WHERE obligation_id = ?", (m["obligation_id"],))  # parts cascade
        obligations += 1
    if present:   # its transcript (and search index), display, requests and runtime row go with it (cascade)
        await conn.execute("DELETE FROM sessions WHERE session_id = ?", (sid,))
    return MoveOutcome(_info(parsed), present or bool(inbox or obligations), len(parsed.base.events), inbox,
                       obligations)
