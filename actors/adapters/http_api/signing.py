"""HMAC-SHA256 body signatures, the ``X-Signature-256: sha256=<hex>`` header of webhooks in and callbacks out.

The signature covers the raw body bytes exactly as sent, so a receiver must verify before parsing.
"""
from __future__ import annotations

import hashlib
import hmac
from typing import Optional

SIGNATURE_HEADER = "X-Signature-256"
SCHEME = "sha256="


def sign(secret: str, body: bytes) -> str:
    """The header value for ``body``."""
    return SCHEME + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def signature_ok(secret: str, body: bytes, header: Optional[str]) -> bool:
    """True if ``header`` is the signature of ``body`` under ``secret``; the comparison takes constant time."""
    if not secret or not header:
        return False
    # surrogatepass: any lone surrogate encodes (and then simply fails to match the ASCII digest)
    given = header.strip().lower().encode("utf-8", "surrogatepass")
    return hmac.compare_digest(sign(secret, body).encode("ascii"), given)
