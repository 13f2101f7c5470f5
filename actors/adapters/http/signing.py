"""HMAC-SHA256 signatures over a timestamp and the body: the ``X-Signature-Timestamp: <unix seconds>`` and
``X-Signature-256: sha256=<hex>`` headers of webhooks in and callbacks out.

The signed bytes are the timestamp, a dot, and the raw body exactly as sent (``b"1767225600." + body``), so a
receiver verifies before parsing, and a captured request is refused once its timestamp is more than
``MAX_SKEW_S`` (5 minutes) from the receiver's clock: a replay inside that window repeats a ``message_id`` the inbox
already holds, and is answered as the duplicate it is. Without the timestamp, replay protection would rest on the
inbox keeping every message id forever.
"""
from __future__ import annotations

import hashlib
import hmac
import time
from typing import Optional

SIGNATURE_HEADER = "X-Signature-256"
TIMESTAMP_HEADER = "X-Signature-Timestamp"
SCHEME = "sha256="
MAX_SKEW_S = 300


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The signature header value for ``body`` sent at ``timestamp`` (unix seconds)."""
    signed = str(int(timestamp)).encode("ascii") + b"." + body
    return SCHEME + hmac.new(secret.encode("utf-8"), signed, hashlib.sha256).hexdigest()


def signed_headers(secret: str, body: bytes, now: Optional[float] = None) -> dict:
    """Both headers for ``body``, signed now (or at ``now``)."""
    timestamp = int(time.time() if now is None else now)
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: sign(secret, body, timestamp)}


def signature_problem(secret: str, body: bytes, signature: Optional[str], timestamp: Optional[str],
                      now: Optional[float] = None) -> Optional[str]:
    """None if ``signature`` signs ``body`` at ``timestamp`` under ``secret`` and the timestamp is within
    MAX_SKEW_S of ``now``; otherwise what is wrong, for the 401 (it names no secret). Constant-time comparison."""
    if not secret or not signature:
        return "bad or missing signature"
    stamp = (timestamp or "").strip()
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12:
        return f"missing or malformed {TIMESTAMP_HEADER} (unix seconds)"
    skew = abs((time.time() if now is None else now) - int(stamp))
    if skew > MAX_SKEW_S:
        return f"{TIMESTAMP_HEADER} is {skew:.0f}s from this server's clock (at most {MAX_SKEW_S}s)"
    # surrogatepass: any lone surrogate encodes (and then simply fails to match the ASCII digest)
    given = signature.strip().lower().encode("utf-8", "surrogatepass")
    if not hmac.compare_digest(sign(secret, body, int(stamp)).encode("ascii"), given):
        return "bad or missing signature"
    return None


def signature_ok(secret: str, body: bytes, signature: Optional[str], timestamp: Optional[str],
                 now: Optional[float] = None) -> bool:
    return signature_problem(secret, body, signature, timestamp, now) is None
