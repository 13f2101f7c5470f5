"""daemon/screen_layout.py, daemon/markdown_rows.py and daemon/terminal_view.py: rows a text takes, what a redraw
writes, and the screen a stream of previews leaves, rendered by a terminal emulator (pyte) rather than read as
bytes. An answer on a terminal is drawn as its markdown rendering."""
from __future__ import annotations

import io

import pyte
import pytest
from hypothesis import given, settings, strategies as st

from daemon.screen_layout import CLEAR_TO_END, REPLACEMENT, common_prefix, lay_out, redraw
from daemon.markdown_rows import STYLE, rendered, rows_of
from daemon.terminal_view import CURSOR, Answer, LiveView, PipedView

pytestmark = pytest.mark.timeout(60)


def screen_of(data: str, columns: int, lines: int = 30) -> list[str]:
    """What a person sees after ``data`` reached an xterm-like terminal (with the tty's \\n -> \\r\\n)."""
    screen = pyte.Screen(columns, lines)
    pyte.Stream(screen).feed(data.replace("\n", "\r\n"))
    return [row.rstrip() for row in screen.display]


# ------------------------------------------------------------------------------------------------------ lay_out

def test_rows_of_plain_lines_wrap_at_the_width():
    assert lay_out("", 10).row_starts == (0,)
    assert lay_out("a" * 10, 10).rows == 1          # filled to the last cell: the cursor stays on the row
    assert lay_out("a" * 11, 10).row_starts == (0, 10)
    assert lay_out("a" * 10 + "\nb", 10).row_starts == (0, 11)
    assert lay_out("ab\n", 10).row_starts == (0, 3)  # a trailing newline: the cursor is on a new, empty row
    assert lay_out("x\n\n" + "y" * 25, 10).row_starts == (0, 2, 3, 13, 23)


def test_a_wide_character_that_would_start_in_the_last_cell_starts_the_next_row():
    layout = lay_out("abc世界x", 4)
    assert layout.text == "abc 世界x" and layout.row_starts == (0, 4, 6)
    assert lay_out("世界世", 4).row_starts == (0, 2)      # 4 cells fill the row exactly
    assert lay_out("é\u0301" * 3, 2).row_starts == (0, 4)  # combining marks take no cell


def test_control_characters_are_replaced_and_tabs_become_spaces():
    layout = lay_out("a\tb\x1b[2J\r\nc\rd", 80)
    assert layout.text == "a" + " " * 7 + "b" + REPLACEMENT + "[2J\nc" + REPLACEMENT + "d"
    assert lay_out("abcdefgh\tx", 8).text == "abcdefgh" + " " * 8 + "x"   # a tab after a full row: the next one
    assert lay_out("abcdefgh\tx", 8).row_starts == (0, 8, 16)


@pytest.mark.parametrize("text", ["plain", "a" * 59 + "世" * 30, "tab\there\n\n```\ncode\n```", "e\u0301" * 50,
                                  "x" * 60 + "\n" + "y" * 120, "世" * 31])
def test_the_row_count_is_what_the_terminal_shows(text):
    layout = lay_out(text, 60)
    screen = pyte.Screen(60, 40)
    pyte.Stream(screen).feed(layout.text.replace("\n", "\r\n"))
    assert screen.cursor.y + 1 == layout.rows


def test_common_prefix():
    assert common_prefix("", "abc") == 0
    assert common_prefix("abc", "abd") == 2
    assert common_prefix("abc", "abc") == 3
    assert common_prefix("x" * 5000 + "a", "x" * 5000 + "b") == 5000


# ------------------------------------------------------------------------------------------------------ redraw

def test_an_extension_is_appended_where_the_cursor_is():
    assert redraw(None, lay_out("hello", 20), 24) == "hello"
    assert redraw(lay_out("hello", 20), lay_out("hello world", 20), 24) == " world"


def test_a_change_rewrites_from_the_row_where_the_texts_differ():
    old = lay_out("first line\nsecond line\n```" + CURSOR + "\n```", 80)
    new = lay_out("first line\nsecond line\n```\nthird" + CURSOR + "\n```", 80)
    # The cursor is on row 3 (the closing fence); row 2 is the first that differs: up one, clear, write from row 2.
    assert redraw(old, new, 24) == "\x1b[1A" + CLEAR_TO_END + "```\nthird" + CURSOR + "\n```"


def test_a_redraw_never_moves_above_the_top_of_the_screen():
    old = lay_out("\n".join(f"line {n}" for n in range(50)), 80)
    new = lay_out("changed\n" + "\n".join(f"line {n}" for n in range(1, 50)), 80)
    out = redraw(old, new, 10)
    assert out.startswith("\x1b[9A" + CLEAR_TO_END)     # up 9 rows: the top of a 10-row screen
    assert out.endswith("line 40\n" + "\n".join(f"line {n}" for n in range(41, 50)))


