"""An open terminal chat across a gateway that stops, is killed -9 or restarts: nothing typed is lost.

The chat runs under a pseudo-terminal (pexpect) against the real daemon, which the test stops (``stop``), kills
(-9, every process) and starts again on the same state dir. A line typed meanwhile waits, the chat saying so, and is
sent once the gateway is back: answered once, and stored once in its conversation. Each test runs its own gateway:
it is the one stopped and killed.
"""
from __future__ import annotations

import json

import pexpect
import pytest

from tests.gateway import Gateway
from tests.pipeline.test_terminal_chat import WAIT_S, screen, spawn_chat, squeezed

pytestmark = pytest.mark.timeout(240)

LOST = "connection lost, reconnecting"


@pytest.fixture
def gateway(tmp_path):
    gw = Gateway(tmp_path, extra_toml="[agent]\nchunk_delay_s = 0.0\n")
    gw.start()
    gw.wait_ready()
    yield gw
    gw.cli("stop")
    gw.kill_everything()


def restart(gw: Gateway) -> None:
    gw.start()
    gw.wait_ready(timeout=60)


def user_messages(gw: Gateway, user_hint: str) -> list[str]:
    """The texts of the user messages stored in the conversation of the terminal user (the one cli session)."""
    listed = json.loads(gw.cli("sessions", "list", "--json", check=True).stdout)["sessions"]
    ours = [s for s in listed if ".cli." in s["session_key"]]
    assert len(ours) == 1, f"one terminal conversation expected ({user_hint}): {listed}"
    shown = json.loads(gw.cli("sessions", "show", ours[0]["session_id"], "--last", "100", "--json",
                              check=True).stdout)
    return [e["payload"]["text"] for e in shown["events"] if e["role"] == "user" and e["kind"] == "message"]


def first_exchange(gw: Gateway, user: str):
    child, output = spawn_chat(gw, "--as", user)
    child.expect_exact("you> ", timeout=WAIT_S)
    child.send("before\r")
    child.expect_exact("you> ", timeout=WAIT_S)     # answered (its words wrap on screen: not checked in the bytes)
    assert "1messagefromyou" in squeezed("\n".join(screen(output.getvalue())))
    return child, output


def second_answer_once(child: pexpect.spawn, output, line: str) -> str:
    """Waits for the prompt after ``line``'s answer: the screen, which shows that answer once, as the second."""
    child.expect_exact("you> ", timeout=WAIT_S)
    picture = "\n".join(screen(output.getvalue()))
    assert "2messagesfromyou" in squeezed(picture), picture
    assert squeezed(picture).count(squeezed(f'You said: "{line}"')) == 1, picture
    return picture


def leave(child: pexpect.spawn) -> None:
    child.sendcontrol("d")
    child.expect(pexpect.EOF, timeout=WAIT_S)
    child.wait()
    assert child.exitstatus == 0


def test_a_line_typed_after_a_kill_and_restart_is_answered_once_and_stored(gateway):
    child, output = first_exchange(gateway, "kim")
    gateway.kill_everything()               # kill -9, every process of the gateway
    gateway.assert_no_process_left()
    restart(gateway)
    child.send("after the kill\r")
    assert "did not accept" not in second_answer_once(child, output, "after the kill")
    leave(child)
    assert user_messages(gateway, "kim") == ["before", "after the kill"]


def test_a_line_typed_while_the_gateway_is_stopped_waits_and_is_sent_when_it_is_back(gateway):
    child, output = first_exchange(gateway, "lou")
    gateway.cli("stop", check=True)
    child.send("while it was away\r")
    child.expect_exact(LOST, timeout=WAIT_S)
    restart(gateway)
    second_answer_once(child, output, "while it was away")
    leave(child)
    assert user_messages(gateway, "lou") == ["before", "while it was away"]


def test_ctrl_c_while_waiting_for_the_gateway_leaves_saying_the_line_was_not_sent(gateway):
    child, output = first_exchange(gateway, "max")
    gateway.cli("stop", check=True)
    child.send("nobody is there\r")
    child.expect_exact(LOST, timeout=WAIT_S)
    child.sendintr()
    child.expect(pexpect.EOF, timeout=WAIT_S)
    child.wait()
    assert child.exitstatus == 1
    picture = "\n".join(screen(output.getvalue()))
    assert "not sent" in picture and "nobody is there" in picture.split(LOST)[1], picture
    assert "Traceback" not in output.getvalue().decode(errors="replace"), picture


def test_a_gateway_killed_while_answering_finishes_the_answer_once_back_with_one_turn(gateway):
    """The line was stored before the kill: after the restart the terminal tells it again under the same id, to
    be known to the new gateway, and the inbox takes that copy as the row it holds (no second turn)."""
    child, output = spawn_chat(gateway, "--as", "ned")
    child.expect_exact("you> ", timeout=WAIT_S)
    child.send("cut short #slow 0.5\r")
    child.expect_exact("offline agent", timeout=WAIT_S)     # streaming: ~30 chunks 0.5 s apart to come
    gateway.kill_everything()
    child.expect_exact(LOST, timeout=WAIT_S)
    gateway.assert_no_process_left()
    restart(gateway)
    child.expect_exact("you> ", timeout=WAIT_S)             # the resumed turn's answer has been delivered
    picture = "\n".join(screen(output.getvalue()))
    assert "api_key_env" in picture.split(LOST)[1], f"the answer's end, after the restart:\n{picture}"
    leave(child)
    assert user_messages(gateway, "ned") == ["cut short #slow 0.5"]
