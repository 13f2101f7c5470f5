"""Split a reply into platform-sized messages without breaking code fences or characters. Pure functions.

A cut prefers, in order: a paragraph break, a line break, a sentence end, a space; only an unbroken run longer than
the limit is cut mid-word. A cut inside a fenced code block closes the fence at the end of that chunk and reopens it
(same marker, same info string, e.g. ```python) at the start of the next, so every chunk renders on its own.
"""
from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass
from typing import Optional

from actors.adapters.pacing import LengthFn

@dataclass(frozen=True)
class Chunk:
    """One planned message: ``text == opened + source[start:end] + closed``."""
    text: str
    start: int
    end: int
    opened: str = ""      # fence line added to reopen a code block cut by the previous chunk
    closed: str = ""      # fence line added to close a code block this chunk cuts


@dataclass(frozen=True)
class _Fence:
    char: str
    count: int
    info: str

    @property
    def marker(self) -> str:
        return self.char * self.count


_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
_SENTENCE_END = re.compile(r"[.!?…](?=\s)|[。！？]")
# Characters that belong to the character before them: cutting before one splits what the reader sees as one.
_JOINERS = {"\u200d", "\u20e3"}


class _FenceMap:
    """Which fence is open at any offset of the text (CommonMark rules, simplified to what chat renderers do)."""

    def __init__(self, text: str):
        self.text = text
        self.line_starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
        self.open_before: list[Optional[_Fence]] = []
        self.is_fence_line: list[bool] = []
        fence: Optional[_Fence] = None
        for index, start in enumerate(self.line_starts):
            end = self.line_starts[index + 1] - 1 if index + 1 < len(self.line_starts) else len(text)
            line = text[start:end].rstrip("\r")
            self.open_before.append(fence)
            fence, changed = _next_fence_state(fence, line)
            self.is_fence_line.append(changed)
        self.open_at_end = fence

    def _line_of(self, pos: int) -> int:
        return bisect.bisect_right(self.line_starts, pos) - 1

    def fence_at(self, pos: int) -> Optional[_Fence]:
        """The fence open just before ``pos`` (a fence line only changes the state once it is complete)."""
        if pos >= len(self.text):
            return self.open_at_end
        # Mid-line positions share the state before their line: a fence line changes it only once complete.
        return self.open_before[self._line_of(pos)]

    def cut_allowed(self, pos: int, chunk_start: int = 0) -> bool:
        """A cut must not split a fence line, nor leave a line part that a renderer would read as a fence line.

        The part before the cut starts at the chunk start when the chunk itself started mid-line.
        """
        if pos <= 0 or pos >= len(self.text):
            return True
        line = self._line_of(pos)
        start = self.line_starts[line]
        if pos == start:
            return True
        if self.is_fence_line[line]:
            return False
        end = self.line_starts[line + 1] - 1 if line + 1 < len(self.line_starts) else len(self.text)
        head, tail = self.text[max(start, chunk_start):pos], self.text[pos:end].rstrip("\r")
        return not _is_fence_like(head) and not _is_fence_like(tail)


def _is_fence_like(line: str) -> bool:
    match = _FENCE_OPEN.match(line)
    return match is not None and not (match.group(1)[0] == "`" and "`" in match.group(2))


def _next_fence_state(fence: Optional[_Fence], line: str) -> tuple[Optional[_Fence], bool]:
    if fence is None:
        if not _is_fence_like(line):
            return None, False
        marker, info = _FENCE_OPEN.match(line).groups()
        return _Fence(marker[0], len(marker), info.strip()), True
    match = _FENCE_CLOSE.match(line)
    if match and match.group(1)[0] == fence.char and len(match.group(1)) >= fence.count:
        return None, True
    return fence, False


def _char_boundary(text: str, pos: int) -> bool:
    """False where a cut would split a surrogate pair or detach a combining mark / joiner from its base."""
    if pos <= 0 or pos >= len(text):
        return True
    before, after = text[pos - 1], text[pos]
    if "\ud800" <= before <= "\udbff" and "\udc00" <= after <= "\udfff":
        return False
    if before in _JOINERS or after in _JOINERS or "\ufe00" <= after <= "\ufe0f":
        return False
    if "\U0001f3fb" <= after <= "\U0001f3ff":       # skin-tone modifier
        return False
    if "\U0001f1e6" <= before <= "\U0001f1ff" and "\U0001f1e6" <= after <= "\U0001f1ff":  # flag = 2 indicators
        return False
    return not unicodedata.combining(after) and unicodedata.category(after) not in ("Mn", "Me")


def _closing(body: str, fence: Optional[_Fence]) -> str:
    if fence is None:
        return ""
    return ("" if body.endswith("\n") else "\n") + fence.marker


def close_open_fence(text: str) -> str:
    """``text`` with the code block it ends inside of closed (by the marker that opened it, ``` or ~~~, as long as
    it was): what is appended after it then reads as prose, not as more code. Unchanged when no block is open."""
    return text + _closing(text, _FenceMap(text).open_at_end)


