"""How much one sender may ask of the gateway: a token bucket of messages per sender and a bound on the turns
waiting in their session, as data and pure decisions (no actor, no clock of its own: ``now`` comes from the caller).

    [adapters.web]
    type = "webchat"
    limits = { per_minute = 30, burst = 10, max_queued_turns = 10 }

Messages are charged at the time the platform says they were sent (``charge_time``), not when they reach the
gateway: a backlog the platform held while the gateway was down or restarting arrives all at once, yet its sender
sent it at their own pace, and counting it as a burst would turn away messages a rolling restart must keep.

A sender over the limit gets one notice per streak (``notice_due``), not one per message; what is over the limit is
acknowledged to the platform and never becomes a turn, what is under it is stored as always. Internal events (the
gateway's own resumes) are never limited. The number of senders tracked is bounded (``MAX_SENDERS``, least recently
seen forgotten first), so a stream of made-up sender ids costs bounded memory: a forgotten sender starts with a full
bucket, which only ever lets more through, never less.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Mapping, Optional

LIMIT_DEFAULTS = {"per_minute": 30.0, "burst": 10, "max_queued_turns": 10}
MAX_SENDERS = 10_000
# How far back a platform's send time may date a message: Telegram keeps undelivered updates for 24 hours. Older
# stamps (a platform clock gone wrong) count as that old, never older, so they cannot buy more than a day's refill.
MAX_BACKLOG_S = 24 * 3600.0
NOTICE = ("You are sending messages faster than I can answer, so I skipped some of them. Please wait a moment, "
          "then send again what you still need answered.")


@dataclass(frozen=True)
class LimitPolicy:
    per_minute: float = LIMIT_DEFAULTS["per_minute"]   # sustained messages per sender (0: no limit)
    burst: int = LIMIT_DEFAULTS["burst"]               # messages a quiet sender may send at once
    max_queued_turns: int = LIMIT_DEFAULTS["max_queued_turns"]   # waiting rows per session (0: no bound)

    @property
    def enabled(self) -> bool:
        return self.per_minute > 0


def policy_of(settings: Mapping) -> LimitPolicy:
    """The validated adapter table's ``limits`` (registry.py checks it with ``limit_problems``)."""
    values = dict(LIMIT_DEFAULTS, **(settings.get("limits") or {}))
    return LimitPolicy(float(values["per_minute"]), int(values["burst"]), int(values["max_queued_turns"]))


def limit_problems(value) -> list[str]:
    """Why a ``limits = {...}`` table is wrong, for the configuration error (empty: it is fine)."""
    if not isinstance(value, Mapping):
        return ["must be a table, e.g. { per_minute = 30, burst = 10, max_queued_turns = 10 }"]
    problems = [f"unknown key {k!r} (known: {', '.join(LIMIT_DEFAULTS)})" for k in value if k not in LIMIT_DEFAULTS]
    for key, number in value.items():
        if key in LIMIT_DEFAULTS and (isinstance(number, bool) or not isinstance(number, (int, float)) or number < 0):
            problems.append(f"{key} must be a number >= 0")
    if value.get("burst", 1) == 0 and value.get("per_minute", 1) != 0:
        problems.append("burst must be at least 1 (per_minute = 0 turns the limit off)")
    return problems


@dataclass
class _Bucket:
    tokens: float
    at: float
    noticed: bool = False          # this streak over the limit has had its notice


class SenderLimits:
    """The buckets of one adapter, on its loop thread."""

    def __init__(self, policy: LimitPolicy, max_senders: int = MAX_SENDERS):
        self.policy, self.max_senders = policy, max_senders
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self.limited = 0           # messages turned away so far (status, tests)

    def take(self, sender: str, now: float) -> bool:
        """One message from ``sender``, sent at ``now`` (``charge_time``): True if it may become a turn. Times may
        arrive out of order (a backlog beside live traffic); the bucket refills only for time it has not seen yet,
        so an old stamp never earns tokens twice."""
        if not self.policy.enabled:
            return True
        bucket = self._bucket(sender, now)
        if now > bucket.at:
            bucket.tokens = min(float(self.policy.burst),
                                bucket.tokens + (now - bucket.at) * self.policy.per_minute / 60)
            bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            bucket.noticed = False
            return True
        self.limited += 1
        return False

    def refund(self, sender: str) -> None:
        """Give back what ``take`` charged for a message that was not stored after all (the write failed, or it was
        a re-delivery of a stored one): a platform re-delivering, or a page retrying through a full disk, must not
        spend the sender's budget on one message again and again until it is refused for good."""
        bucket = self._buckets.get(sender)
        if bucket is not None:
            bucket.tokens = min(float(self.policy.burst), bucket.tokens + 1.0)

    def busy(self, sender: str) -> bool:
        """True once the sender has used part of their burst: only then is their queue worth counting."""
        bucket = self._buckets.get(sender)
        return bucket is not None and bucket.tokens < self.policy.burst - 1

    def notice_due(self, sender: str) -> bool:
        """True once per streak over the limit: the sender is told, then left alone until admitted again."""
        bucket = self._buckets.get(sender)
        if bucket is None or bucket.noticed:
            return False
        bucket.noticed = True
        return True

    def queue_full(self, waiting: int) -> bool:
        return 0 < self.policy.max_queued_turns <= waiting

    def _bucket(self, sender: str, now: float) -> _Bucket:
        bucket = self._buckets.get(sender)
        if bucket is None:
            bucket = self._buckets[sender] = _Bucket(float(self.policy.burst), now)
            while len(self._buckets) > self.max_senders:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(sender)
        return bucket


def charge_time(sent_at, wall_now: float, now: float) -> float:
    """When a message counts as sent on the buckets' clock (``now``, monotonic): as long before ``now`` as the
    platform's own send time (wall clock) is before ``wall_now``, where the platform gives one; an age below zero (a
    platform clock ahead of ours) counts as none, one over ``MAX_BACKLOG_S`` as that. Only the message's age crosses
    clocks, so a wall clock stepped back or forward shifts no bucket."""
    if isinstance(sent_at, bool) or not isinstance(sent_at, (int, float)) or sent_at != sent_at:
        return now
    return now - min(MAX_BACKLOG_S, max(0.0, wall_now - float(sent_at)))


def sender_of(payload: Mapping) -> Optional[str]:
    """Who sent an inbox item's event: the chat, and the user in it when the platform names one."""
    source = payload.get("source") or {}
    chat, user = source.get("chat_id"), source.get("user_id")
    if chat is None and user is None:
        return None
    return f"{chat}/{user}" if user is not None else str(chat)
