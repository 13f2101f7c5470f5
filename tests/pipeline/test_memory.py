"""Memory and linked identities through the real daemon: two fake platforms (adapters ``fake`` and ``other``), the
fake OpenAI-compatible server (its recorded requests are what each turn sent). A fact one profile remembers in a
chat is in that profile's next requests only; it survives a kill -9 of the daemon; ``memory forget`` takes it out; the offline
agent's "remember that ..." writes through the same tool. A user linked across the two platforms continues one
transcript there, answered on the platform each message came from; an unlinked user stays on their own."""
from __future__ import annotations

import json
import os
import signal

import pytest

from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.fakes.openai_server import FakeOpenAIServer, text_reply, tool_call_reply
from tests.pipeline.harness import pipeline_gateway, settled_answers

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    with FakePlatform() as platform, FakePlatform() as other, FakeOpenAIServer() as model:
        gw = pipeline_gateway(tmp_path_factory.mktemp("gw"), platform, agent=f"""
[adapters.other]
type = "fake"
base_url = "{other.base_url}"
poll_timeout_s = 0.5

[agent]
kind = "openai"
base_url = "{model.base_url}"
model = "base-model"
api_key = "sk-test-key-0123456789abcdef"
system_prompt = "You are the default."

[profiles.support]
system_prompt = "You are support."
memory = "chat"
agent = {{ model = "support-model", tools = ["remember", "forget"] }}

[profiles.quiet]
system_prompt = "You are quiet."
memory = "chat"
agent = {{ model = "quiet-model", tools = ["remember"] }}

[profiles.notes]
memory = "user"
agent = {{ kind = "offline", chunk_delay_s = 0.0, tools = ["remember", "forget"] }}

[[routes]]
adapter = "fake"
chat = "room"
user = "ann"
profile = "support"

[[routes]]
chat = "room"
profile = "quiet"
respond = "all"

[[routes]]
adapter = "other"
chat = "jot"
profile = "notes"

[[identities]]
name = "ada"
members = ["fake:ada", "other:ada-2"]
""")
        gw.start()
        gw.wait_ready()
        try:
            yield gw, platform, other, model
        finally:
            gw.cli("stop")
            gw.kill_everything()


def request_with(model: FakeOpenAIServer, text: str) -> dict:
    """The body of the last request whose last user message is ``text``."""
    def find():
        found = [r.body for r in model.requests if r.body["messages"][-1].get("content") == text]
        return found[-1] if found else None
    return wait_for(find, 60, 0.05, f"a model request for {text!r} (requests: "
                                    f"{[r.body['messages'][-1] for r in model.requests]})")


def system_prompt(body: dict) -> str:
    assert body["messages"][0]["role"] == "system", body["messages"]
    return body["messages"][0]["content"]


def cli_json(gw, *args, code: int = 0) -> dict:
    done = gw.cli(*args, "--json")
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    return json.loads(done.stdout)


def test_two_profiles_in_one_chat_keep_separate_memories(rig):
    gw, platform, _other, model = rig
    model.script(tool_call_reply([("remember", '{"text": "the room drinks tea at five"}')]), text_reply("Noted."))
    platform.inject("room", "ann: remember our tea time", user="ann", chat_type="group")
    settled_answers(platform, "room", count=1, gw=gw)
    asked = [r.body for r in model.requests]
    tool_result = [m for body in asked for m in body["messages"] if m.get("role") == "tool"]
    assert tool_result and tool_result[-1]["content"].startswith("remembered as entry"), tool_result
    assert [t["function"]["name"] for t in asked[0]["tools"]] == ["remember", "forget"]

    platform.inject("room", "bob asks about tea", user="bob", chat_type="group")
    platform.inject("room", "ann asks about tea", user="ann", chat_type="group")
    settled_answers(platform, "room", count=3, gw=gw)
    assert system_prompt(request_with(model, "bob asks about tea")) == "You are quiet."   # the same chat, profile B
    ann = system_prompt(request_with(model, "ann asks about tea"))
    assert ann.startswith("You are support.\n\nWhat you remember about this chat:\n- [") and \
        "] the room drinks tea at five\n" in ann, ann


def test_a_memory_survives_kill_9_until_the_cli_forgets_it(rig):
    gw, platform, other, model = rig
    [entry] = cli_json(gw, "memory", "list", "--profile", "support")["entries"]
    assert (entry["scope"], entry["text"]) == ("chat:fake:room", "the room drinks tea at five"), entry
    shown = cli_json(gw, "memory", "show", "chat:fake:room")["entries"]
    assert [e["id"] for e in shown] == [entry["id"]]
    assert cli_json(gw, "memory", "list", "--profile", "quiet")["entries"] == []
    one = cli_json(gw, "memory", "show", str(entry["id"]))["entry"]
    assert (one["profile"], one["session_key"].split(".")[0]) == ("support", "support"), one

    os.kill(gw.launcher_pid, signal.SIGKILL)   # kill -9: the launcher takes its whole tree with it
    gw.assert_no_process_left(timeout=30)
    gw.start()
    gw.wait_ready()
    before = len(platform.messages("room"))
    platform.inject("room", "ann after the restart", user="ann", chat_type="group")
    settled_answers(platform, "room", count=before + 1, gw=gw)
    assert "the room drinks tea at five" in system_prompt(request_with(model, "ann after the restart"))

    gone = cli_json(gw, "memory", "forget", str(entry["id"]))
    assert gone["forgotten"]["id"] == entry["id"]
    platform.inject("room", "ann after forget", user="ann", chat_type="group")
    settled_answers(platform, "room", count=before + 2, gw=gw)
    assert system_prompt(request_with(model, "ann after forget")) == "You are support."
    again = cli_json(gw, "memory", "forget", str(entry["id"]), code=1)
    assert "no memory entry" in again["error"], again

    # The offline agent writes through the same tool, from a chat phrase.
    other.inject("jot", "remember that the door code is 4711", user="cy")
    [answer] = settled_answers(other, "jot", gw=gw)
    assert "I used the remember tool: remembered as entry" in answer, answer
    [noted] = cli_json(gw, "memory", "list", "--profile", "notes")["entries"]
    assert (noted["scope"], noted["text"]) == ("user:other:cy", "the door code is 4711"), noted


def test_a_linked_user_continues_one_transcript_across_platforms(rig):
    gw, platform, other, model = rig
    platform.inject("dm-ada", "hello from the first platform", user="ada")
    settled_answers(platform, "dm-ada", gw=gw)
    other.inject("dm-ada-2", "hello from the second platform", user="ada-2")
    settled_answers(other, "dm-ada-2", gw=gw)
    history = [m.get("content") for m in request_with(model, "hello from the second platform")["messages"]]
    assert "hello from the first platform" in history, history          # one transcript
    assert len(platform.messages("dm-ada")) == 1, platform.messages("dm-ada")   # the reply went where it was asked

    other.inject("dm-zed", "zed says hello", user="zed")
    settled_answers(other, "dm-zed", gw=gw)
    history = [m.get("content") for m in request_with(model, "zed says hello")["messages"]]
    assert "hello from the first platform" not in history, history     # unlinked: isolated

    explained = cli_json(gw, "routes", "explain", "other:chat=dm-ada-2,user=ada-2")
    assert (explained["identity"], explained["identity_applies"]) == ("ada", True), explained
    keys = [s["session_key"] for s in cli_json(gw, "sessions", "list")["sessions"]]
    linked = [k for k in keys if ".linked.dm." in k]
    assert linked == [explained["session_key"]], keys
