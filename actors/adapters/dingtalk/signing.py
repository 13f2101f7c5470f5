"""The signature of the robot's HTTP callbacks, as pure functions.

In HTTP mode the platform POSTs each robot message to the robot's message URL with two headers: ``timestamp`` (ms
since the epoch) and ``sign``, the Base64 of HMAC-SHA256 keyed with the app secret over ``timestamp + "\\n" +
app secret``. A request is accepted only if the sign matches (compared in constant time) and the timestamp is within
``max_age_s`` of now either way (the platform's window is an hour). The sign covers the time, not the body: it
proves the sender knows the secret within the window, and the inbox's dedup on ``msgId`` makes a replayed message no
second row.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Optional

MAX_AGE_S = 3600.0


def sign(secret: str, timestamp: str) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}\n{secret}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def refusal(secret: str, timestamp: Optional[str], given: Optional[str], now: float,
            max_age_s: float = MAX_AGE_S) -> Optional[str]:
    """Why the request must be refused (401), or None when it is the platform's, signed within the window."""
    if not timestamp or not given:
        return "no timestamp or sign header"
    try:
        stamp = int(timestamp) / 1000.0
    except ValueError:
        return f"the timestamp is no number ({timestamp[:20]!r})"
    if abs(now - stamp) > max_age_s:
        return f"signed {abs(now - stamp):.0f} s from now, over {max_age_s:.0f} s: a replay or a wrong clock"
    # Headers arrive decoded with surrogateescape: a non-ASCII sign is a wrong one, not a crash.
    if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), sign(secret, timestamp).encode()):
        return "the sign does not match"
    return None
