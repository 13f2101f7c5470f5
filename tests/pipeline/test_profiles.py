"""Profiles and routes through the real daemon: one gateway, the fake platform, the fake OpenAI-compatible server
(its recorded requests are what each profile's agent sent). Two profiles in one group chat are two sessions with
two transcripts; each turn's model, persona and tools are its profile's; un-addressed group messages are skipped
unless the route answers everything; ``routes explain`` says what the turn used."""
from __future__ import annotations

import json

import pytest

from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.fakes.openai_server import FakeOpenAIServer
from tests.pipeline.harness import pipeline_gateway, settled_answers

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    with FakePlatform() as platform, FakeOpenAIServer() as model:   # nothing scripted: it echoes the user
        gw = pipeline_gateway(tmp_path_factory.mktemp("gw"), platform, agent=f"""
[agent]
kind = "openai"
base_url = "{model.base_url}"
model = "base-model"
api_key = "sk-test-key-0123456789abcdef"
system_prompt = "You are the default."

[profiles.support]
system_prompt = "You are support."
agent = {{ model = "support-model", tools = ["clock"] }}

[profiles.quiet]
system_prompt = "You are quiet."
busy_mode = "interrupt"
agent = {{ model = "quiet-model", tools = [] }}

[[routes]]
name = "ann-in-room"
adapter = "fake"
chat = "room"
user = "ann"
profile = "support"

[[routes]]
name = "room"
chat = "room"
profile = "quiet"
respond = "all"
""")
        gw.start()
        gw.wait_ready()
        try:
            yield gw, platform, model
        finally:
            gw.cli("stop")
            gw.kill_everything()


def request_with(model: FakeOpenAIServer, text: str) -> dict:
    """The body of the (one) request whose last user message is ``text``."""
    def find():
        found = [r.body for r in model.requests if r.body["messages"][-1].get("content") == text]
        return found if found else None
    found = wait_for(find, 60, 0.05, f"a model request for {text!r} (requests: "
                                     f"{[r.body['messages'][-1] for r in model.requests]})")
    assert len(found) == 1, found
    return found[0]


def tool_names(body: dict) -> list:
    return [t["function"]["name"] for t in body.get("tools") or []]


def test_each_profile_sends_its_own_model_prompt_and_tools_and_keeps_its_own_transcript(rig):
    gw, platform, model = rig
    platform.inject("room", "ann one", user="ann", chat_type="group")
    platform.inject("room", "bob one", user="bob", chat_type="group")
    platform.inject("dm-zed", "zed one", user="zed")
    settled_answers(platform, "room", count=2, gw=gw)
    ann, bob, zed = (request_with(model, t) for t in ("ann one", "bob one", "zed one"))
    assert (ann["model"], ann["messages"][0]) == ("support-model", {"role": "system", "content": "You are support."})
    assert tool_names(ann) == ["clock"]
    assert (bob["model"], bob["messages"][0]) == ("quiet-model", {"role": "system", "content": "You are quiet."})
    assert tool_names(bob) == []
    assert (zed["model"], zed["messages"][0]["content"]) == ("base-model", "You are the default.")
    assert tool_names(zed) == ["clock", "calculator", "text_image"]

    platform.inject("room", "ann two", user="ann", chat_type="group")
    settled_answers(platform, "room", count=3, gw=gw)
    history = [m.get("content") for m in request_with(model, "ann two")["messages"]]
    assert "ann one" in history and "bob one" not in history, history   # the support session's transcript only
    keys = sorted(s["session_key"].split(".", 2)[0] + "." + s["session_key"].split(".")[2]
                  for s in json.loads(gw.cli("sessions", "list", "--json", check=True).stdout)["sessions"])
    assert {"default.dm", "quiet.group", "support.group"} <= set(keys), keys   # the room: one session per profile
    assert keys.count("quiet.group") == keys.count("support.group") == 1, keys


def test_group_messages_need_addressing_unless_the_route_answers_all(rig):
    gw, platform, model = rig
    platform.inject("hall", "chatter nobody asked for", user="cy", chat_type="group", mentioned=False)
    platform.inject("room", "ann not addressed", user="ann", chat_type="group", mentioned=False)
    platform.inject("room", "bob not addressed", user="bob", chat_type="group", mentioned=False)  # respond = all
    platform.inject("hall", "bot, are you there?", user="cy", chat_type="group", mentioned=True)
    [answer] = settled_answers(platform, "hall", gw=gw)
    assert "are you there" in answer
    request_with(model, "bob not addressed")
    # Each chat is read in order: had the earlier un-addressed messages been stored, they were asked first.
    asked = [r.body["messages"][-1].get("content") for r in model.requests]
    assert "chatter nobody asked for" not in asked and "ann not addressed" not in asked, asked


def test_routes_explain_says_what_a_turn_used(rig):
    gw, platform, model = rig
    explained = json.loads(gw.cli("routes", "explain", "fake:chat=room,user=ann,type=group", "--json",
                                  check=True).stdout)
    platform.inject("room", "ann three", user="ann", chat_type="group")
    used = request_with(model, "ann three")
    assert explained["route"] == "ann-in-room" and explained["profile"] == "support"
    assert (explained["model"], explained["tools"]) == (used["model"], tool_names(used))
    assert explained["lost"] == [{"route": "room", "why": "matches too, but ann-in-room is more specific (it names "
                                                          "adapter)"}]
    keys = [s["session_key"] for s in json.loads(gw.cli("sessions", "list", "--json", check=True).stdout)["sessions"]]
    assert explained["session_key"] in keys and explained["session_key"].startswith("support."), keys
    other = json.loads(gw.cli("routes", "explain", "fake:chat=room,user=bob,type=group", "--json",
                              check=True).stdout)
    assert (other["profile"], other["model"], other["respond"], other["busy_mode"]) == ("quiet", "quiet-model",
                                                                                        "all", "interrupt")
