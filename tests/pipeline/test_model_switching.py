"""/model through the real daemon: the fake platform, the fake OpenAI-compatible server (its recorded requests say
which model each turn asked for). A chat lists its profile's models, is refused a model the profile does not
allow, switches; the choice holds after a kill -9 of the whole daemon and a restart, in that chat only."""
from __future__ import annotations

import os
import signal

import pytest

from tests.fakes.fakeplatform import FakePlatform
from tests.fakes.openai_server import FakeOpenAIServer
from tests.pipeline.harness import pipeline_gateway, settled_answers
from tests.pipeline.test_memory import request_with

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    with FakePlatform() as platform, FakeOpenAIServer() as model:
        gw = pipeline_gateway(tmp_path_factory.mktemp("gw"), platform, agent=f"""
[agent]
kind = "openai"
base_url = "{model.base_url}"
model = "base-model"
api_key = "sk-test-key-0123456789abcdef"

[profiles.default]
models = ["small-model", "large-model"]
""")
        gw.start()
        gw.wait_ready()
        try:
            yield gw, platform, model
        finally:
            gw.cli("stop")
            gw.kill_everything()


def model_asked_for(model: FakeOpenAIServer, text: str) -> str:
    """The model named by the (last) request whose last user message is ``text``."""
    return request_with(model, text)["model"]


def test_model_lists_refuses_and_switches_and_the_choice_survives_kill_9(rig):
    gw, platform, model = rig
    platform.inject("c1", "before any choice")
    settled_answers(platform, "c1", count=1, gw=gw)
    assert model_asked_for(model, "before any choice") == "base-model"

    platform.inject("c1", "/model")
    listed = settled_answers(platform, "c1", count=2, gw=gw)[-1]
    assert listed == ("Model: base-model.\nModels:\n- base-model (current, default)\n- small-model\n- large-model\n"
                      "Send /model NAME to switch."), listed
    platform.inject("c1", "/model gpt-9")
    refused = settled_answers(platform, "c1", count=3, gw=gw)[-1]
    assert refused.startswith("\u201cgpt-9\u201d is not a model this profile allows.") and "- large-model" in refused
    platform.inject("c1", "/model large-model")
    assert settled_answers(platform, "c1", count=4, gw=gw)[-1] == "Switched to large-model: the next answer uses it."
    platform.inject("c1", "after the switch")
    settled_answers(platform, "c1", count=5, gw=gw)
    assert model_asked_for(model, "after the switch") == "large-model"

    os.kill(gw.launcher_pid, signal.SIGKILL)   # kill -9: the launcher takes its whole tree with it
    gw.assert_no_process_left(timeout=30)
    gw.start()
    gw.wait_ready()
    platform.inject("c1", "after the restart")
    settled_answers(platform, "c1", count=6, gw=gw)
    assert model_asked_for(model, "after the restart") == "large-model"
    platform.inject("c2", "another chat")
    settled_answers(platform, "c2", count=1, gw=gw)
    assert model_asked_for(model, "another chat") == "base-model", "a choice is its conversation's only"
