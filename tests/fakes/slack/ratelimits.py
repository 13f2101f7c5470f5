"""Slack's Web API rate limits as the fake enforces them.

Slack applies limits per method, per workspace, per app, in tiers: Tier 1 "1+ per minute", Tier 2 "20+", Tier 3
"50+", Tier 4 "100+", each tolerating some burst. The fake gives each tier a token bucket refilled at the tier's
per-minute figure, holding a fifth of it at once (at least 2). Methods of the "special" tier follow their own
documented rule: chat.postMessage about one message per second per channel with short bursts (a workspace-wide
limit Slack does not publish can be switched on with ``post_workspace_per_minute``); auth.test is not limited.

Over the limit: HTTP 429, ``{"ok": false, "error": "ratelimited"}`` and ``Retry-After`` in whole seconds. Until
that time has passed every call to the same bucket is refused again and counted as a retry_after violation.
``time_scale`` shrinks every window for fast tests; Retry-After stays at least 1.
"""
from __future__ import annotations

import time
from typing import Optional

from tests.fakes.harness import FloodGate
from tests.fakes.slack.errors import ApiError, ratelimited

# Tiers as the method reference gives them (docs.slack.dev/reference/methods/<name>: "Rate limits").
METHOD_TIERS: dict[str, object] = {"apps.connections.open": 3, "auth.test": None, "chat.postMessage": "post",
                                   "chat.update": 3, "chat.delete": 3, "conversations.info": 3, "users.info": 4,
                                   "chat.postEphemeral": 4}
LIMIT_DEFAULTS = {"tier1_per_minute": 1.0, "tier2_per_minute": 20.0, "tier3_per_minute": 50.0,
                  "tier4_per_minute": 100.0, "post_interval": 1.0, "post_burst": 3,
                  "post_workspace_per_minute": 0.0, "time_scale": 1.0}


class RateLimits:
    """The buckets and bans; ``limits`` is the fake's configuration (LIMIT_DEFAULTS keys among others)."""

    def __init__(self, limits: dict):
        self.limits = limits
        self.gate = FloodGate()

    def scopes(self, method: str, channel: Optional[str]) -> list[tuple]:
        """(key, refill interval in seconds, burst) for each bucket a call to ``method`` spends from."""
        tier, scale = METHOD_TIERS.get(method), self.limits["time_scale"]
        if tier is None:
            return []
        if tier == "post":
            scopes = [(("post", channel), self.limits["post_interval"] * scale, self.limits["post_burst"])]
            per_minute = self.limits["post_workspace_per_minute"]
            if per_minute > 0:
                scopes.append((("post",), 60.0 * scale / per_minute, max(2, int(per_minute // 5))))
            return scopes
        per_minute = self.limits[f"tier{tier}_per_minute"]
        return [(("method", method), 60.0 * scale / per_minute, max(2, int(per_minute // 5)))]

    def check(self, stats: dict, method: str, channel: Optional[str]) -> None:
        """Spend one token from each of the call's buckets, or raise the 429 (and remember the ban)."""
        now, scopes = time.monotonic(), self.scopes(method, channel)
        banned_for = self.gate.ban_remaining([key for key, _, _ in scopes], now)
        if banned_for > 0:
            stats["retry_after_violations"] += 1
            raise ratelimited(banned_for)
        buckets = [(key, self.gate.bucket(key, interval, burst)) for key, interval, burst in scopes]
        for key, bucket in buckets:
            wait = bucket.wait_needed(now)
            if wait > 0:
                error = ratelimited(wait)
                self.gate.ban(key, now, error.retry_after)
                raise error
        for _, bucket in buckets:
            bucket.take()

    def scripted_flood(self, method: str, channel: Optional[str], seconds: float) -> ApiError:
        """A 429 from the fault script binds like a real one: the method's buckets are banned for Retry-After."""
        error = ratelimited(seconds)
        now = time.monotonic()
        for key, _, _ in self.scopes(method, channel) or [(("method", method), 0, 1)]:
            self.gate.ban(key, now, error.retry_after)
        return error
