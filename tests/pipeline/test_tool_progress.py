"""Tool progress per profile through the real daemon, the fake Bot API (every version of every message is kept)
and the fake OpenAI-compatible server, whose model calls two built-in tools (clock, calculator) in one round. The
request that carries the tools' results is held, so the reply's preview is drawn while both tools are done and the
answer is not there yet; each profile's mode decides what that preview shows: ``bubble`` (the default) the last
tool's line, ``lines`` a line for each tool call, ``off`` none (the wait for the model's words, only)."""
from __future__ import annotations

import pytest

from tests.actor_system import wait_for
from tests.fakes.openai_server import FakeOpenAIServer, text_reply, tool_call_reply
from tests.fakes.telegram import FakeTelegram
from tests.pipeline.harness import telegram_gateway
from tests.pipeline.test_telegram_e2e import ledger_busy

pytestmark = pytest.mark.timeout(240)
CHATS = {"off": 91, "lines": 92, "bubble": 93}


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    routes = "".join(f"""
[profiles.progress-{mode}]
tool_progress = "{mode}"

[[routes]]
adapter = "telegram"
chat = {chat}
profile = "progress-{mode}"
""" for mode, chat in CHATS.items() if mode != "bubble")   # bubble: the default profile, not configured
    with FakeTelegram() as tg, FakeOpenAIServer() as model:
        gw = telegram_gateway(tmp_path_factory.mktemp("gw"), tg.base_url, extra=f"""kind = "openai"
base_url = "{model.base_url}"
model = "test-model"
api_key = "sk-test-key-0123456789abcdef"
{routes}""")
        gw.start()
        gw.wait_ready()
        try:
            yield gw, tg, model
        finally:
            model.release()
            gw.cli("stop")
            gw.kill_everything()


def versions(tg: FakeTelegram, chat_id: int) -> list[str]:
    """Every text the bot's messages in the chat showed, in order."""
    return [v["text"] for m in tg.messages(chat_id) for v in m["history"]]


def answer_with_two_tools(rig, mode: str, shown) -> list[str]:
    """Run a turn whose model calls clock and calculator, hold the model until ``shown(versions)`` holds, then let
    the answer come; returns every version the chat saw."""
    gw, tg, model = rig
    chat = CHATS[mode]
    model.script(tool_call_reply([("clock", "{}"), ("calculator", '{"expression": "6*7"}')]), text_reply("It is 42."))
    model.hold(lambda body: any(m.get("role") == "tool" for m in body["messages"]))
    try:
        tg.inject_message(f"what time is it ({mode})", chat)
        wait_for(lambda: shown(versions(tg, chat)), 60, 0.05,
                 f"the preview of the {mode} mode (versions: {versions(tg, chat)})")
    finally:
        model.release()
    wait_for(lambda: tg.final_texts(chat) == ["It is 42."] and ledger_busy(gw) == 0, 60, 0.05,
             f"the answer (chat: {tg.final_texts(chat)})")
    return versions(tg, chat)


def test_bubble_shows_one_live_tool_line(rig):
    seen = answer_with_two_tools(rig, "bubble", lambda v: any("⚙ calculator ✓" in t for t in v))
    assert not any("⚙ clock" in t and "⚙ calculator" in t for t in seen), seen   # one line at a time


def test_lines_shows_a_line_for_each_tool_call(rig):
    answer_with_two_tools(rig, "lines", lambda v: any("⚙ clock ✓\n⚙ calculator ✓" in t for t in v))


def test_off_shows_no_tool(rig):
    seen = answer_with_two_tools(rig, "off", lambda v: any("⏳ still waiting for the model" in t for t in v))
    assert not any("⚙" in t for t in seen), seen
