"""How fast and how much a platform lets us write (``PlatformPacing``: each platform's row is in its folder's
platform.py), the per-chat token bucket spent by it, and the pure deciders built on them (docs/design.md §5).

Every function takes ``now`` (seconds on any monotonic clock) from the caller: no hidden clock, easy to test.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from common.config import SCHEMA, setting


@dataclass(frozen=True)
class PlatformPacing:
    platform: str
    text_limit: int                  # per message, measured with ``length``
    length: str                      # 'chars' | 'utf16' | 'bytes' | 'escaped' (see LENGTH_FUNCTIONS below)
    edit_interval_s: float           # least time between two edits of one streaming message
    min_edit_delta_chars: int        # an intermediate edit must show at least this much new text
    per_chat_ops_per_s: float        # sends and edits together, per chat
    per_chat_burst: int
    supports_edit: bool
    typing_interval_s: Optional[float]  # resend the typing indicator this often; None: the platform has none
    group_ops_per_s: Optional[float] = None  # a stricter rate for groups, where the platform has one
    # A send carries a key the platform deduplicates on (Discord's nonce): a send whose answer was lost may go again
    # with the same key and no visible mark. Without it a re-sent reply says so (resent_marker below).
    idempotent_send: bool = False
    # The adapter can find the copy a lost send left, in chats of type dm (actors/adapters/lost_copies.py): the
    # sender asks it (PlatformOp "find_lost") before it falls back to the re-sent mark.
    finds_lost_copies: bool = False
    # Edits and deletes of the whole app, across its chats, where the platform limits them by method rather than by
    # chat (Slack's chat.update and chat.delete are Tier 3: about 50 per minute per workspace; DingTalk's AI card
    # calls, creates too, share the app's QPS). Spent by the adapter (ChatBudgets.app_turn). None: no such limit.
    app_edit_ops_per_s: Optional[float] = None
    app_edit_burst: int = 1
    # Files a reply carries (actors/sessions/reply_files.py): whether the adapter sends them (``send_file``), the
    # largest upload, the largest image shown inline (a larger one goes as a document), the caption's limit (in
    # ``length`` units). A platform without files shows a line in the reply's text for each instead.
    sends_files: bool = False
    # A reply's voice note (``OutgoingFile.kind == "voice"``) goes as one; without it the note is left out (its text
    # is the reply's already).
    sends_voice: bool = False
    # The bot can set a reaction on a user's message (the turn's status: [sessions] status_reactions).
    supports_reactions: bool = False
    upload_limit_bytes: int = 50 * 1024 * 1024
    photo_limit_bytes: int = 10 * 1024 * 1024
    caption_limit: int = 1024


# For a platform no folder declares: small messages, slow, no edits; safe anywhere.
DEFAULT_PACING = PlatformPacing("default", 2000, "chars", edit_interval_s=0.0, min_edit_delta_chars=0,
                                per_chat_ops_per_s=1.0, per_chat_burst=3, supports_edit=False,
                                typing_interval_s=None)


class ChatBudget:
    """A token bucket for one chat, spent by sends and edits alike.

    A platform's 429 (``flood``) blocks the bucket until the time it named; afterwards one operation may go at once.

    ``spent_at``: the bucket was empty at that time and has only refilled since. An adapter passes the time it
    started: what its previous life sent just before dying is unknown, and an empty bucket at start is the one
    assumption that can never exceed the platform's budget, because nothing was sent between the death and the
    start. It costs nothing to keep (no write per operation) and at most one refill interval of delay, only for a
    chat written to within that interval of a restart; a periodic high-water mark would save that delay at the
    price of writes and of a window where the mark is stale.
    """

    def __init__(self, ops_per_s: float, burst: int, now: float = 0.0, spent_at: Optional[float] = None):
        if ops_per_s <= 0 or burst < 1:
            raise ValueError("ops_per_s must be positive and burst at least 1")
        self.ops_per_s = ops_per_s
        self.burst = burst
        self._tokens = float(burst)
        self._updated = now
        self._blocked_until = float("-inf")
        if spent_at is not None:
            self._tokens, self._updated = 0.0, spent_at
            self._refill(now)

    @classmethod
    def for_platform(cls, pacing: PlatformPacing, chat_type: str = "dm", now: float = 0.0,
                     spent_at: Optional[float] = None) -> "ChatBudget":
        rate = pacing.per_chat_ops_per_s
        if chat_type != "dm" and pacing.group_ops_per_s is not None:
            rate = min(rate, pacing.group_ops_per_s)
        return cls(rate, pacing.per_chat_burst, now, spent_at)

    def _refill(self, now: float) -> None:
        elapsed = now - self._updated
        if elapsed > 0:      # a clock read out of order must not drain the bucket
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.ops_per_s)
            self._updated = now

    def wait_time(self, now: float) -> float:
        """Seconds until one operation may go (0.0: now)."""
        if now < self._blocked_until:
            return self._blocked_until - now
        self._refill(now)
        if self._tokens >= 1.0:
            return 0.0
        return (1.0 - self._tokens) / self.ops_per_s

    def consume(self, now: float) -> None:
        """Record one operation sent at ``now``. Sending without waiting drives the bucket negative, as it should."""
        self._refill(now)
        self._tokens -= 1.0

    def flood(self, until: float) -> None:
        """The platform said "retry after": nothing goes before ``until``, then one operation may."""
        self._blocked_until = max(self._blocked_until, until)
        self._tokens = 1.0
        self._updated = max(self._updated, self._blocked_until)

    @property
    def blocked_until(self) -> float:
        return self._blocked_until


def on_monotonic_clock(wall_time: float, wall_now: float, monotonic_now: float) -> float:
    """A moment stored as wall-clock time (the only clock a later process can read), on this process's monotonic
    clock. A moment already past maps to now; a wall clock stepped between the writing and the reading shifts the
    result by the step, which for a ban of a few seconds errs by at most the step."""
    return monotonic_now + max(0.0, wall_time - wall_now)


# ------------------------------------------------------------------ how a platform counts length

LengthFn = Callable[[str], int]


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, as Telegram counts: a character outside the BMP (most emoji) counts 2."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def escaped_len(text: str) -> int:
    """Length once ``&``, ``<`` and ``>`` are written as ``&amp;``, ``&lt;``, ``&gt;`` (Slack counts the text as
    sent, and the adapter escapes every one of them: actors/adapters/slack/formatting.py)."""
    return len(text) + 4 * text.count("&") + 3 * (text.count("<") + text.count(">"))


LENGTH_FUNCTIONS: dict[str, LengthFn] = {"chars": len, "utf16": utf16_len, "bytes": utf8_len,
                                         "escaped": escaped_len}


# ----------------------------------------------- the re-send marker and the room every chunk leaves for it

DEFAULT_RESENT_MARKER = SCHEMA["sessions"]["resent_marker"][1]


def resent_marker(config: dict) -> str:
    return setting(config, "sessions", "resent_marker") or DEFAULT_RESENT_MARKER


def chunk_limit(pacing, length, marker: str) -> int:
    """Every chunk leaves room for the marker line, so marking a reply later (here or in the sweeper) never pushes
    its first part over the platform's limit and never moves the parts already on the platform."""
    if pacing.idempotent_send:
        return pacing.text_limit
    return max(pacing.text_limit // 2, pacing.text_limit - length(marker) - 1)
