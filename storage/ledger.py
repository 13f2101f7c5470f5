"""The delivery ledger: every final reply is an obligation before any byte of it leaves (docs/design.md §2.6, G3).

States and the only legal moves (anything else raises ``IllegalTransition``):

    pending    -> attempting (claim) | abandoned
    attempting -> delivered | failed | abandoned | attempting (sweep, only when the owner is dead)
    failed     -> attempting (claim: retry) | abandoned | pending (requeue: admin retry, attempts reset)
    abandoned  -> pending (requeue: admin retry, attempts reset)
    delivered  -> nothing (final)

Fencing: each claim increments the row's fence (generation) and returns it; every later mutation presents it, and a
fence that is not the current one raises ``StaleFence``, so a slow or resurrected owner can never overwrite a newer
attempt. The owner (pid, start time, host) is stored with the claim; ``sweep_recoverable`` takes over a claim only
when ``is_owner_alive`` says that process is gone.

What survives kill -9: the obligation is committed (pending) before the first send; each part's platform message id
is committed as soon as the platform returns it. After a crash the sweeper therefore knows which parts exist (edit
them to their final text) and which were never sent (send them), instead of sending everything twice.

The ambiguous send: a platform may create a message and the process die before its id comes back. So before a send
leaves, its part index is committed as the obligation's ``send_intent`` (the first one in the claiming transaction,
``record_obligation(..., send_intent=0)``, at no extra cost); ``record_part`` clears it in the same transaction
that records the id. A claim (by a new owner: a restarted consumer, the sweeper) that finds an intent still there
knows a copy it cannot address may be in the chat. Where the platform lets it find that copy (Telegram numbers a
private chat's messages in sequence: actors/adapters/lost_copies.py), the adapter looks, and records the copy as the
part (``record_part``) or clears the intent (``clear_send_intent``: it never landed). Otherwise the owner sets
``ambiguous`` (``mark_ambiguous``) before its first marked copy leaves. The flag stays for the obligation's life, so
every later sender marks the reply as re-sent (or relies on the platform's idempotency key), and an obligation
delivered with it is "delivered, ambiguous" in the admin views. The intent stays until resolved: an owner that dies
before deciding leaves the same question to the next. An intent is kept on a failed send (the platform may have
acted before the failure), which errs towards a needless mark, never towards a silent duplicate.

Receipts: a platform that reports later what became of a message it accepted (WhatsApp's status callbacks) has it
recorded on the part (``record_receipt``): the furthest of sent < delivered < read, or failed with the platform's
reason, which also becomes the obligation's ``last_error``. The state stays ``delivered`` (the send is done and
never repeated by itself: the platform said why it did not reach the chat); ``receipts`` and the admin views show
it as not received. A report that comes before its part's id is recorded is kept pending, within bounds, and
applied by ``record_part`` in the transaction that records the id (storage/receipts.py).

A ledger failure never blocks a send: wrap calls in ``best_effort``, which logs at ERROR and returns None.
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import logging
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Iterable, Optional, TypeVar

from . import receipts, records
from .db import Database, fetch_all, fetch_one
from .errors import IllegalTransition, NotFound, StaleFence, StorageError
from .owner import Owner, current_owner, is_owner_alive, is_same_process
from .receipts import FAILED_RECEIPT, RECEIPT_ORDER

log = logging.getLogger(__name__)
T = TypeVar("T")



class ObligationState(enum.StrEnum):
    """An obligation's state (the legal moves: the module docstring). str-valued: the values are what the ``state``
    column holds (and its CHECK constraint, schema.py) and what the admin views show, unchanged; a row read back
    holds the plain string, which compares equal to its member."""
    PENDING = "pending"
    ATTEMPTING = "attempting"
    DELIVERED = "delivered"
    FAILED = "failed"
    ABANDONED = "abandoned"


OBLIGATION_STATES = tuple(s.value for s in ObligationState)
OPEN_OBLIGATIONS = tuple(s.value for s in ObligationState if s not in (ObligationState.DELIVERED,
                                                                       ObligationState.ABANDONED))   # still to deliver
_COLUMNS = ("obligation_id, session_key, inbound_ref, platform, chat_id, thread_id, reply_to, content, chunks, state, "
            "fence, attempts, owner_pid, owner_start, owner_host, last_error, created_at, updated_at, send_intent, "
            "ambiguous, streamed")


def obligation_id(session_key: str, inbound_ref: str, content: str) -> str:
    """sha256(session_key NUL inbound_ref NUL content), hex: the same reply to the same message, same id."""
    return hashlib.sha256(f"{session_key}\0{inbound_ref}\0{content}".encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Target:
    platform: str
    chat_id: str
    thread_id: Optional[str] = None
    reply_to: Optional[str] = None  # the platform message id the reply answers


@dataclass(frozen=True)
class Obligation:
    obligation_id: str
    session_key: str
    inbound_ref: str
    target: Target
    content: str
    chunks: list
    state: str
    fence: int
    attempts: int
    owner: Optional[Owner]
    last_error: Optional[str]
    created_at: float
    updated_at: float
    parts: dict = field(default_factory=dict)  # part index -> platform message id
    send_intent: Optional[int] = None          # the part whose send left with no id back yet
    ambiguous: bool = False                    # a claim found an unresolved send: an unaddressable copy may exist
    claimed: bool = False                      # record_obligation(claim=True) made the claim in this very call
    receipts: dict = field(default_factory=dict)   # part index -> what the platform reported of it (record_receipt)
    streamed: Optional[dict] = None            # parts sent as the answer was written (set_streamed), or None

    @property
    def not_received(self) -> bool:
        """A part the platform accepted and later reported failed: the chat never got it."""
        return FAILED_RECEIPT in self.receipts.values()


async def _load(conn, oid: str) -> Optional[Obligation]:
    r = await fetch_one(conn, f"SELECT {_COLUMNS} FROM obligations WHERE obligation_id = ?", (oid,))
    if r is None:
        return None
    rows = await fetch_all(conn, "SELECT part_index, platform_message_id, receipt FROM obligation_parts "
                                 "WHERE obligation_id = ? ORDER BY part_index", (oid,))
    parts = {index: message_id for index, message_id, _ in rows}
    receipts = {index: receipt for index, _, receipt in rows if receipt is not None}
    owner = Owner(r[12], r[13], r[14], r[10]) if r[12] is not None else None
    return Obligation(r[0], r[1], r[2], Target(r[3], r[4], r[5], r[6]), r[7], records.unpack(r[8]), r[9], r[10],
                      r[11], owner, r[15], r[16], r[17], parts, r[18], bool(r[19]), receipts=receipts,
                      streamed=None if r[20] is None else records.unpack(r[20]))


async def _require(conn, oid: str, fence: Optional[int], allowed: tuple, action: str) -> None:
    """Check that the row exists, ``fence`` is current (if given) and its state allows ``action``: one indexed read
    of two columns, as every step of a delivery makes it."""
    row = await fetch_one(conn, "SELECT fence, state FROM obligations WHERE obligation_id = ?", (oid,))
    if row is None:
        raise NotFound(f"no obligation {oid}")
    current, state = row
    if fence is not None and fence != current:
        raise StaleFence(f"obligation {oid[:12]}: fence {fence} is stale (current {current}); "
                         f"another claim took it over, so {action} is refused")
    if state not in allowed:
        raise IllegalTransition(f"obligation {oid[:12]}: {action} is not allowed in state {state}")


async def _claim(conn, oid: str, now: float) -> int:
    """Make the calling process the owner of a new attempt; returns the new fence. A send intent left by the
    previous owner stays: the new owner resolves it (finds the copy, or marks the reply; see the module docstring)."""
    me = current_owner()
    await conn.execute("UPDATE obligations SET state = 'attempting', fence = fence + 1, attempts = attempts + 1, "
                       "owner_pid = ?, owner_start = ?, owner_host = ?, updated_at = ? WHERE obligation_id = ?",
                       (me.pid, me.start_time, me.host, now, oid))
    return (await fetch_one(conn, "SELECT fence FROM obligations WHERE obligation_id = ?", (oid,)))[0]


async def _set_state(conn, oid: str, state: str, now: float, error: Optional[str] = None,
                     bump: bool = False) -> None:
    await conn.execute(f"UPDATE obligations SET state = ?, updated_at = ?, last_error = COALESCE(?, last_error)"
                       f"{', fence = fence + 1' if bump else ''} WHERE obligation_id = ?", (state, now, error, oid))


class Ledger:
    """Reached as ``Store.ledger``; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def record_obligation(self, session_key: str, inbound_ref: str, target: Target, content: str,
                                chunks: Optional[Iterable[str]] = None, claim: bool = False,
                                send_intent: Optional[int] = None) -> Obligation:
        """Record the duty to deliver ``content`` (idempotent: the same id again returns the existing row).

        ``chunks`` is stored as given (``[]`` = not chunked yet); None means one chunk, the whole content.

        ``claim=True`` also claims a pending row in the same transaction (state attempting, fence in the result),
        closing the window in which a sweeper could claim it between record and claim. With ``send_intent`` (a part
        index) a row this call claimed also records that part's send as about to leave, so the first send of a
        reply costs no transaction of its own; the result says whether it did (``send_intent``)."""
        oid = obligation_id(session_key, inbound_ref, content)
        chunk_blob = records.pack(list(chunks) if chunks is not None else [content])

        async def do(conn, now):
            await conn.execute(
                f"INSERT INTO obligations ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, 0, "
                f"NULL, NULL, NULL, NULL, ?, ?, NULL, 0, NULL) ON CONFLICT (obligation_id) DO NOTHING",
                (oid, session_key, inbound_ref, target.platform, str(target.chat_id),
                 None if target.thread_id is None else str(target.thread_id),
                 None if target.reply_to is None else str(target.reply_to), content, chunk_blob, now, now))
            claimed = claim and (await _load(conn, oid)).state == ObligationState.PENDING
            if claimed:
                await _claim(conn, oid, now)
                if send_intent is not None:
                    await conn.execute("UPDATE obligations SET send_intent = ? WHERE obligation_id = ?",
                                       (int(send_intent), oid))
            return dataclasses.replace(await _load(conn, oid), claimed=claimed)
        return await self._db.write(do, time.time())

    async def get(self, oid: str) -> Optional[Obligation]:
        return await self._db.read(_load, oid)

    async def mark_attempting(self, oid: str, fence: Optional[int] = None) -> int:
        """pending|failed -> attempting, owned by this process; returns the new fence for every later call."""
        async def do(conn, now):
            await _require(conn, oid, fence, (ObligationState.PENDING, ObligationState.FAILED), "mark_attempting")
            return await _claim(conn, oid, now)
        return await self._db.write(do, time.time())

    async def record_part(self, oid: str, fence: int, part_index: int, platform_message_id: str,
                          replace: bool = False) -> None:
        """Record the platform message id of part ``part_index`` the moment the platform returns it. Recording
        the same id again is a no-op; a different id for a recorded part is refused unless ``replace``."""
        async def do(conn, now):
            await _require(conn, oid, fence, (ObligationState.ATTEMPTING,), "record_part")
            known = await fetch_one(conn, "SELECT platform_message_id FROM obligation_parts WHERE obligation_id = ? "
                                          "AND part_index = ?", (oid, part_index))
            if known is not None and known[0] != str(platform_message_id) and not replace:
                raise IllegalTransition(f"obligation {oid[:12]}: part {part_index} is already recorded as "
                                        f"{known[0]}; pass replace=True if it was really sent again")
            if known is None or known[0] != str(platform_message_id):   # the same id again keeps its receipt
                await conn.execute("INSERT OR REPLACE INTO obligation_parts (obligation_id, part_index, "
                                   "platform_message_id, recorded_at) VALUES (?, ?, ?, ?)",
                                   (oid, int(part_index), str(platform_message_id), now))
                # A report of this message that came before this record was kept for it: it applies now.
                await receipts.take_pending(conn, oid, int(part_index), str(platform_message_id), now)
            # The id replaces the intent: from now on that message can be edited, so it is no longer ambiguous.
            await conn.execute("UPDATE obligations SET updated_at = ?, send_intent = CASE WHEN send_intent = ? "
                               "THEN NULL ELSE send_intent END WHERE obligation_id = ?", (now, int(part_index), oid))
        await self._db.write(do, time.time())

    async def record_receipt(self, platform: str, platform_message_id: str, receipt: str, reason: str = "", *,
                             keep_s: float = 0.0, keep_max: int = 0,
                             now: Optional[float] = None) -> receipts.ReceiptOutcome:
        """What ``platform`` reported of a message it accepted (``RECEIPT_ORDER``), kept on the part that message
        is unless it says less than what is kept (reports may arrive out of order, and again); ``failed`` also
        puts ``reason`` in the obligation's last_error. A message that is no part of a reply (yet: its send's record
        may come later; or never: a message the gateway did not send, or one purged) is kept pending for
        ``keep_s`` with at most ``keep_max`` per platform (storage/receipts.py), or, with no bound given, left."""
        if receipt not in RECEIPT_ORDER:
            raise ValueError(f"unknown receipt {receipt!r}")

        async def do(conn, now):
            found = await fetch_one(conn, "SELECT p.obligation_id, p.part_index, p.receipt FROM obligation_parts p "
                                          "JOIN obligations o ON o.obligation_id = p.obligation_id "
                                          "WHERE p.platform_message_id = ? AND o.platform = ?",
                                    (str(platform_message_id), platform))
            if found is not None:
                await receipts.on_part(conn, *found, receipt, reason, now)
                return receipts.ReceiptOutcome(obligation_id=found[0])
            if keep_s <= 0 or keep_max <= 0:
                return receipts.ReceiptOutcome()
            return await receipts.keep_pending(conn, platform, str(platform_message_id), receipt, reason, now,
                                               keep_s, keep_max)
        return await self._db.write(do, time.time() if now is None else now)

    async def drop_expired_receipts(self, now: Optional[float] = None) -> int:
        """Delete the pending receipts past their time (storage/receipts.py); how many."""
        return await self._db.write(receipts.drop_expired, time.time() if now is None else now)

    async def clear_send_intent(self, oid: str, fence: int, part_index: int) -> None:
        """The send of ``part_index`` is known not to have happened (the platform refused it): its intent goes, so
        no later claim takes the reply for ambiguous on its account."""
        async def do(conn, now):
            await _require(conn, oid, fence, (ObligationState.ATTEMPTING,), "clear_send_intent")
            await conn.execute("UPDATE obligations SET send_intent = NULL, updated_at = ? WHERE obligation_id = ? "
                               "AND send_intent = ?", (now, oid, int(part_index)))
        await self._db.write(do, time.time())

    async def record_send_intent(self, oid: str, fence: int, part_index: int) -> None:
        """Commit, before a send of part ``part_index`` leaves, that it is about to: if the id never comes back
        (kill -9 in between), the next claim knows a copy it cannot address may exist."""
        async def do(conn, now):
            await _require(conn, oid, fence, (ObligationState.ATTEMPTING,), "record_send_intent")
            await conn.execute("UPDATE obligations SET send_intent = ?, updated_at = ? WHERE obligation_id = ?",
                               (int(part_index), now, oid))
        await self._db.write(do, time.time())

    async def mark_ambiguous(self, oid: str, fence: int) -> None:
        """A copy of the reply nobody can address may be in the chat (a send whose outcome is unknown, which the
        platform gives no way to find): from now on every copy carries the re-sent marker. Set before the first
        marked copy leaves."""
        async def do(conn, now):
            await _require(conn, oid, fence, (ObligationState.ATTEMPTING,), "mark_ambiguous")
            await conn.execute("UPDATE obligations SET ambiguous = 1, updated_at = ? WHERE obligation_id = ?",
                               (now, oid))
        await self._db.write(do, time.time())

    async def set_chunks(self, oid: str, fence: int, chunks: Iterable[str]) -> None:
        """Record how the content is split into platform messages (decided at send time, within the limits)."""
        blob = records.pack(list(chunks))

        async def do(conn, now):
            await _require(conn, oid, fence, (ObligationState.ATTEMPTING,), "set_chunks")
            await conn.execute("UPDATE obligations SET chunks = ?, updated_at = ? WHERE obligation_id = ?",
                               (blob, now, oid))
        await self._db.write(do, time.time())

    async def set_streamed(self, oid: str, fence: int, streamed: dict) -> None:
        """Record the parts of a reply sent while its answer was being written, where the platform has no edits
        (``{"from": index, "parts": [text, ...]}``: the text of each part sent or about to be, by index, and the
        index the answer now being written starts at; actors/sessions/paragraph_parts.py). Committed before such a
        part leaves, so a reply resumed after a crash knows what the chat may already show."""
        blob = records.pack(dict(streamed))

        async def do(conn, now):
            await _require(conn, oid, fence, (ObligationState.ATTEMPTING,), "set_streamed")
            await conn.execute("UPDATE obligations SET streamed = ?, updated_at = ? WHERE obligation_id = ?",
                               (blob, now, oid))
        await self._db.write(do, time.time())

    async def mark_delivered(self, oid: str, fence: int) -> None:
        await self._finish(oid, fence, (ObligationState.ATTEMPTING,), ObligationState.DELIVERED, None)

    async def mark_failed(self, oid: str, fence: int, error: str) -> None:
        """attempting -> failed: the owner gives this attempt up, and with it the ownership. A failed row kept its
        owner once, and the sweep, which never touches a live owner's row, left the reply alone for as long as that
        process lived: a consumer that gave up (its session hands the reply to the sweeper) or the sweeper's own
        failed send waited for the next restart."""
        async def do(conn, now):
            await _require(conn, oid, fence, (ObligationState.ATTEMPTING,), "-> failed")
            await _set_state(conn, oid, ObligationState.FAILED, now, str(error))
            await conn.execute("UPDATE obligations SET owner_pid = NULL, owner_start = NULL, owner_host = NULL "
                               "WHERE obligation_id = ?", (oid,))
        await self._db.write(do, time.time())

    async def release(self, oid: str, reason: str) -> bool:
        """attempting -> failed, if this process holds the claim: a part of it that held the claim (a session
        shard's consumer cell) is gone, and the process lives on, so the sweep, which never takes a live owner's
        row, would leave the reply alone until the process ends. The fence moves on (a late write of the gone
        part is stale). True if released."""
        me = current_owner()

        async def do(conn, now):
            row = await fetch_one(conn, "SELECT state, owner_pid, owner_start, owner_host FROM obligations "
                                        "WHERE obligation_id = ?", (oid,))
            if row is None or row[0] != ObligationState.ATTEMPTING or not is_same_process(Owner(*row[1:]), me):
                return False
            await _set_state(conn, oid, ObligationState.FAILED, now, str(reason), bump=True)
            await conn.execute("UPDATE obligations SET owner_pid = NULL, owner_start = NULL, owner_host = NULL "
                               "WHERE obligation_id = ?", (oid,))
            return True
        return await self._db.write(do, time.time())

    async def abandon(self, oid: str, fence: int, reason: str) -> None:
        """pending|attempting|failed -> abandoned: give up (the reason is kept as last_error)."""
        await self._finish(oid, fence, OPEN_OBLIGATIONS, ObligationState.ABANDONED, str(reason))

    async def _finish(self, oid: str, fence: int, allowed: tuple, target: str, error: Optional[str]) -> None:
        async def do(conn, now):
            await _require(conn, oid, fence, allowed, f"-> {target}")
            await _set_state(conn, oid, target, now, error)
        await self._db.write(do, time.time())

    async def requeue(self, oid: str) -> Obligation:
        """Admin retry: failed|abandoned -> pending with attempts reset; the fence moves on, so any earlier
        holder is stale."""
        async def do(conn, now):
            await _require(conn, oid, None, (ObligationState.FAILED, ObligationState.ABANDONED), "requeue")
            await conn.execute("UPDATE obligations SET attempts = 0, owner_pid = NULL, owner_start = NULL, "
                               "owner_host = NULL WHERE obligation_id = ?", (oid,))
            await _set_state(conn, oid, ObligationState.PENDING, now, bump=True)
            return await _load(conn, oid)
        return await self._db.write(do, time.time())

    async def sweep_recoverable(self, connected_platforms: Iterable[str], max_attempts: int = 5,
                                stale_after_s: float = 86400, now: Optional[float] = None,
                                spacing_s: Callable[[int], float] = lambda attempts: 0.0,
                                serves: Callable[[str], bool] = lambda session_key: True) -> list[Obligation]:
        """Claim, in one IMMEDIATE transaction, what needs sending again: pending rows, and attempting/failed rows
        whose owner is dead, on connected platforms, once ``spacing_s(attempts)`` has passed since the row last
        changed. Rows that would exceed ``max_attempts`` or are older than ``stale_after_s`` become abandoned
        instead. A row whose owner is alive is never touched, nor one of a session key ``serves`` says this host
        does not serve now (its session is moving to another host, which finishes it). Returns the claimed rows
        with their new fence (``owner.generation == fence``)."""
        connected = set(connected_platforms)
        now = time.time() if now is None else now

        async def do(conn):
            claimed = []
            candidates = await fetch_all(
                conn, "SELECT obligation_id, state, platform, attempts, created_at, owner_pid, owner_start, "
                      "owner_host, fence, chunks, updated_at, session_key FROM obligations "
                      "WHERE state IN ('pending', 'attempting', 'failed') ORDER BY created_at")
            for oid, state, platform, attempts, created_at, pid, start, host, fence, chunks, updated, key in candidates:
                if state != ObligationState.PENDING and is_owner_alive(Owner(pid, start, host, fence)):
                    continue
                if not serves(key):
                    continue
                too_old = created_at < now - stale_after_s
                if not too_old and not records.unpack(chunks):
                    # No final text: a turn cut short, which its session resumes (and claims again). A sweep can
                    # deliver nothing of it, so it neither claims it nor counts an attempt against it: counted,
                    # a few sweeps after restarts abandoned a reply its session was about to finish.
                    continue
                if not too_old and state != ObligationState.PENDING and updated > now - spacing_s(attempts):
                    continue   # tried a moment ago: a fault storm spends no more attempts than its length allows
                if attempts >= max_attempts or too_old:
                    why = "too many attempts" if attempts >= max_attempts else "too old to deliver"
                    await _set_state(conn, oid, ObligationState.ABANDONED, now, f"swept: {why}", bump=True)
                    log.warning("obligation %s abandoned by the sweep: %s", oid[:12], why)
                elif platform in connected:
                    await _claim(conn, oid, now)
                    claimed.append(await _load(conn, oid))
            return claimed
        return await self._db.write(do)

    async def list(self, state: Optional[str] = None, limit: int = 100) -> list[Obligation]:
        """Obligations, newest first, optionally of one state."""
        if state is not None and state not in OBLIGATION_STATES:
            raise ValueError(f"unknown obligation state {state!r}")

        async def fetch(conn):
            ids = await fetch_all(conn, "SELECT obligation_id FROM obligations " +
                                  ("WHERE state = ? " if state else "") + "ORDER BY created_at DESC LIMIT ?",
                                  ((state,) if state else ()) + (int(limit),))
            return [await _load(conn, oid) for (oid,) in ids]
        return await self._db.read(fetch)

    async def part_ids_in_chat(self, platform: str, chat_id: str) -> set[str]:
        """Every platform message id recorded as a part of a reply in one chat (a search for a lost copy must
        never take one of these for it)."""
        async def fetch(conn):
            rows = await fetch_all(conn, "SELECT p.platform_message_id FROM obligation_parts p JOIN obligations o "
                                         "ON o.obligation_id = p.obligation_id WHERE o.platform = ? AND o.chat_id = ?",
                                   (platform, str(chat_id)))
            return {row[0] for row in rows}
        return await self._db.read(fetch)

    async def part_text(self, platform: str, chat_id: str, platform_message_id: str) -> Optional[str]:
        """The text a reply's part was sent with, found by the platform's id of it in one chat (None: no part of
        that id there): what a press on a platform whose presses do not carry the message reads its question
        from, the same after a restart."""
        async def fetch(conn):
            row = await fetch_one(conn, "SELECT p.part_index, o.chunks FROM obligation_parts p JOIN obligations o "
                                        "ON o.obligation_id = p.obligation_id WHERE p.platform_message_id = ? "
                                        "AND o.platform = ? AND o.chat_id = ? ORDER BY p.recorded_at DESC LIMIT 1",
                                  (platform_message_id, platform, str(chat_id)))
            if row is None:
                return None
            chunks = records.unpack(row[1])
            return chunks[row[0]] if isinstance(chunks, list) and 0 <= row[0] < len(chunks) else None
        return await self._db.read(fetch)

    async def count_ambiguous(self) -> int:
        """Obligations marked as re-sent: a copy nobody could address may be in their chat."""
        return (await self._db.read(fetch_one, "SELECT COUNT(*) FROM obligations WHERE ambiguous = 1"))[0]

    async def any_open(self) -> bool:
        """A reply is still to be delivered (pending or attempting): what a gateway must not stop on when idle."""
        row = await self._db.read(fetch_one, "SELECT EXISTS (SELECT 1 FROM obligations WHERE state IN "
                                             "('pending', 'attempting'))")
        return bool(row[0])

    async def counts(self) -> dict[str, int]:
        async def fetch(conn):
            found = dict(await fetch_all(conn, "SELECT state, COUNT(*) FROM obligations GROUP BY state"))
            return {state: found.get(state, 0) for state in OBLIGATION_STATES}
        return await self._db.read(fetch)

    async def purge(self, older_than_days: float = 30, max_rows: Optional[int] = None,
                    now: Optional[float] = None) -> int:
        """Retention: delete delivered/abandoned rows older than ``older_than_days``; then, if more than
        ``max_rows`` rows remain, the oldest finished ones until the bound holds. Unfinished rows are never
        deleted. Returns the number deleted."""
        cutoff = (time.time() if now is None else now) - older_than_days * 86400

        async def do(conn):
            deleted = (await conn.execute("DELETE FROM obligations WHERE state IN ('delivered', 'abandoned') "
                                          "AND updated_at < ?", (cutoff,))).rowcount
            if max_rows is not None:
                excess = (await fetch_one(conn, "SELECT COUNT(*) FROM obligations"))[0] - max_rows
                if excess > 0:
                    deleted += (await conn.execute(
                        "DELETE FROM obligations WHERE obligation_id IN (SELECT obligation_id FROM obligations "
                        "WHERE state IN ('delivered', 'abandoned') ORDER BY updated_at LIMIT ?)", (excess,))).rowcount
            return deleted
        return await self._db.write(do)


async def best_effort(awaitable: Awaitable[T], what: str) -> Optional[T]:
    """Await a storage call; on a storage failure log it at ERROR with ``what`` and return None instead of raising,
    so that a broken ledger never stops a reply from being sent."""
    try:
        return await awaitable
    except (StorageError, sqlite3.Error) as exc:
        log.error("storage failure during %s (continuing without it): %s: %s", what, type(exc).__name__, exc,
                  exc_info=exc)
        return None
