"""actors/adapters/cli/adapter.py's pure parts: whether the turn that answered a terminal line failed (``chat --message``
exits 1 then), and what is kept for a user whose terminal is not known (unseen.py). The adapter itself runs in
pipeline/test_terminal_chat.py and the conformance suite."""
from __future__ import annotations

import pytest

from actors.adapters.cli.adapter import turn_error
from actors.adapters.cli.unseen import UnseenShows
from actors.messages import CliShow
from actors.sessions.turn import assistant_event
from storage.inbox import InboxRow
from storage.sessions import TranscriptEvent

pytestmark = pytest.mark.timeout(20)


def row(seq: int, state: str = "done", reason=None) -> InboxRow:
    return InboxRow(seq, "k", "cli", f"m{seq}", state, {}, 0.0, 0.0, reason)


def user(turn_id: str, seq: int) -> TranscriptEvent:
    return TranscriptEvent("user", "message", {"text": "hi", "inbound_seq": seq}, turn_id)


def answer(turn_id: str, reason: str = "complete", error=None) -> TranscriptEvent:
    event = assistant_event(turn_id, "the answer", reason, error)
    return TranscriptEvent(event["role"], event["kind"], event["payload"], turn_id)


def test_a_turn_that_answered_is_no_failure():
    assert turn_error(row(7), [user("t1", 7), answer("t1")]) is None


def test_the_error_recorded_with_the_answer_of_the_rows_turn():
    transcript = [user("t1", 6), answer("t1", "error", "The agent failed (boom)."), user("t2", 7), answer("t2")]
    assert turn_error(row(6), transcript) == "The agent failed (boom)."
    assert turn_error(row(7), transcript) is None


def test_a_merged_or_steered_row_shares_the_outcome_of_its_turn():
    transcript = [user("t1", 4), user("t1", 5), answer("t1", "error", "gave up")]
    assert turn_error(row(4), transcript) == turn_error(row(5), transcript) == "gave up"


def test_a_row_without_a_turn_is_no_failure_and_a_dropped_row_is_one():
    assert turn_error(row(9), [user("t1", 7), answer("t1", "error", "x")]) is None   # a command: no model turn
    assert turn_error(row(9, "dropped", "sender not allowed"), []) == "sender not allowed"
    assert turn_error(row(9, "dropped"), []) == "the message was not answered"


# ------------------------------------------------------------------ what a terminal not yet known was shown

def test_what_no_terminal_saw_is_kept_as_it_stands_now_in_order_and_taken_once():
    unseen = UnseenShows()
    unseen.keep("ann", CliShow("send", "m1", "draft"))
    unseen.keep("ann", CliShow("edit", "m1", "final"))
    unseen.keep("ann", CliShow("edit", "m0", "an earlier message, edited"))
    unseen.keep("ann", CliShow("send", "m2", "gone"))
    unseen.keep("ann", CliShow("delete", "m2"))
    unseen.keep("ann", CliShow("typing", ""))
    unseen.keep("bob", CliShow("send", "b1", "for bob"))
    assert unseen.take("ann") == [CliShow("send", "m1", "final"), CliShow("edit", "m0", "an earlier message, edited")]
    assert unseen.take("ann") == []
    assert unseen.take("bob") == [CliShow("send", "b1", "for bob")]


def test_what_is_kept_is_bounded_per_user_and_in_users():
    unseen = UnseenShows(max_users=2, max_messages=3)
    for i in range(5):
        unseen.keep("ann", CliShow("send", f"m{i}", str(i)))
    unseen.keep("bob", CliShow("send", "b", "b"))
    unseen.keep("cat", CliShow("send", "c", "c"))
    assert unseen.take("ann") == []       # the user heard of longest ago is forgotten first
    assert [s.message_id for s in unseen.take("bob")] == ["b"]
    unseen = UnseenShows(max_users=2, max_messages=3)
    for i in range(5):
        unseen.keep("ann", CliShow("send", f"m{i}", str(i)))
    assert [s.message_id for s in unseen.take("ann")] == ["m2", "m3", "m4"]
