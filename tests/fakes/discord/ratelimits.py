"""Discord's HTTP rate limits: per-route buckets keyed by the route and its top-level resource (the channel id),
a global limit per bot, the X-RateLimit-* headers on every limited answer, and 429 bodies.

A bucket is a fixed window, as Discord's headers describe it: ``limit`` requests, then 429 until ``reset``; the
first request after the reset opens a new window. A request that arrives on a bucket which already answered 429
in the same window is a client that came back before ``retry_after``: counted as a violation a test can assert on.
"""
from __future__ import annotations

import hashlib
import math
import time
from typing import Optional

# route name -> (requests, window seconds). Not Discord's published numbers (it publishes none): its observed
# defaults, which clients must learn from the headers anyway.
DEFAULT_ROUTE_LIMITS = {
    "create_message": (5, 5.0), "edit_message": (5, 5.0), "delete_message": (5, 5.0), "typing": (5, 5.0),
    "get_message": (5, 1.0), "get_messages": (5, 1.0), "get_channel": (5, 1.0), "create_dm": (5, 1.0),
    "get_me": (5, 1.0), "get_application": (5, 1.0), "get_gateway_bot": (2, 5.0),
}
GLOBAL_LIMIT = (50, 1.0)
GLOBAL_EXEMPT = ("interaction_callback",)   # "Interaction endpoints are not bound to the bot's Global Rate Limit"


def ceil_ms(seconds: float) -> float:
    """Times handed to clients are rounded up to the millisecond, so one that waits exactly as told is never early."""
    return math.ceil(max(0.0, seconds) * 1000) / 1000


def bucket_hash(route: str) -> str:
    """An opaque, stable X-RateLimit-Bucket value per route (Discord's are opaque too)."""
    return hashlib.sha1(f"fake-discord:{route}".encode()).hexdigest()[:32]


class Window:
    def __init__(self, limit: int, seconds: float):
        self.limit, self.seconds = int(limit), float(seconds)
        self.count, self.reset_at, self.refused = 0, 0.0, False

    def roll(self, now: float) -> None:
        if now >= self.reset_at:
            self.count, self.reset_at, self.refused = 0, now + self.seconds, False

    def remaining(self) -> int:
        return max(0, self.limit - self.count)


class RateLimited(Exception):
    """A 429 to answer: its body and headers."""

    def __init__(self, retry_after: float, headers: dict, *, is_global: bool, scope: str):
        super().__init__("rate limited")
        self.retry_after, self.headers, self.is_global, self.scope = retry_after, headers, is_global, scope

    def body(self) -> dict:
        return {"message": "You are being rate limited.", "retry_after": ceil_ms(self.retry_after),
                "global": self.is_global}


class RateLimiter:
    """All buckets of one fake. Not thread-safe by itself: the fake calls it under its lock."""

    def __init__(self, route_limits: dict, global_limit: tuple, time_scale: float):
        self.route_limits, self.global_limit, self.time_scale = dict(route_limits), global_limit, time_scale
        self.windows: dict[tuple, Window] = {}
        self.global_window = Window(global_limit[0], global_limit[1] * time_scale)

    def _window(self, route: str, major: Optional[str]) -> Optional[Window]:
        if route not in self.route_limits:
            return None
        key = (route, major)
        if key not in self.windows:
            limit, seconds = self.route_limits[route]
            self.windows[key] = Window(limit, seconds * self.time_scale)
        return self.windows[key]

    def take(self, route: str, major: Optional[str], stats: dict) -> dict:
        """Count one request; returns the headers to send, or raises RateLimited (and counts it in ``stats``)."""
        now = time.monotonic()
        if route in GLOBAL_EXEMPT:
            return {}
        self.global_window.roll(now)
        if self.global_window.count >= self.global_window.limit:
            stats["rate_limited_global"] += 1
            retry = self.global_window.reset_at - now
            raise RateLimited(retry, {"X-RateLimit-Global": "true", "X-RateLimit-Scope": "global",
                                      "Retry-After": str(max(1, math.ceil(retry)))}, is_global=True, scope="global")
        window = self._window(route, major)
        if window is None:
            self.global_window.count += 1
            return {}
        window.roll(now)
        if window.count >= window.limit:
            if window.refused:
                stats["retry_after_violations"] += 1
            window.refused = True
            stats["rate_limited"] += 1
            retry = window.reset_at - now
            headers = self.headers(route, window, now)
            headers.update({"X-RateLimit-Scope": "user", "Retry-After": str(max(1, math.ceil(retry)))})
            raise RateLimited(retry, headers, is_global=False, scope="user")
        window.count += 1
        self.global_window.count += 1
        return self.headers(route, window, now)

    def ban(self, route: str, major: Optional[str], seconds: float) -> dict:
        """A scripted 429: the bucket is exhausted for ``seconds`` (as if the client had used it up)."""
        window = self._window(route, major) or Window(1, seconds)
        now = time.monotonic()
        window.roll(now)
        window.count, window.reset_at, window.refused = window.limit, now + seconds, True
        headers = self.headers(route, window, now)
        headers.update({"X-RateLimit-Scope": "user", "Retry-After": str(max(1, math.ceil(seconds)))})
        return headers

    @staticmethod
    def headers(route: str, window: Window, now: float) -> dict:
        reset_after = ceil_ms(window.reset_at - now)
        return {"X-RateLimit-Limit": str(window.limit), "X-RateLimit-Remaining": str(window.remaining()),
                "X-RateLimit-Reset": f"{ceil_ms(time.time() + reset_after):.3f}",
                "X-RateLimit-Reset-After": f"{reset_after:.3f}", "X-RateLimit-Bucket": bucket_hash(route)}
