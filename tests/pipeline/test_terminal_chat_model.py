"""``run_gateway.py chat`` on a terminal (a pty, rendered by pyte) against the real daemon and a fake OpenAI-compatible
model that is slow to start: the screen says the answer is still coming, then shows the answer alone."""
from __future__ import annotations

import pexpect
import pytest

from tests.fakes.openai_server import FakeOpenAIServer, Reply, text_chunks
from tests.gateway import Gateway
from tests.pipeline.test_terminal_chat import screen, spawn_chat

pytestmark = pytest.mark.timeout(180)

WAIT_S = 60


@pytest.fixture(scope="module")
def model():
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, model):
    gw = Gateway(tmp_path_factory.mktemp("terminal_chat_model"), extra_toml=f"""
[agent]
kind = "openai"
base_url = "{model.base_url}"
model = "fake-gpt"
api_key = "sk-test-key-0123456789abcdef"
first_token_timeout_s = 12
""")
    gw.start()
    try:
        gw.wait_ready()
        yield gw
    finally:
        gw.cli("stop")
        gw.kill_everything()


def test_a_model_slow_to_start_shows_still_waiting_then_the_answer(gateway, model):
    model.script(Reply(chunks=text_chunks("Here at last."), delay_before_s=8))
    child, output = spawn_chat(gateway, "--as", "wren", "--message", "are you there?")
    child.expect("still waiting for the model".encode(), timeout=WAIT_S)
    waiting = "\n".join(screen(output.getvalue()))
    assert "⏳ still waiting for the model… (5s)" in waiting and "Here at last" not in waiting, waiting
    child.expect(pexpect.EOF, timeout=WAIT_S)
    child.wait()
    assert child.exitstatus == 0, output.getvalue()[-500:]
    shown = "\n".join(screen(output.getvalue())).strip("\n")
    assert shown == "Here at last.", f"the sign is gone, the answer stays: {shown!r}"
