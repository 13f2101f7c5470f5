"""Slack's request signing (Events API over HTTP), as pure functions.

Slack signs every request it sends to a Request URL: ``X-Slack-Signature: v0=<hex HMAC-SHA256 of
"v0:<X-Slack-Request-Timestamp>:<raw body>" under the app's signing secret>``. A request is accepted only if the
signature matches (compared in constant time) and the timestamp is within ``MAX_AGE_S`` of now either way, so a
recorded request cannot be replayed later.
"""
from __future__ import annotations

import hashlib
import hmac
from typing import Optional

MAX_AGE_S = 300.0   # Slack's recommendation: five minutes


def signature(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return f"v0={digest}"


def refusal(secret: str, timestamp: Optional[str], given: Optional[str], body: bytes, now: float,
            max_age_s: float = MAX_AGE_S) -> Optional[str]:
    """Why the request must be refused (401), or None when it is Slack's, signed within the window."""
    if not timestamp or not given:
        return "no X-Slack-Request-Timestamp or X-Slack-Signature"
    try:
        stamp = int(timestamp)
    except ValueError:
        return f"X-Slack-Request-Timestamp is no number ({timestamp[:20]!r})"
    if abs(now - stamp) > max_age_s:
        return f"the request is {abs(now - stamp):.0f} s from now, over {max_age_s:.0f} s"
    # Headers arrive decoded with surrogateescape: a non-ASCII signature is a wrong one, not a crash.
    wanted = signature(secret, timestamp, body).encode()
    if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), wanted):
        return "the signature does not match"
    return None
