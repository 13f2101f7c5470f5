"""Stopping a turn and resetting a conversation from the console's chats page has the effect of the CLI's
`sessions stop|reset SESSION` (one SessionCommand, two faces), which is what the chat's /stop and /new do: against
the real daemon and the fake platform, with the offline agent's slow answers (#slow) as the turn to stop."""
from __future__ import annotations

import json

import pytest

from tests.actor_system import wait_for
from tests.console.helpers import console_gateway, console_port, running
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import CURSOR, settled_answers, visible

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    with FakePlatform() as platform:
        gw = console_gateway(tmp_path_factory.mktemp("console-sessions"), allow_actions=True, extra=f"""
[adapters.fake]
type = "fake"
base_url = "{platform.base_url}"
poll_timeout_s = 0.5

[agent]
chunk_delay_s = 0.0
""")
        with running(gw):
            yield gw, platform, f"http://127.0.0.1:{console_port(gw)}"


def session_of(gw, chat: str) -> dict:
    return json.loads(gw.cli("sessions", "show", f"fake:{chat}", "--json", check=True).stdout)["session"]


def streaming(platform, chat: str) -> None:
    wait_for(lambda: any(CURSOR in m["text"] for m in visible(platform, chat)), 30, 0.02, f"{chat} streaming")


def stop_from_the_page(page, base: str, session_id: str) -> None:
    page.goto(f"{base}/chats/{session_id}")
    with page.expect_response(lambda r: "/api/actions/sessions.stop" in r.url, timeout=30_000) as answer:
        page.click("button[data-action='sessions.stop']")
    assert answer.value.status == 200, answer.value.text()


@pytest.mark.parametrize("face", ["cli", "page"])
def test_stop_interrupts_the_running_turn_as_slash_stop_does(gateway, page, face):
    gw, platform, base = gateway
    chat = f"stop-{face}"
    platform.inject(chat, "a slow answer please #slow 0.3")
    streaming(platform, chat)
    if face == "cli":
        done = json.loads(gw.cli("sessions", "stop", f"fake:{chat}", "--json", check=True).stdout)
        assert done["ok"] and done["action"] == "stop", done
    else:
        stop_from_the_page(page, base, session_of(gw, chat)["session_id"])
    [text] = settled_answers(platform, chat, gw=gw)
    assert text.endswith("(stopped)") and text.startswith('You said: "a slow'), text
    assert "api_key_env" not in text, "the turn did not run to its end"
    assert " stop by " in gw.log()
    nothing = gw.cli("sessions", "stop", f"fake:{chat}", "--json")
    assert nothing.returncode == 1 and "nothing is running" in json.loads(nothing.stdout)["detail"]


@pytest.mark.parametrize("face", ["cli", "page"])
def test_reset_starts_a_new_conversation_as_slash_new_does(gateway, page, face):
    gw, platform, base = gateway
    chat = f"reset-{face}"
    platform.inject(chat, "first words")
    settled_answers(platform, chat, gw=gw)
    before = session_of(gw, chat)["session_id"]
    if face == "cli":
        gw.cli("sessions", "reset", before, check=True)
    else:
        page.goto(f"{base}/chats/{before}")
        with page.expect_response(lambda r: "/api/actions/sessions.reset" in r.url, timeout=30_000) as answer:
            page.click("button[data-action='sessions.reset']")
        assert answer.value.status == 200, answer.value.text()
    after = session_of(gw, chat)
    assert after["session_id"] != before and after["state"] == "active"
    old = json.loads(gw.cli("sessions", "show", before, "--json", check=True).stdout)["session"]
    assert old["state"] == "reset", "the old conversation is kept, as /new keeps it"
    platform.inject(chat, "after the reset")
    texts = settled_answers(platform, chat, count=2, gw=gw)
    assert "1 message from you" in texts[1], "the new conversation starts empty"


def test_reset_during_a_turn_stops_it_and_resets_once_it_is_delivered(gateway):
    gw, platform, _base = gateway
    chat = "reset-busy"
    platform.inject(chat, "a slow answer please #slow 0.3")
    streaming(platform, chat)
    before = session_of(gw, chat)["session_id"]
    gw.cli("sessions", "reset", before, check=True)
    [text] = settled_answers(platform, chat, gw=gw)
    assert text.endswith("(interrupted)") or "api_key_env" not in text, text
    wait_for(lambda: session_of(gw, chat)["session_id"] != before, 30, 0.2, "the reset after the turn")
