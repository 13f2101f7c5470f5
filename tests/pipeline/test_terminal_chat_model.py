"""``run_gateway.py chat`` on a terminal (a pty, rendered by pyte) against the real daemon and a fake OpenAI-compatible
model that is slow to start (the screen says the answer is still coming, then shows the answer alone) or fails (the
chat shows the failure as an error, in red with the /retry hint, and /retry answers the message again)."""
from __future__ import annotations

import pexpect
import pytest

import pyte

from tests.fakes.openai_server import FakeOpenAIServer, Reply, agent_toml, error_reply, text_chunks
from tests.gateway import Gateway
from tests.pipeline.test_terminal_chat import COLUMNS, LINES, screen, spawn_chat

pytestmark = pytest.mark.timeout(180)

WAIT_S = 60


@pytest.fixture(scope="module")
def model():
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, model):
    gw = Gateway(tmp_path_factory.mktemp("terminal_chat_model"),
                 extra_toml=agent_toml(model, "first_token_timeout_s = 12"))
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


def red_words(output: bytes) -> str:
    """The characters the terminal shows in red, row by row."""
    emulator = pyte.Screen(COLUMNS, LINES)
    pyte.ByteStream(emulator).feed(output)
    return "\n".join("".join(cell.data for cell in (emulator.buffer[row][col] for col in range(COLUMNS))
                             if cell.fg == "red").strip() for row in range(LINES)).strip()


def test_a_failed_turn_is_shown_as_an_error_with_the_retry_hint_and_retry_answers_again(gateway, model):
    model.script(*[error_reply(500, "the backend is down")] * 4)    # every attempt of the turn
    child, output = spawn_chat(gateway, "--as", "yann")
    child.expect_exact("you> ", timeout=WAIT_S)
    child.send("break it\r")
    child.expect_exact("you> ", timeout=WAIT_S)
    rows = screen(output.getvalue())
    picture = "\n".join(rows)
    notice = "The model service had an internal error. Please try again in a moment."
    assert picture.count("internal error") == 1, f"the notice once, as an error, not also as an answer:\n{picture}"
    failed = next(n for n, row in enumerate(rows) if row.startswith("error: "))
    assert "".join(rows[failed:failed + 3]).startswith("error: " + notice[:COLUMNS - 7]), picture
    assert "(/retry sends your message again)" in picture, picture
    assert red_words(output.getvalue()).replace("\n", "").replace(" ", "").startswith(
        ("error:" + notice).replace(" ", "")[:40]), red_words(output.getvalue())

    child.send("/retry\r")      # nothing scripted now: the fake model answers (an echo of the message)
    child.expect_exact("echo: break it", timeout=WAIT_S)
    child.expect_exact("you> ", timeout=WAIT_S)
    assert model.requests[-1].body["messages"][-1] == {"role": "user", "content": "break it"}
    child.sendcontrol("d")
    child.expect(pexpect.EOF, timeout=WAIT_S)
    child.wait()
    assert child.exitstatus == 0
