"""Receipts: what a platform reports later of a message it accepted (WhatsApp's status callbacks), kept on the part
of a reply that message is (``Ledger.record_receipt``; the ledger's docstring says what a receipt means).

A report can name a message whose send is not recorded yet: the platform's answer to the send (with the message's
id) and its report race, and the report can win. The platform was told the report was taken (Meta sends a status
callback once it was answered 200, never again), so the report is committed as *pending*, keyed by the platform (an
adapter's name) and the message id, and applied by ``Ledger.record_part`` in the transaction that records that id.
Either that transaction comes first (the report then finds the part) or the pending row does (the record then finds
it): SQLite serialises the two, so no order loses the report.

Bounded, since a sender can name any number of ids the gateway never sent (another app on the number, a buggy or
hostile sender with the secret): a pending receipt lives ``keep_s`` (the caller's bound, e.g. one hour) from its
newest report, and a platform keeps at most ``keep_max`` (the oldest go first). An expired one is never applied,
and is deleted at the platform's next pending report or by the sweeper's housekeeping (``drop_expired``); each
drop is counted for a log line. A report of a message the gateway never sent simply expires.

What survives kill -9: every pending receipt whose transaction committed (the platform was answered after it);
it is applied if its message's id is recorded before it expires. A send whose id was lost with the process (a
kill between the platform's answer and its record) never has it recorded: its receipts expire, and the reply is
sent again under its re-sent mark (the ledger's docstring), whose own receipts are recorded.

Functions of a write transaction's connection; the Ledger's methods call them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .db import fetch_one

RECEIPT_ORDER = {"sent": 1, "delivered": 2, "read": 3, "failed": 4}   # a later report never takes a step back
FAILED_RECEIPT = "failed"


@dataclass(frozen=True)
class ReceiptOutcome:
    """What ``Ledger.record_receipt`` did with one report."""
    obligation_id: Optional[str] = None   # the reply on whose part it is recorded (None: no part has that id)
    kept: bool = False                    # no part has that id yet: kept pending until one does, or it expires
    expired: int = 0                      # the platform's pending receipts dropped on the way: past their time
    over_bound: int = 0                   # ... and the oldest, dropped to keep at most ``keep_max``


async def on_part(conn, oid: str, index: int, kept: Optional[str], receipt: str, reason: str, now: float) -> None:
    """``receipt`` onto part ``index`` of ``oid``, which holds ``kept``, unless it says less; ``failed`` also puts
    ``reason`` in the obligation's last_error."""
    if RECEIPT_ORDER.get(kept or "", 0) >= RECEIPT_ORDER[receipt]:
        return
    await conn.execute("UPDATE obligation_parts SET receipt = ? WHERE obligation_id = ? AND part_index = ?",
                       (receipt, oid, index))
    if receipt == FAILED_RECEIPT:
        await conn.execute("UPDATE obligations SET last_error = ?, updated_at = ? WHERE obligation_id = ?",
                           (f"part {index + 1} not received: {reason or 'the platform gave no reason'}"[:500], now,
                            oid))


async def keep_pending(conn, platform: str, platform_message_id: str, receipt: str, reason: str, now: float,
                       keep_s: float, keep_max: int) -> ReceiptOutcome:
    """Keep a report of a message no part has yet (the furthest of several), until ``now + keep_s``; the
    platform's expired ones and its oldest beyond ``keep_max`` are dropped in the same transaction."""
    expired = (await conn.execute("DELETE FROM pending_receipts WHERE platform = ? AND expires_at <= ?",
                                  (platform, now))).rowcount
    held = await fetch_one(conn, "SELECT receipt FROM pending_receipts WHERE platform = ? AND "
                                 "platform_message_id = ?", (platform, platform_message_id))
    if held is None or RECEIPT_ORDER[held[0]] < RECEIPT_ORDER[receipt]:
        await conn.execute("INSERT OR REPLACE INTO pending_receipts (platform, platform_message_id, receipt, reason, "
                           "expires_at) VALUES (?, ?, ?, ?, ?)",
                           (platform, platform_message_id, receipt, reason[:500], now + keep_s))
    over_bound = 0
    excess = (await fetch_one(conn, "SELECT COUNT(*) FROM pending_receipts WHERE platform = ?", (platform,)))[0] \
        - keep_max
    if excess > 0:
        over_bound = (await conn.execute(
            "DELETE FROM pending_receipts WHERE platform = ? AND platform_message_id IN (SELECT platform_message_id "
            "FROM pending_receipts WHERE platform = ? AND platform_message_id != ? ORDER BY expires_at LIMIT ?)",
            (platform, platform, platform_message_id, excess))).rowcount
    return ReceiptOutcome(kept=True, expired=expired, over_bound=over_bound)


async def take_pending(conn, oid: str, index: int, platform_message_id: str, now: float) -> None:
    """A report that came before part ``index`` of ``oid`` was recorded as ``platform_message_id``: applied to the
    part, and no longer pending (an expired one is left to be dropped)."""
    found = await fetch_one(conn, "SELECT r.platform, r.receipt, r.reason, p.receipt FROM pending_receipts r "
                                  "JOIN obligations o ON o.platform = r.platform "
                                  "JOIN obligation_parts p ON p.obligation_id = o.obligation_id AND "
                                  "p.platform_message_id = r.platform_message_id "
                                  "WHERE o.obligation_id = ? AND p.part_index = ? AND r.platform_message_id = ? "
                                  "AND r.expires_at > ?", (oid, index, platform_message_id, now))
    if found is None:
        return
    platform, receipt, reason, kept = found
    await on_part(conn, oid, index, kept, receipt, reason, now)
    await conn.execute("DELETE FROM pending_receipts WHERE platform = ? AND platform_message_id = ?",
                       (platform, platform_message_id))


async def drop_expired(conn, now: float) -> int:
    """Delete every platform's pending receipts past their time; how many."""
    return (await conn.execute("DELETE FROM pending_receipts WHERE expires_at <= ?", (now,))).rowcount
