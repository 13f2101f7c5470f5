"""`sessions show` as text: what it leaves out is said, and a failed turn's error is said once; `sessions export`
refuses '-' rather than writing a file of that name."""
from __future__ import annotations

import os
import subprocess

import pytest

from daemon.cli_output import EX_USAGE
from daemon.cli_storage import _render_show
from tests.gateway import PYTHON, ROOT

pytestmark = pytest.mark.timeout(40)

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


def test_an_export_to_a_dash_is_refused_rather_than_written_to_a_file_named_dash(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), GATEWAY_STATE_DIR=str(tmp_path / "state"),
               GATEWAY_CONFIG=str(tmp_path / "none.toml"), HOME=str(tmp_path))
    (tmp_path / "none.toml").write_text("")
    done = subprocess.run([PYTHON, str(ROOT / "run_gateway.py"), "sessions", "export", "abc", "-", "--format",
                           "markdown"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert done.returncode == EX_USAGE and "'-' would be a file named '-'" in done.stderr, done
    assert not (tmp_path / "-").exists()