def shown_after(previews: list[str], columns: int, lines: int = 30) -> list[str]:
    """The screen after each preview was drawn (``flush``: as when the terminal has read all that came), then the
    end."""
    out = io.StringIO()
    view = LiveView(out, size=lambda: (columns, lines))
    for text in previews:
        view.show("m1", text)
        view.flush()
    view.end()
    return screen_of(out.getvalue(), columns, lines)


def drawn(text: str, columns: int, lines: int = 30) -> list[str]:
    """The screen showing ``text`` rendered alone, and the line below it."""
    return screen_of(rendered(text, columns).text + "\n", columns, lines)


def test_previews_of_an_answer_with_a_code_block_leave_it_on_screen_once():
    final = 'You said: "hi 世界"\n\nSome prose that is longer than the terminal is wide, so it wraps.\n\n```toml\n' \
            '[agent]\nkind = "openai"     # a comment that wraps too, past the edge\n```'
    previews = [final[:n] + CURSOR + ("\n```" if final.count("```", 0, n) % 2 else "")
                for n in range(1, len(final), 7)]
    assert shown_after(previews + [final], 30) == drawn(final, 30)


# No combining marks: pyte, unlike xterm, wraps before one that follows a full row (lay_out's own test covers them).
alphabet = st.sampled_from(list("ab `\n\t世界é") + ["\x1b", CURSOR, "\n```"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(alphabet, max_size=40).map("".join), min_size=1, max_size=8),
       st.integers(min_value=2, max_value=30))
def test_any_sequence_of_previews_leaves_the_final_text_on_screen_once(texts, columns):
    """Whatever the previews were (extensions, rewrites, shorter, longer), the screen ends as if the final text
    alone had been written: nothing of a preview is left over, nothing is shown twice."""
    final = texts[-1].replace(CURSOR, "")      # an answer that ends on a preview ends without its cursor
    assert shown_after(texts, columns, 200) == drawn(final, columns, 200)


# ------------------------------------------------------------------------------------------------------ views

def test_answer_joins_its_parts_and_ignores_a_late_copy_of_an_ended_one():
    answer = Answer()
    assert answer.show("a", "one") and answer.show("b", "two")
    assert not answer.show("a", "one")
    assert answer.text() == "one\ntwo"
    assert answer.end() == "one\ntwo" and answer.text() == ""
    assert not answer.show("b", "two")           # the final edit arriving again after the end
    assert answer.show("b", "two, edited later")  # a real change is shown


def test_the_piped_view_writes_the_answer_once_when_it_ends():
    out = io.StringIO()
    view = PipedView(out)
    for n in range(1, 6):
        view.show("m1", "word " * n + CURSOR + "\n```")
    assert out.getvalue() == ""
    view.show("m1", "word " * 5)
    view.end()
    assert out.getvalue() == "word " * 5 + "\n"


def test_a_redraw_is_one_write_and_the_answer_ends_on_its_own_line():
    writes: list[str] = []

    class Out(io.StringIO):
        def write(self, text):
            writes.append(text)
            return super().write(text)
    view = LiveView(Out(), size=lambda: (20, 10))
    view.show("m1", "abc" + CURSOR)
    view.show("m1", "abcdef" + CURSOR)
    view.flush()
    view.end()
    assert len(writes) == 3 and writes[-1].endswith("\n")
    assert screen_of("".join(writes), 20, 10)[:2] == ["abcdef", ""]


# ------------------------------------------------------------------------------------------------ markdown_rows

def test_markdown_is_rendered_and_wrapped_at_word_boundaries():
    text = "# Title\n\nSome **bold** words and `code` that wrap past the edge of it.\n\n- one\n- two"
    rows = drawn(text, 24)
    assert "**" not in "".join(rows) and "#" not in "".join(rows) and "`" not in "".join(rows), rows
    words = [word for row in rows for word in row.replace("•", " ").split()]
    assert words == ["Title", "Some", "bold", "words", "and", "code", "that", "wrap", "past", "the", "edge", "of",
                     "it.", "one", "two"], rows


def test_what_the_model_wrote_never_drives_the_terminal():
    layout = rendered("a \x1b]0;title\x07 b\x1b[2J <b>html</b> [link](http://x.y)", 60)
    assert "\x1b]" not in layout.text and "\x07" not in layout.text and "\x1b[2J" not in layout.text
    plain = STYLE.sub("", layout.text)
    assert "<b>html</b>" in plain and "link (http://x.y)" in plain, plain


def test_a_rendered_line_wider_than_the_terminal_is_counted_as_the_rows_it_takes():
    """Where rich and the terminal disagree on a width: the line is rewritten whole, from its first row."""
    old = rows_of("\x1b[1m" + "x" * 25 + "\x1b[0m\nnext", 10)
    assert old.rows == 4 and old.row_starts[:3] == (0, 0, 0)
    new = rows_of("\x1b[1m" + "x" * 20 + "y" * 5 + "\x1b[0m\nnext", 10)     # differs in the line's third row
    assert screen_of(old.text + redraw(old, new, 30), 10)[:5] == ["x" * 10, "x" * 10, "y" * 5, "next", ""]
