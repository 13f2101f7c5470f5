"""When a streaming reply deserves an edit: the consumer's throttle over a platform's pacing. Pure: the caller passes
``now`` (seconds on any monotonic clock)."""
from __future__ import annotations

from typing import Optional

from actors.adapters.pacing import PlatformPacing


def _changed_chars(old: str, new: str) -> int:
    """How many characters of ``new`` the reader has not seen: everything after the common prefix."""
    common = 0
    for a, b in zip(old, new):
        if a != b:
            break
        common += 1
    return max(len(old), len(new)) - common


class EditThrottle:
    """Decides whether a streaming message deserves an edit now. The final edit is never skipped."""

    def __init__(self, pacing: PlatformPacing):
        self.pacing = pacing
        self.shown_text = ""
        self.last_edit_at: Optional[float] = None

    def should_edit(self, now: float, pending_text: str, final: bool = False) -> bool:
        if final:
            return True
        if not self.pacing.supports_edit or pending_text == self.shown_text:
            return False
        if self.last_edit_at is not None and now - self.last_edit_at < self.pacing.edit_interval_s:
            return False
        return _changed_chars(self.shown_text, pending_text) >= max(1, self.pacing.min_edit_delta_chars)

    def next_edit_at(self) -> float:
        """The earliest time an intermediate edit could be allowed (for the caller's wake-up timer)."""
        if self.last_edit_at is None:
            return float("-inf")
        return self.last_edit_at + self.pacing.edit_interval_s

    def record(self, now: float, shown_text: str) -> None:
        """The platform now shows ``shown_text`` (after a send or an edit)."""
        self.shown_text = shown_text
        self.last_edit_at = now
