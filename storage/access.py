"""Who may talk to the agent: grants per (adapter, user) and pairing codes, ``Store.access`` (G5).

A sender the adapter's policy does not already admit asks for a pairing code by writing to the bot; the operator
approves the code from the admin CLI (``run_gateway.py pair approve CODE``), which grants that user of that adapter.
Codes expire (``ttl_s``) and are single-use; a sender who has been issued ``max_codes`` codes within ``lockout_s``
is locked out until the oldest of them leaves the window, so writing to the bot over and over neither floods the
operator's list nor keeps minting fresh codes.

What survives kill -9: every grant, approval, denial and issued code whose call returned (one transaction each).
The adapter checks grants per inbound batch, so an approval (or a revocation) takes effect with the next message.
"""
from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Iterable, Optional

from .db import Database, fetch_all, fetch_one
from .errors import NotFound

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"   # no 0/O, 1/I: read aloud or retyped without mistakes
CODE_LENGTH = 8


@dataclass(frozen=True)
class PairingCode:
    code: str
    adapter: str
    user_id: str
    chat_id: str
    user_name: Optional[str]
    created_at: float
    expires_at: float
    state: str                     # pending | approved | denied


@dataclass(frozen=True)
class PairingAnswer:
    """What an unknown sender gets: a code to give the operator (``new`` if just issued), or a lockout."""
    code: Optional[PairingCode]
    new: bool = False
    locked_until: Optional[float] = None
    full: bool = False             # the adapter already has max_pending codes waiting for the operator


@dataclass(frozen=True)
class Grant:
    adapter: str
    user_id: str
    granted_at: float
    granted_by: str
    user_name: Optional[str] = None


_CODE_COLUMNS = "code, adapter, user_id, chat_id, user_name, created_at, expires_at, state"


def normalise_code(text: str) -> str:
    """Operators may type a code in lower case, with spaces or a dash in the middle."""
    return "".join(ch for ch in str(text).upper() if ch.isalnum())


class Access:
    """Reached as ``Store.access``; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def granted_among(self, adapter: str, user_ids: Iterable[str]) -> set[str]:
        ids = sorted({str(u) for u in user_ids})
        if not ids:
            return set()

        async def fetch(conn):
            marks = ",".join("?" * len(ids))
            rows = await fetch_all(conn, "SELECT user_id FROM access_grants "
                                         f"WHERE adapter = ? AND user_id IN ({marks})", (adapter, *ids))
            return {r[0] for r in rows}
        return await self._db.read(fetch)

    async def request_code(self, adapter: str, user_id: str, chat_id: str, user_name: Optional[str], *,
                           ttl_s: float, max_codes: int, lockout_s: float, max_pending: int = 100,
                           now: Optional[float] = None) -> PairingAnswer:
        """The sender's live pending code, else a new one, else (too many issued lately) a lockout, else (the
        adapter already has ``max_pending`` live codes: a crowd of made-up senders) no code at all."""
        now = time.time() if now is None else now

        async def do(conn):
            live = await fetch_one(conn, f"SELECT {_CODE_COLUMNS} FROM pairing_codes WHERE adapter = ? AND user_id = ? "
                                         "AND state = 'pending' AND expires_at > ? ORDER BY created_at DESC LIMIT 1",
                                   (adapter, str(user_id), now))
            if live is not None:
                return PairingAnswer(PairingCode(*live))
            recent = await fetch_all(conn, "SELECT created_at FROM pairing_codes WHERE adapter = ? AND user_id = ? "
                                           "AND created_at > ? ORDER BY created_at", (adapter, str(user_id),
                                                                                      now - lockout_s))
            if len(recent) >= max_codes:
                return PairingAnswer(None, locked_until=recent[-max_codes][0] + lockout_s)
            pending = await fetch_one(conn, "SELECT COUNT(*) FROM pairing_codes WHERE adapter = ? AND state = 'pending' "
                                            "AND expires_at > ?", (adapter, now))
            if pending[0] >= max_pending:
                return PairingAnswer(None, full=True)
            code = PairingCode("".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH)), adapter,
                               str(user_id), str(chat_id), user_name, now, now + ttl_s, "pending")
            await conn.execute(f"INSERT INTO pairing_codes ({_CODE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                               (code.code, code.adapter, code.user_id, code.chat_id, code.user_name, code.created_at,
                                code.expires_at, code.state))
            return PairingAnswer(code, new=True)
        return await self._db.write(do)

    async def approve(self, code: str, by: str = "operator", now: Optional[float] = None) -> PairingCode:
        """Grant the code's sender. Raises NotFound for an unknown, used or expired code (the reason says which)."""
        now = time.time() if now is None else now
        wanted = normalise_code(code)

        async def do(conn):
            row = await fetch_one(conn, f"SELECT {_CODE_COLUMNS} FROM pairing_codes WHERE code = ?", (wanted,))
            if row is None:
                raise NotFound(f"no pairing code {wanted}")
            found = PairingCode(*row)
            if found.state != "pending":
                raise NotFound(f"pairing code {wanted} was already {found.state}")
            if found.expires_at <= now:
                raise NotFound(f"pairing code {wanted} expired; the sender gets a new one by writing again")
            await conn.execute("UPDATE pairing_codes SET state = 'approved' WHERE code = ?", (wanted,))
            await conn.execute("INSERT INTO access_grants (adapter, user_id, granted_at, granted_by, user_name) "
                               "VALUES (?, ?, ?, ?, ?) ON CONFLICT (adapter, user_id) DO NOTHING",
                               (found.adapter, found.user_id, now, by, found.user_name))
            return found
        return await self._db.write(do)

    async def deny(self, code: str) -> PairingCode:
        wanted = normalise_code(code)

        async def do(conn):
            row = await fetch_one(conn, f"SELECT {_CODE_COLUMNS} FROM pairing_codes WHERE code = ? "
                                        "AND state = 'pending'", (wanted,))
            if row is None:
                raise NotFound(f"no pending pairing code {wanted}")
            await conn.execute("UPDATE pairing_codes SET state = 'denied' WHERE code = ?", (wanted,))
            return PairingCode(*row)
        return await self._db.write(do)

    async def grant(self, adapter: str, user_id: str, by: str = "operator", now: Optional[float] = None) -> None:
        now = time.time() if now is None else now

        async def do(conn):
            await conn.execute("INSERT INTO access_grants (adapter, user_id, granted_at, granted_by) "
                               "VALUES (?, ?, ?, ?) ON CONFLICT (adapter, user_id) DO NOTHING",
                               (adapter, str(user_id), now, by))
        await self._db.write(do)

    async def revoke(self, adapter: str, user_id: str) -> bool:
        async def do(conn):
            cursor = await conn.execute("DELETE FROM access_grants WHERE adapter = ? AND user_id = ?",
                                        (adapter, str(user_id)))
            return cursor.rowcount > 0
        return await self._db.write(do)

    async def pending(self, now: Optional[float] = None) -> list[PairingCode]:
        now = time.time() if now is None else now

        async def fetch(conn):
            rows = await fetch_all(conn, f"SELECT {_CODE_COLUMNS} FROM pairing_codes WHERE state = 'pending' "
                                         "AND expires_at > ? ORDER BY created_at", (now,))
            return [PairingCode(*r) for r in rows]
        return await self._db.read(fetch)

    async def grants(self) -> list[Grant]:
        async def fetch(conn):
            rows = await fetch_all(conn, "SELECT adapter, user_id, granted_at, granted_by, user_name "
                                         "FROM access_grants ORDER BY adapter, granted_at")
            return [Grant(*r) for r in rows]
        return await self._db.read(fetch)
