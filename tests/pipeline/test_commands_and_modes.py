"""Slash commands and busy modes, end to end on the real daemon and the fake platform."""
from __future__ import annotations

import json
import re

import pytest

from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.fakes.openai_server import FakeOpenAIServer, text_reply
from tests.pipeline.harness import CURSOR, pipeline_gateway, settled_answers, visible

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def platform():
    with FakePlatform() as fake:
        yield fake


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, platform):
    gw = pipeline_gateway(tmp_path_factory.mktemp("gw"), platform)
    gw.start()
    gw.wait_ready()
    yield gw
    gw.cli("stop")
    gw.kill_everything()


def test_new_starts_a_fresh_conversation_and_keeps_the_old_one(gateway, platform):
    platform.inject("n", "first words")
    settled_answers(platform, "n", gw=gateway)
    platform.inject("n", "/new")
    texts = settled_answers(platform, "n", count=2, gw=gateway)
    assert "new conversation" in texts[1].lower()
    platform.inject("n", "after the reset")
    texts = settled_answers(platform, "n", count=3, gw=gateway)
    assert "1 message from you" in texts[2], "the new conversation starts empty"
    listing = json.loads(gateway.cli("sessions", "list", "--json", check=True).stdout)["sessions"]
    assert {"active", "reset"} <= {s["state"] for s in listing}


def test_undo_and_retry_and_status_and_queue(gateway, platform):
    platform.inject("u", "keep this")
    settled_answers(platform, "u", gw=gateway)
    platform.inject("u", "drop this")
    settled_answers(platform, "u", count=2, gw=gateway)
    platform.inject("u", "/undo")
    texts = settled_answers(platform, "u", count=3, gw=gateway)
    assert "removed your last message" in texts[2].lower()
    platform.inject("u", "/retry")
    texts = settled_answers(platform, "u", count=4, gw=gateway)
    assert "keep this" in texts[3], "/retry answers the last message still in the conversation again"
    platform.inject("u", "/status")
    platform.inject("u", "/queue")
    texts = settled_answers(platform, "u", count=6, gw=gateway)
    assert "busy mode: queue" in texts[4] and "waiting" in texts[5].lower()
    # The id /status names is the one the admin commands print and take.
    shown = re.match(r"Conversation (\S+): \d+ message", texts[4]).group(1)
    listed = [line.split()[0] for line in gateway.cli("sessions", "list", check=True).stdout.splitlines()]
    assert shown in listed, (shown, listed)
    session = json.loads(gateway.cli("sessions", "show", shown, "--json", check=True).stdout)["session"]
    assert session["session_id"].startswith(shown) and session["state"] == "active"
    assert "keep this" in gateway.cli("sessions", "show", shown, check=True).stdout


def test_stop_interrupts_the_running_turn_and_keeps_what_was_said(gateway, platform):
    platform.inject("s", "a slow answer please #slow 0.3")
    wait_for(lambda: any(CURSOR in m["text"] for m in visible(platform, "s")), 20, 0.02, "streaming")
    platform.inject("s", "/stop")
    [text] = settled_answers(platform, "s", gw=gateway)
    assert text.endswith("(stopped)") and text.startswith("You said: \"a slow"), "what was said is kept"
    assert "api_key_env" not in text, "the turn did not run to its end"


def test_stop_acts_at_once_even_behind_a_message_queued_for_the_next_turn(gateway, platform):
    platform.inject("q", "a slow answer please #slow 0.3")
    wait_for(lambda: any(CURSOR in m["text"] for m in visible(platform, "q")), 20, 0.02, "streaming")
    platform.inject("q", "a message for afterwards")
    platform.inject("q", "/stop")
    first, second = settled_answers(platform, "q", count=2, gw=gateway)
    assert first.endswith("(stopped)") and "api_key_env" not in first, "the running turn was stopped"
    assert second.startswith('You said: "a message for afterwards"'), "the queued message still has its turn"


@pytest.mark.parametrize("mode", ["steer", "collect"])
def test_steer_and_collect_take_the_second_message_into_one_answer(tmp_path, mode):
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform, extra=f"[sessions]\nbusy_mode = \"{mode}\"\ncollect_window_s = 1.0\n")
        try:
            gw.start()
            gw.wait_ready()
            platform.inject("b", "first part #slow 0.3")
            if mode == "steer":
                wait_for(lambda: any(CURSOR in m["text"] for m in visible(platform, "b")), 20, 0.02, "streaming")
            platform.inject("b", "second part")
            [text] = settled_answers(platform, "b", timeout=60, gw=gw)
            assert "second part" in text, "one answer took both messages in"
            assert len(platform.messages("b")) == 1
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_an_openai_compatible_model_answers_through_the_daemon(tmp_path):
    with FakePlatform() as platform, FakeOpenAIServer() as model:
        model.script(text_reply("Hello from the model, streamed in pieces."))
        gw = pipeline_gateway(tmp_path, platform, agent=f"""
[agent]
kind = "openai"
base_url = "{model.base_url}"
model = "test-model"
api_key = "sk-test-key-0123456789abcdef"
""")
        try:
            gw.start()
            gw.wait_ready()
            platform.inject("m", "hello model")
            [text] = settled_answers(platform, "m", gw=gw)
            assert text == "Hello from the model, streamed in pieces."
            request = model.requests[-1]
            assert request.body["model"] == "test-model" and request.body["stream"] is True
            assert request.body["messages"][-1] == {"role": "user", "content": "hello model"}
            assert request.headers.get("Authorization") == "Bearer sk-test-key-0123456789abcdef"
        finally:
            gw.cli("stop")
            gw.kill_everything()
