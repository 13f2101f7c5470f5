"""What the tests of tool approvals answered with buttons share (test_telegram_approvals.py, test_discord_approvals.py,
test_slack_approvals.py, test_teams_approvals.py, test_googlechat_approvals.py, tests/webchat/test_browser_approvals.py):
the call the fake model asks for, the profiles that guard it, the question's words, the tool results the model read,
the waits on a platform's messages, and an approval's row."""
from __future__ import annotations

import sqlite3
from typing import Callable

from tests.actor_system import wait_for
from tests.fakes.openai_server import FakeOpenAIServer
from tests.pipeline.harness import CURSOR

CALL = ("calculator", '{"expression": "2+3*4"}')
QUESTION_START = "Let me compute.\n\nThe assistant wants to run calculator with "
PRESSABLE = "Press Approve or Deny, or reply \u201capprove "
# The default profile guards the calculator (and offers a second model to /model); ``hurried`` guards it too, with
# a 10 s deadline (the expiry tests' chats).
GUARDED_PROFILES = """
[profiles.default]
approve_tools = ["calculator"]
models = ["large-model"]

[profiles.hurried]
approve_tools = ["calculator"]
approval_timeout_s = 10
"""


def agent_toml(model: FakeOpenAIServer) -> str:
    """The [agent] table that makes ``model`` answer, without the pauses between streamed chunks."""
    return f"""
[agent]
chunk_delay_s = 0.0
kind = "openai"
base_url = "{model.base_url}"
model = "test-model"
api_key = "sk-test-key-0123456789abcdef"
"""


def agent_and_profiles(model: FakeOpenAIServer) -> str:
    """The [agent] table of the fake model and the guarded profiles (``GUARDED_PROFILES``), for a daemon's TOML."""
    return agent_toml(model) + GUARDED_PROFILES


def tool_results(model: FakeOpenAIServer, since: int) -> list[str]:
    """The tool results the model read after ``since``, each once (a request repeats the history before it)."""
    seen = {}
    for request in model.requests[since:]:
        for m in request.body["messages"]:
            if m.get("role") == "tool":
                seen[m.get("tool_call_id")] = m["content"]
    return list(seen.values())


def settled_messages(messages: Callable[[], list], text: str, count: int, where: str, timeout: float = 60) -> list:
    """The bot's messages (``messages()``, each with its text under ``text`` and ``deleted``) once there are
    ``count`` and none is streaming."""
    def done():
        shown = [m for m in messages() if not m["deleted"]]
        return len(shown) >= count and all(CURSOR not in m[text] for m in shown) and shown
    return wait_for(done, timeout, 0.05, f"{count} settled message(s) in {where}: "
                                         f"{[m[text][-80:] for m in messages()]}")


def edited_question(message: Callable[[], dict], text: str, ending: str, buttons: Callable[[dict], dict],
                    timeout: float = 60) -> dict:
    """The question (``message()``) once edited to end with ``ending``: the how-to-answer sentence gone with its
    buttons, the rest as asked."""
    now = wait_for(lambda: (m := message())[text].endswith(ending) and m, timeout, 0.05,
                   f"the question edited to end with {ending!r}: {message()[text][-120:]!r}")
    assert buttons(now) == {} and PRESSABLE not in now[text], now
    assert now[text].startswith(QUESTION_START), now
    return now


def approval_row(gw, chat_id: str) -> tuple:
    """The one approval of ``chat_id`` in the daemon's database: (state, answer, answered_by, outcome)."""
    with sqlite3.connect(gw.state / "gateway.db") as db:
        [row] = db.execute("SELECT state, answer, answered_by, outcome FROM approvals WHERE chat_id = ?",
                           (chat_id,)).fetchall()
    return row
