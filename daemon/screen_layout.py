"""Where text lands on a terminal, and what to write to change one text on screen into another (pure functions).

The terminal chat redraws a streaming answer in place: it moves the cursor up over the rows the previous preview
took and writes the new one from there. That needs the exact number of rows a text occupies at the terminal's width:
long lines wrap, CJK and emoji take two cells (``wcwidth``), combining marks none. Three things would make the count
depend on the terminal rather than the text, so ``lay_out`` removes them from the text it returns for writing:

* control characters (an escape sequence in a model's answer would move the cursor, or worse): each becomes U+FFFD;
  ``\\r\\n`` becomes ``\\n``;
* tabs, whose stops differ between terminals: spaces up to the next multiple of 8 of the row's column;
* a two-cell character that would start in a row's last cell: some terminals wrap it, some cut it in half. A space
  fills that cell first, so every terminal wraps it.

What is left wraps the same way everywhere: a row ends at a newline or when the next character does not fit, and
after a row filled to the last cell the cursor stays on it until the next character comes.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from wcwidth import wcwidth

TAB_STOP = 8
REPLACEMENT = "\ufffd"
CURSOR_UP = "\x1b[{}A"
CLEAR_TO_END = "\r\x1b[J"       # to the row's first column, then erase from there to the end of the screen


@dataclass(frozen=True)
class Layout:
    """``text`` as written to the terminal, and the offsets in it where each screen row begins (the first is 0).
    Written from the first column, it leaves the cursor on the last row."""
    text: str
    row_starts: tuple[int, ...]

    @property
    def rows(self) -> int:
        return len(self.row_starts)


def lay_out(text: str, width: int) -> Layout:
    """The layout of ``text`` on a terminal ``width`` cells wide."""
    width = max(1, width)
    out: list[str] = []
    starts = [0]
    length = 0                  # characters in out so far
    for number, line in enumerate(text.replace("\r\n", "\n").split("\n")):
        if number:
            out.append("\n")
            length += 1
            starts.append(length)
        if line.isascii() and line.isprintable():   # the common case: one cell a character, no copy made
            starts.extend(range(length + width, length + len(line), width))
            out.append(line)
            length += len(line)
            continue
        column = 0
        for char in line:
            if char == "\t":
                if column >= width:          # the row is full: the tab begins the next one
                    starts.append(length)
                    column = 0
                char = " " * (min(width, (column // TAB_STOP + 1) * TAB_STOP) - column)
                cells = len(char)
            else:
                cells = wcwidth(char)
                if cells < 0:
                    char, cells = REPLACEMENT, 1
            if cells and column + cells > width:
                if cells == 2 and column == width - 1 and width > 1:
                    out.append(" ")
                    length += 1
                if column:      # else a character wider than the whole row: it stays on its own
                    starts.append(length)
                    column = 0
            out.append(char)
            length += len(char)
            column += cells
    return Layout("".join(out), tuple(starts))


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix (bisection over slice comparisons: fast on long texts)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def redraw(old: Layout | None, new: Layout, screen_rows: int) -> str:
    """What to write so that a screen showing ``old`` (the cursor where writing it left it) shows ``new`` instead.

    A new text that extends the old one is appended. Otherwise the rows from the one where the two differ are
    erased and written again; rows the texts share stay as they are. Rows scrolled off the screen cannot be reached
    any more: then the redraw starts at the top of the screen, so the screen shows each row once (its part of the
    scrollback keeps the old rows)."""
    if old is None or not old.text:
        return new.text
    same = common_prefix(old.text, new.text)
    if same == len(old.text):
        return new.text[same:]
    # The last row that starts inside the shared prefix starts at the same offset in both layouts: where a row
    # begins depends only on the characters before it and the one at its start.
    row = max(0, bisect_left(old.row_starts, same) - 1)
    row = bisect_left(old.row_starts, old.row_starts[row])   # a line counted as several rows: from its first
    row = max(row, old.rows - max(1, screen_rows))
    up = old.rows - 1 - row
    start = new.row_starts[min(row, new.rows - 1)]
    return (CURSOR_UP.format(up) if up else "") + CLEAR_TO_END + new.text[start:]
