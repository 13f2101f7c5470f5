"""``run_gateway.py chat``: the terminal adapter, end to end through the running daemon."""
from __future__ import annotations

import pytest

from tests.daemon import Gateway

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def gateway(tmp_path):
    gw = Gateway(tmp_path, extra_toml="[agent]\nchunk_delay_s = 0.0\n")
    gw.start()
    gw.wait_ready()
    yield gw
    gw.cli("stop")
    gw.kill_everything()


def test_chat_message_prints_the_streamed_answer_and_exits_0(gateway):
    result = gateway.cli("chat", "--as", "ada", "--message", "hello from the terminal", timeout=60)
    assert result.returncode == 0, result.stderr
    assert "hello from the terminal" in result.stdout and "offline" in result.stdout.lower()
    assert "▍" not in result.stdout.splitlines()[-1]



def test_piped_output_holds_the_answer_without_cursor_or_backspaces(gateway):
    result = gateway.cli("chat", "--as", "bob", "--message", "write to a pipe #slow 0.05", timeout=60)
    assert result.returncode == 0, result.stderr
    assert "write to a pipe" in result.stdout
    assert "▍" not in result.stdout and "\b" not in result.stdout, repr(result.stdout[-200:])
    assert result.stdout.count("You said") == 1, f"the answer once, not once per preview: {result.stdout!r}"


def test_each_user_is_their_own_conversation(gateway):
    gateway.cli("chat", "--as", "ada", "--message", "one", timeout=60, check=True)
    second = gateway.cli("chat", "--as", "ada", "--message", "two", timeout=60, check=True)
    other = gateway.cli("chat", "--as", "bob", "--message", "first of bob", timeout=60, check=True)
    assert "2 messages from you" in second.stdout
    assert "1 message from you" in other.stdout


def test_chat_without_a_gateway_fails_clearly(tmp_path):
    gw = Gateway(tmp_path)
    result = gw.cli("chat", "--message", "anyone?", timeout=30)
    assert result.returncode == 3 and "no gateway running" in result.stderr
