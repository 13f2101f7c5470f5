"""daemon/terminal_view.py: a failed turn in the terminal chat ends with its error apart from the answer, in red on a
terminal, with the /retry hint; what the model said before it failed stays as an answer."""
from __future__ import annotations

import io

import pyte
import pytest

from daemon.terminal_view import CURSOR, LiveView, PipedView, end_failed, error_lines, failed_answer

pytestmark = pytest.mark.timeout(10)

NOTICE = "The model service had an internal error. Please try again in a moment."


def screen_of(output: str, columns: int = 60, lines: int = 12) -> list[str]:
    """What an xterm-like terminal shows (with the tty's \\n -> \\r\\n)."""
    emulator = pyte.Screen(columns, lines)
    pyte.Stream(emulator).feed(output.replace("\n", "\r\n"))
    return [row.rstrip() for row in emulator.display]


def test_the_notice_the_answer_ends_with_is_taken_off_it():
    assert failed_answer(f"Half an answer\n\n{NOTICE}", NOTICE) == "Half an answer"
    assert failed_answer(NOTICE, NOTICE) == ""
    assert failed_answer("Other words" + CURSOR, NOTICE) == "Other words"


def test_the_error_says_error_and_how_to_retry_in_red_only_on_a_terminal():
    assert error_lines(NOTICE, colour=False) == f"error: {NOTICE}\n(/retry sends your message again)\n"
    assert error_lines(NOTICE, colour=True).startswith("\x1b[1;31merror:")


def test_on_a_terminal_the_error_takes_the_notice_place_once(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = io.StringIO()
    view = LiveView(out, size=lambda: (60, 12))
    view.show("m1", "Half an" + CURSOR)
    view.show("m1", f"Half an answer\n\n{NOTICE}")
    end_failed(view, NOTICE)
    rows = [row for row in screen_of(out.getvalue()) if row]
    assert rows[0] == "Half an answer" and rows[-1] == "(/retry sends your message again)", rows
    assert "".join(rows[1:-1]) == f"error: {NOTICE}", rows


def test_into_a_pipe_the_answer_then_the_error_plain():
    out = io.StringIO()
    view = PipedView(out)
    view.show("m1", NOTICE)
    end_failed(view, NOTICE)
    assert out.getvalue() == f"error: {NOTICE}\n(/retry sends your message again)\n"
