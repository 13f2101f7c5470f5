"""`sessions show` as text: what it leaves out is said, and a failed turn's error is said once."""
from __future__ import annotations

import pytest

from daemon.cli_storage import _render_show

pytestmark = pytest.mark.timeout(10)

SESSION = {"session_id": "a0bd23e706f3aa", "state": "active", "session_key": "default.cli.dm.chat-1",
           "user": "cli:operator", "messages": 3, "created_at": 1.0, "updated_at": 2.0}


def event(seq: int, role: str, text: str, error: str = "") -> dict:
    payload = {"text": text, **({"error": error} if error else {})}
    return {"seq": seq, "created_at": 1.0, "role": role, "kind": "message", "payload": payload}


def test_the_events_left_out_before_the_last_ones_are_said():
    text = _render_show({"session": SESSION, "events": [event(4, "user", "hello"), event(5, "assistant", "hi")]})
    assert "  (#1 to #3 not shown: --last N shows more)" in text.splitlines(), text
    whole = _render_show({"session": SESSION, "events": [event(1, "user", "hello")]})
    assert "not shown" not in whole, whole


def test_a_failed_turn_whose_answer_is_its_error_says_it_once():
    failed = "The model service had an internal error. Please try again in a moment."
    text = _render_show({"session": SESSION, "events": [event(1, "assistant", failed, error=failed),
                                                         event(2, "assistant", "half an answer (stopped)",
                                                               error="the stream broke off")]})
    assert text.count(failed) == 1 and "(error)" in text, text
    assert "(error: the stream broke off)" in text, text
