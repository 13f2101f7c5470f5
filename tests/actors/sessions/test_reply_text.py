"""actors/sessions/reply_text.py: what a reply shows, folded from the turn's stream events."""
from __future__ import annotations

import pytest

from actors.messages import LongToolHint, TextDelta, ToolCallFinished, ToolCallStarted, TurnEnd, WaitingForModel
from actors.sessions.reply_text import CURSOR, ReplyText

pytestmark = pytest.mark.timeout(10)


def test_a_preview_is_the_answer_so_far_with_the_tool_line_and_a_cursor():
    text = ReplyText()
    assert text.preview([]) is None, "nothing to show yet"
    text.apply(ToolCallStarted("c1", "search"))
    assert text.preview([]) == "\n\n⚙ search…" + CURSOR
    text.apply(LongToolHint("c1", "search", 12.4))
    assert text.preview([]).endswith("⚙ search… still working (12s)" + CURSOR)
    text.apply(ToolCallFinished("c1", "search", "{}", "3 hits", True))
    text.apply(TextDelta("Found "))
    assert text.preview([]) == "Found " + CURSOR, "a finished tool's line goes once the answer goes on"


def test_a_secret_split_across_deltas_is_redacted_in_the_preview():
    text = ReplyText()
    for part in ("the key is sk-", "live-1234567890", "abcdef and more"):
        text.apply(TextDelta(part))
    preview = text.preview(["sk-live-1234567890abcdef"])
    assert "1234567890" not in preview and "and more" in preview


def test_turn_end_sets_the_final_text_or_keeps_the_answer():
    text = ReplyText()
    text.apply(TextDelta("partial"))
    assert text.apply(TurnEnd("complete", None)) is True
    assert text.final_text() == "partial"
    other = ReplyText()
    assert other.apply(TextDelta("x")) is False
    other.apply(TurnEnd("complete", ""))
    assert other.final_text() == "…", "an empty answer still shows something"


def test_while_the_model_is_silent_the_preview_says_it_is_still_waiting_until_words_come():
    text = ReplyText()
    text.apply(WaitingForModel(5.2))
    assert text.preview([]) == "\n\n⏳ still waiting for the model… (5s)" + CURSOR
    text.apply(WaitingForModel(10.4))
    assert text.preview([]).endswith("(10s)" + CURSOR)
    text.apply(TextDelta("Here"))
    assert text.preview([]) == "Here" + CURSOR, "the sign goes once the answer starts"


def test_the_final_text_of_a_failed_turn_is_of_kind_error():
    failed, done = ReplyText(), ReplyText()
    failed.apply(TurnEnd("error", "The model service had an internal error."))
    done.apply(TurnEnd("complete", "Fine."))
    assert (failed.kind(), done.kind()) == ("error", "")


def run_two_tools(mode: str) -> list:
    """The previews a reply shows, event by event, for a turn that runs two tools around some text."""
    text, previews = ReplyText(mode), []
    for event in (WaitingForModel(5.0), ToolCallStarted("c1", "clock"), ToolCallFinished("c1", "clock", "{}", "9:00",
                                                                                          True),
                  TextDelta("It is nine. "), ToolCallStarted("c2", "calculator"),
                  LongToolHint("c2", "calculator", 11.0), ToolCallFinished("c2", "calculator", "{}", "err", False),
                  TextDelta("Done.")):
        text.apply(event)
        previews.append(text.preview([]))
    return previews


def test_tool_progress_bubble_is_one_live_line_gone_once_the_answer_goes_on():
    previews = run_two_tools("bubble")
    assert previews[1:4] == ["\n\n⚙ clock…" + CURSOR, "\n\n⚙ clock ✓" + CURSOR, "It is nine. " + CURSOR]
    assert previews[5] == "It is nine. \n\n⚙ calculator… still working (11s)" + CURSOR
    assert previews[7] == "It is nine. Done." + CURSOR


def test_tool_progress_lines_keeps_a_line_per_tool_call_under_the_answer():
    previews = run_two_tools("lines")
    assert previews[1] == "\n\n⚙ clock…" + CURSOR, "the wait for the model goes once a tool runs"
    assert previews[3] == "It is nine. \n\n⚙ clock ✓" + CURSOR
    assert previews[5] == "It is nine. \n\n⚙ clock ✓\n⚙ calculator… still working (11s)" + CURSOR
    assert previews[7] == "It is nine. Done.\n\n⚙ clock ✓\n⚙ calculator ✗" + CURSOR


def test_tool_progress_off_shows_no_tool_at_all():
    previews = run_two_tools("off")
    assert all("⚙" not in (p or "") for p in previews), previews
    assert previews[0] == "\n\n⏳ still waiting for the model… (5s)" + CURSOR, "the wait is not a tool's"
    assert previews[1] is None, "a tool runs: the model answered, and the tool is not shown"
    assert previews[7] == "It is nine. Done." + CURSOR