def paragraph_breaks(text: str) -> list[int]:
    """The offsets just after each blank line of ``text`` that is outside a code block, in order."""
    fences, breaks, pos = _FenceMap(text), [], 0
    while (pos := text.find("\n\n", pos)) >= 0:
        pos += 2
        if fences.fence_at(pos) is None:
            breaks.append(pos)
    return breaks


def _opening(fence: Optional[_Fence]) -> str:
    return "" if fence is None else fence.marker + fence.info + "\n"


class _Planner:
    def __init__(self, text: str, limit: int, length: LengthFn):
        self.text, self.limit, self.length = text, limit, length
        self.fences = _FenceMap(text)

    def _fits(self, start: int, end: int, head: str, tail: str) -> bool:
        return self.length(head + self.text[start:end] + tail) <= self.limit

    def _max_end(self, start: int, head: str, tail: str) -> int:
        """The furthest end such that head + text[start:end] + tail fits (length grows with end)."""
        lo, hi = start, len(self.text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._fits(start, mid, head, tail):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _usable(self, pos: int, chunk_start: int) -> bool:
        return _char_boundary(self.text, pos) and self.fences.cut_allowed(pos, chunk_start)

    def _best_cut(self, start: int, hard: int) -> int:
        window = self.text[start:hard]
        half = start + len(window) // 2
        def outside(p: int) -> bool:   # cutting between blocks needs no markers
            return self.fences.fence_at(p) is None

        def anywhere(_p: int) -> bool:
            return True

        tiers = [("\n\n", outside), ("\n", outside), ("\n\n", anywhere), ("\n", anywhere), ("sentence", anywhere),
                 (" ", anywhere)]
        for floor in (half, start + 1):
            for separator, acceptable in tiers:
                for cut in self._cuts_after(window, start, separator):
                    if cut < floor:
                        break
                    if cut <= hard and acceptable(cut) and self._usable(cut, start):
                        return cut
        for cut in range(hard, start, -1):          # an unbroken run: cut mid-word, but never mid-character
            if self._usable(cut, start):
                return cut
        for cut in range(hard, start, -1):
            if _char_boundary(self.text, cut):
                return cut
        return hard

    @staticmethod
    def _cuts_after(window: str, offset: int, separator: str):
        """Cut positions just after each separator, last first."""
        if separator == "sentence":
            for match in reversed(list(_SENTENCE_END.finditer(window))):
                yield offset + match.end() + 1 if window[match.end():match.end() + 1] == " " else offset + match.end()
            return
        pos = len(window)
        while (pos := window.rfind(separator, 0, pos)) >= 0:
            yield offset + pos + len(separator)

    def next_chunk(self, start: int) -> Chunk:
        fence = self.fences.fence_at(start)
        head = _opening(fence)
        reserve = ""
        for _ in range(8):
            hard = self._max_end(start, head, reserve)
            if hard <= start:
                break
            if hard == len(self.text):
                end = hard
            else:
                end = self._best_cut(start, hard)
            body = self.text[start:end]
            tail = _closing(body, self.fences.fence_at(end))
            if self._fits(start, end, head, tail):
                return Chunk(head + body + tail, start, end, head, tail)
            # The closing marker did not fit: reserve room for the longest one seen so far and cut earlier.
            reserve = max(reserve, "\n" + (self.fences.fence_at(end) or fence).marker, key=self.length)
        return self._without_fences(start)

    def _without_fences(self, start: int) -> Chunk:
        """The limit is too small for fence markers: send plain text rather than nothing."""
        hard = self._max_end(start, "", "")
        if hard <= start:
            raise ValueError(f"limit {self.limit} is too small for the character at offset {start}")
        end = hard if hard == len(self.text) else self._best_cut(start, hard)
        return Chunk(self.text[start:end], start, end)


def plan_chunks(text: str, limit: int, length: LengthFn = len) -> list[Chunk]:
    """Every chunk of ``text`` with its span in ``text``; the spans cover the text exactly, in order."""
    if limit <= 0:
        raise ValueError("limit must be positive")
    if text and _fits_whole(text, limit, length):
        # Most replies fit one message: without a fence marker in it, the planner's answer is the whole text, and
        # finding that out costs a scan of every character (the fence map) three times a reply.
        return [Chunk(text, 0, len(text))]
    planner = _Planner(text, limit, length)
    chunks, start = [], 0
    while start < len(text):
        chunk = planner.next_chunk(start)
        chunks.append(chunk)
        start = chunk.end
    return chunks


def _fits_whole(text: str, limit: int, length: LengthFn) -> bool:
    return "```" not in text and "~~~" not in text and length(text) <= limit


def split_message(text: str, limit: int, length: LengthFn = len) -> list[str]:
    """Split ``text`` into messages of at most ``limit`` (as measured by ``length``).

    Chunks whose own content is only whitespace are dropped: platforms refuse empty messages. An empty text gives
    no chunks.
    """
    return [chunk.text for chunk in plan_chunks(text, limit, length) if text[chunk.start:chunk.end].strip()]
