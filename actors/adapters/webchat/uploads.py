"""Files a visitor uploads (``POST /upload``) until a message names them: bounded per visitor, pure bookkeeping.

An upload is cached at once (its bytes under their hash, storage/media.py) and remembered here as the attachment a
message will carry; the message frame names it by that hash (``files``). What survives kill -9: the file in the
cache, not this book. A message sent again after a restart names a hash this life never saw: it is taken from the
cache, described again from its bytes (the caller does it), which is safe because naming a hash means knowing the
file's content already. An upload no message ever names is swept with the cache's unreferenced files after an hour.

The bounds keep one visitor from filling the disk: at most ``per_window`` uploads in ``window_s`` seconds, each at
most the web chat's cap (actors/media/limits.py), and the book itself keeps the newest ``kept`` uploads.
"""
from __future__ import annotations

import collections
from typing import Optional

UPLOADS_PER_WINDOW = 20
UPLOAD_WINDOW_S = 600.0
UPLOADS_KEPT = 10_000
MAX_FILES_PER_MESSAGE = 10


class Uploads:
    def __init__(self, per_window: int = UPLOADS_PER_WINDOW, window_s: float = UPLOAD_WINDOW_S,
                 kept: int = UPLOADS_KEPT):
        self.per_window, self.window_s, self.kept = per_window, window_s, kept
        self._times: dict[str, collections.deque] = {}
        self._files: collections.OrderedDict[tuple[str, str], dict] = collections.OrderedDict()

    def full(self, visitor: str, now: float) -> bool:
        """Whether the visitor has used every upload of the window (nothing is counted)."""
        times = self._times.get(visitor)
        return times is not None and len([t for t in times if now - t < self.window_s]) >= self.per_window

    def allow(self, visitor: str, now: float) -> bool:
        """Whether the visitor may upload one more file now (and count it if so)."""
        times = self._times.setdefault(visitor, collections.deque())
        while times and now - times[0] >= self.window_s:
            times.popleft()
        if len(times) >= self.per_window:
            return False
        times.append(now)
        if len(self._times) > self.kept:           # visitors who stopped uploading long ago
            for stale in [v for v, t in self._times.items() if not t or now - t[-1] >= self.window_s]:
                del self._times[stale]
        return True

    def remember(self, visitor: str, attachment: dict) -> None:
        self._files[(visitor, attachment["cache_key"])] = attachment
        self._files.move_to_end((visitor, attachment["cache_key"]))
        while len(self._files) > self.kept:
            self._files.popitem(last=False)

    def get(self, visitor: str, key: str) -> Optional[dict]:
        return self._files.get((visitor, key))
