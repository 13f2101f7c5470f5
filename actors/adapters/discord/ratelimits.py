"""Discord's HTTP rate limits, as the client must keep them: pure bookkeeping, no clock of its own, no network.

Discord publishes no numbers; every answer of a limited route says where its bucket stands (``X-RateLimit-Bucket``,
``-Remaining``, ``-Reset-After``), and a client is expected to stop before the bucket is empty rather than learn of
it from a 429. A bucket is shared by the routes that answer with the same bucket hash, per top-level resource (the
channel id): ``create_message`` in two channels are two buckets, two routes in one channel with one hash are one.
A 429 names ``retry_after`` and whether it is ``global`` (every request of the bot waits, whatever the route).
The global limit (50 requests per second per bot) comes with no headers to read: it is kept by counting.

``RateLimits.acquire(route, major, now)`` is called before each request: 0.0 means it may leave now (and one
request is counted against the bucket), otherwise the seconds to wait before asking again. ``update`` reads the
headers of the answer; ``limited`` records a 429. Times are seconds on any monotonic clock, given by the caller.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Mapping, Optional

GLOBAL_PER_S = 50     # Discord's global limit: requests per second per bot, whatever the route


@dataclass
class Bucket:
    remaining: Optional[int] = None     # None: unknown until the first answer tells
    reset_at: float = float("-inf")     # when the window the headers described ends

    def wait(self, now: float) -> float:
        if self.remaining is None or now >= self.reset_at:
            return 0.0
        return self.reset_at - now if self.remaining <= 0 else 0.0

    def take(self, now: float) -> None:
        if self.remaining is not None and now < self.reset_at:
            self.remaining -= 1


def _header(headers: Mapping[str, str], name: str) -> Optional[str]:
    value = headers.get(name)
    if value is None:   # aiohttp's headers ignore case; a plain dict from a test may not
        value = next((v for k, v in headers.items() if k.lower() == name.lower()), None)
    return value


def _number(text: Optional[str]) -> Optional[float]:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


class RateLimits:
    """Every bucket of one bot token, and the global ban."""

    def __init__(self, global_per_s: int = GLOBAL_PER_S) -> None:
        self.global_per_s = global_per_s
        self.recent: deque[float] = deque()           # when the requests of the last second left
        self.hash_of: dict[str, str] = {}             # route name -> the bucket hash Discord gave it
        self.buckets: dict[tuple[str, str], Bucket] = {}
        self.global_until = float("-inf")

    def _bucket(self, route: str, major: Optional[str]) -> Bucket:
        key = (self.hash_of.get(route, "route:" + route), str(major or ""))
        return self.buckets.setdefault(key, Bucket())

    def acquire(self, route: str, major: Optional[str], now: float) -> float:
        """0.0 and the request is counted, or the seconds to wait (a global ban, an empty bucket)."""
        if now < self.global_until:
            return self.global_until - now
        while self.recent and self.recent[0] <= now - 1.0:
            self.recent.popleft()
        if len(self.recent) >= self.global_per_s:
            return self.recent[0] + 1.0 - now
        bucket = self._bucket(route, major)
        wait = bucket.wait(now)
        if wait > 0:
            return wait
        bucket.take(now)
        self.recent.append(now)
        return 0.0

    def update(self, route: str, major: Optional[str], headers: Mapping[str, str], now: float) -> None:
        """Learn the bucket's state from an answer's headers (any status: a 429 carries them too)."""
        bucket_hash = _header(headers, "X-RateLimit-Bucket")
        if bucket_hash:
            self.hash_of[route] = bucket_hash
        remaining, reset_after = _number(_header(headers, "X-RateLimit-Remaining")), \
            _number(_header(headers, "X-RateLimit-Reset-After"))
        if remaining is None or reset_after is None:
            return
        bucket = self._bucket(route, major)
        reset_at = now + reset_after
        if reset_at > bucket.reset_at or bucket.remaining is None or remaining < bucket.remaining:
            # An answer may arrive after a later one: a newer window (later reset), or fewer left, is the truth.
            bucket.remaining, bucket.reset_at = int(remaining), max(bucket.reset_at, reset_at)

    def limited(self, route: str, major: Optional[str], retry_after: float, is_global: bool, now: float) -> None:
        """A 429: nothing of this bucket (or, global, nothing at all) leaves before ``retry_after`` has passed."""
        until = now + max(0.0, retry_after)
        if is_global:
            self.global_until = max(self.global_until, until)
            return
        bucket = self._bucket(route, major)
        bucket.remaining, bucket.reset_at = 0, max(bucket.reset_at, until)
