"""What a bug report needs of the database (``run_gateway.py report``): counts by state, the oldest rows still open,
and one session's records for its timeline. Reads only; plain dicts, the text of each row included (the report
decides whether to keep it: it keeps none unless asked, daemon/report_parts.py)."""
from __future__ import annotations


from . import records
from .db import Database, fetch_all
from .inbox import INBOX_STATES, PENDING_STATES
from .ledger import OBLIGATION_STATES, OPEN_OBLIGATIONS
_OBLIGATION_COLUMNS = ("obligation_id, session_key, platform, chat_id, state, attempts, last_error, created_at, "
                       "updated_at, chunks")


def _inbox_row(r) -> dict:
    payload = records.unpack(r[5])
    return {"seq": r[0], "session_key": r[1], "adapter": r[2], "platform_message_id": r[3], "state": r[4],
            "received_at": r[6], "updated_at": r[7], "reason": r[8], "text": (payload or {}).get("text") or "",
            "attachments": len((payload or {}).get("attachments") or ())}


def _obligation_row(r) -> dict:
    chunks = records.unpack(r[9]) or []
    return {"obligation_id": r[0], "session_key": r[1], "adapter": r[2], "chat_id": r[3], "state": r[4],
            "attempts": r[5], "last_error": r[6], "created_at": r[7], "updated_at": r[8],
            "text": "".join(c for c in chunks if isinstance(c, str)), "chunks": len(chunks)}


class Forensics:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def counts(self) -> dict:
        """{"inbox": {state: n}, "ledger": {state: n}}, every state present."""
        async def fetch(conn):
            inbox = dict(await fetch_all(conn, "SELECT state, COUNT(*) FROM inbox GROUP BY state"))
            ledger = dict(await fetch_all(conn, "SELECT state, COUNT(*) FROM obligations GROUP BY state"))
            return {"inbox": {s: inbox.get(s, 0) for s in INBOX_STATES},
                    "ledger": {s: ledger.get(s, 0) for s in OBLIGATION_STATES}}
        return await self._db.read(fetch)

    async def oldest_open(self, limit: int = 20) -> dict:
        """The oldest inbox rows not yet answered and the oldest obligations not delivered (failed included)."""
        async def fetch(conn):
            marks = ",".join("?" * len(PENDING_STATES))
            inbox = await fetch_all(conn, "SELECT seq, session_key, platform, platform_message_id, state, payload, "
                                    f"received_at, updated_at, reason FROM inbox WHERE state IN ({marks}) "
                                    "ORDER BY seq LIMIT ?", (*PENDING_STATES, limit))
            marks = ",".join("?" * len(OPEN_OBLIGATIONS))
            ledger = await fetch_all(conn, f"SELECT {_OBLIGATION_COLUMNS} FROM obligations WHERE state IN ({marks}) "
                                     "ORDER BY created_at LIMIT ?", (*OPEN_OBLIGATIONS, limit))
            return {"inbox": [_inbox_row(r) for r in inbox], "ledger": [_obligation_row(r) for r in ledger]}
        return await self._db.read(fetch)

    async def session_records(self, session_key: str, limit: int = 500) -> dict:
        """One session key's inbox rows, transcript events (every session of the key), runtime state, and
        obligations with their parts: what its timeline is made of. The newest ``limit`` of each."""
        async def fetch(conn):
            inbox = await fetch_all(conn, "SELECT seq, session_key, platform, platform_message_id, state, payload, "
                                    "received_at, updated_at, reason FROM inbox WHERE session_key = ? "
                                    "ORDER BY seq DESC LIMIT ?", (session_key, limit))
            events = await fetch_all(conn, "SELECT t.session_id, t.seq, t.turn_id, t.role, t.kind, t.created_at, "
                                     "t.payload FROM transcript t JOIN sessions s USING (session_id) "
                                     "WHERE s.session_key = ? ORDER BY t.created_at DESC, t.seq DESC LIMIT ?",
                                     (session_key, limit))
            runtime = await fetch_all(conn, "SELECT r.session_id, r.turn_token, r.resume_pending, "
                                      "r.resume_inbox_seq, r.resume_started_at, r.resume_attempts, r.updated_at "
                                      "FROM runtime_state r JOIN sessions s USING (session_id) "
                                      "WHERE s.session_key = ?", (session_key,))
            obligations = await fetch_all(conn, f"SELECT {_OBLIGATION_COLUMNS} FROM obligations "
                                          "WHERE session_key = ? ORDER BY created_at DESC LIMIT ?",
                                          (session_key, limit))
            ids = [r[0] for r in obligations]
            parts = await fetch_all(conn, "SELECT obligation_id, part_index, platform_message_id, recorded_at FROM "
                                    f"obligation_parts WHERE obligation_id IN ({','.join('?' * len(ids))})",
                                    ids) if ids else []
            return {
                "inbox": [_inbox_row(r) for r in reversed(inbox)],
                "transcript": [{"session_id": r[0], "seq": r[1], "turn_id": r[2], "role": r[3], "kind": r[4],
                                "created_at": r[5], "payload": records.unpack(r[6])} for r in reversed(events)],
                "runtime": [dict(zip(("session_id", "turn_token", "resume_pending", "resume_inbox_seq",
                                      "resume_started_at", "resume_attempts", "updated_at"), r)) for r in runtime],
                "obligations": [_obligation_row(r) for r in reversed(obligations)],
                "parts": [dict(zip(("obligation_id", "part_index", "platform_message_id", "recorded_at"), r))
                          for r in parts],
            }
        return await self._db.read(fetch)
