"""An answer's markdown as the rows a terminal shows it in (pure functions; rich renders, this counts).

The terminal chat draws each preview of a streaming answer rendered: headings, emphasis, lists, tables, code
blocks highlighted on their background, paragraphs wrapped at word boundaries to the terminal's width (rich's
``Markdown``). Every preview is rendered whole, from its full text, and the screen is changed from the first row
that differs (``screen_layout.redraw``), so the screen always shows exactly the rendering of the text received so
far. Partial markdown cannot garble it: an emphasis not closed yet shows its asterisks until it is, a table shows
as text until its separator row comes, and an open code block is already closed by the gateway's preview (the
closing fence follows the cursor). Rendering only once the answer is complete would show plain text while it
streams and then swap it for a different picture, and rows scrolled off the screen by then would keep the plain
one; rich's ``Live`` would own the screen and crop an answer taller than it.

What the model wrote never drives the terminal: control characters become U+FFFD before rendering (rich passes an
escape sequence through), links are written as "text (url)" rather than as terminal hyperlinks, and HTML is shown as
the text it is (rich would drop it: an answer about ``<stdio.h>`` would lose it).

A rendered row is at most as wide as the terminal; where rich and ``wcwidth`` disagree on a character's width, the
row is counted the way ``screen_layout.lay_out`` counts (the terminal's way), so the redraw's arithmetic holds.
"""
from __future__ import annotations

import io
import re

from markdown_it import MarkdownIt
from rich.console import Console
from rich.markdown import Markdown

from daemon.screen_layout import REPLACEMENT, Layout, lay_out

STYLE = re.compile(r"\x1b\[[0-9;]*m")          # what rich writes between the characters: SGR (colours, bold)
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")   # all C0 and C1 controls but tab and newline


class ChatMarkdown(Markdown):
    """rich's Markdown, with HTML read as text and links as "text (url)"."""

    def __init__(self, markup: str) -> None:
        super().__init__("", hyperlinks=False)
        self.markup = markup
        self.parsed = (MarkdownIt().enable("strikethrough").enable("table")
                       .disable(["html_block", "html_inline"]).parse(markup))


def sanitised(text: str) -> str:
    return CONTROLS.sub(REPLACEMENT, text.replace("\r\n", "\n"))


def rendered(text: str, width: int) -> Layout:
    """``text`` (markdown) rendered for a terminal ``width`` cells wide: what to write, and where its rows begin."""
    width = max(1, width)
    console = Console(file=io.StringIO(), width=width, force_terminal=True, highlight=False, emoji=False,
                      markup=False, legacy_windows=False)
    console.print(ChatMarkdown(sanitised(text)), end="")
    lines = [line.rstrip(" ") for line in console.file.getvalue().split("\n")]   # padding to the width: not needed
    while lines and not lines[-1]:
        lines.pop()
    return rows_of("\n".join(lines), width)


def rows_of(styled: str, width: int) -> Layout:
    """The layout of lines already rendered (SGR styles between their characters) on a terminal ``width`` wide. A
    line wider than that takes several rows, each counted as starting where the line does (``redraw`` rewrites such
    a line whole)."""
    starts: list[int] = []
    offset = 0
    for line in styled.split("\n"):
        starts.extend([offset] * lay_out(STYLE.sub("", line), width).rows)
        offset += len(line) + 1
    return Layout(styled, tuple(starts))
