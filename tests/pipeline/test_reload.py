"""Reloading the configuration through the real daemon (`run_gateway.py reload`, SIGHUP): one gateway, the fake
platform, the fake OpenAI-compatible server, whose recorded requests say which profile each model call ran on.

Twenty turns are held at the model server in their second request (after a tool round) while a reload moves the
adapter's route to another profile and changes the first profile's model and persona: the twenty finish on what
they started with, every message after the reload gets the new route's profile. An invalid file changes nothing
(exit 78, the reason, the log); SIGHUP does what `reload` does; a child restarted after a reload starts on the new
configuration; a reload during a drain is refused. The tests run in order on one daemon."""
from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.fakes.openai_server import FakeOpenAIServer, text_reply, tool_call_reply
from tests.gateway import PYTHON, ROOT
from tests.pipeline.harness import pipeline_gateway, settled_answers

pytestmark = pytest.mark.timeout(240)
IN_FLIGHT = 20

PROFILES = """
[agent]
kind = "openai"
base_url = "{url}"
model = "base-model"
api_key = "sk-test-key-0123456789abcdef"
system_prompt = "You are the default."

[profiles.alpha]
system_prompt = "You are alpha, {edition} edition."
agent = {{ model = "{alpha_model}", tools = ["clock"] }}

[profiles.beta]
system_prompt = "You are beta."
agent = {{ model = "beta-1", tools = [] }}

[[routes]]
name = "everything"
adapter = "fake"
profile = "{routed}"

[[routes]]
name = "keep"
adapter = "fake"
chat = "keep"
profile = "alpha"
"""


def profiles(url: str, edition: str, alpha_model: str, routed: str) -> str:
    return PROFILES.format(url=url, edition=edition, alpha_model=alpha_model, routed=routed)


def answer(body: dict):
    """A message starting with "tool" asks for the clock first; the request after the tool's result answers."""
    messages = body["messages"]
    users = [m for m in messages if m.get("role") == "user"]
    if any(m.get("role") == "tool" for m in messages):
        return text_reply(f"done: {users[-1]['content']}")
    if users and str(users[-1].get("content", "")).startswith("tool"):
        return tool_call_reply([("clock", "{}")])
    return None   # the echo


def wait(predicate, timeout: float, what):
    """``wait_for``, its message made at the timeout (``what`` may be a function: what it saw then)."""
    try:
        return wait_for(predicate, timeout, 0.05, "a condition")
    except AssertionError:
        raise AssertionError(f"timed out after {timeout}s waiting for {what() if callable(what) else what}") from None


def has_tool_result(body: dict) -> bool:
    return any(m.get("role") == "tool" for m in body["messages"])


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    with FakePlatform() as platform, FakeOpenAIServer() as model:
        model.answer = answer
        base = tmp_path_factory.mktemp("gw")
        gw = pipeline_gateway(base, platform, agent=profiles(model.base_url, "first", "alpha-1", "alpha"))
        original = gw.config.read_text()
        gw.start()
        gw.wait_ready()
        try:
            yield gw, platform, model, original
        finally:
            model.release()
            gw.cli("stop")
            gw.kill_everything()


def requests_for(model: FakeOpenAIServer, text: str) -> list[dict]:
    """The bodies of every request whose last user message is ``text``."""
    return [r.body for r in list(model.requests)
            if [m for m in r.body["messages"] if m.get("role") == "user"][-1:] and
            [m for m in r.body["messages"] if m.get("role") == "user"][-1].get("content") == text]


def wait_requests(model: FakeOpenAIServer, text: str, count: int = 1) -> list[dict]:
    return wait_for(lambda: (found := requests_for(model, text)) and len(found) >= count and found, 60, 0.05,
                    f"{count} model request(s) for {text!r} ({len(model.requests)} recorded)")


def system_prompt(body: dict) -> str:
    return body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""


def config_of(gw) -> dict:
    result = gw.cli("status", "--json")
    return json.loads(result.stdout)["config"]


def rewrite(gw, original: str, old: str, new: str) -> None:
    assert old in original
    gw.config.write_text(original.replace(old, new))


def test_a_reload_during_twenty_turns_changes_routing_for_new_messages_only(rig):
    gw, platform, model, original = rig
    assert config_of(gw)["generation"] == 1
    model.hold(has_tool_result)
    for i in range(IN_FLIGHT):
        platform.inject(f"c{i}", f"tool {i}", user=f"u{i}")
    wait(lambda: model.holding == IN_FLIGHT, 60,
             lambda: f"{IN_FLIGHT} turns held in their tool round (holding {model.holding})")

    # The route of every chat moves to beta; alpha itself gets another model and persona.
    gw.config.write_text(original.replace(profiles(model.base_url, "first", "alpha-1", "alpha"),
                                          profiles(model.base_url, "second", "alpha-2", "beta")))
    result = gw.cli("reload")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "generation 2" in result.stdout and "[[routes]]" in result.stdout and "[profiles.alpha]" in result.stdout
    assert "needs a restart" not in result.stdout
    status = config_of(gw)
    assert status["generation"] == 2 and status["file"] == str(gw.config)

    for i in range(5):
        platform.inject(f"c{i}", f"after {i}", user=f"u{i}")
    platform.inject("keep", "keep after", user="k")
    after = [wait_requests(model, f"after {i}")[0] for i in range(5)]
    keep = wait_requests(model, "keep after")[0]
    assert model.holding == IN_FLIGHT   # the new turns ran beside the held ones
    model.release()

    for i in range(IN_FLIGHT):
        texts = settled_answers(platform, f"c{i}", 2 if i < 5 else 1, timeout=60, gw=gw)
        assert f"done: tool {i}" in texts, texts
    for i in range(IN_FLIGHT):   # both requests of each held turn: its profile as the turn started
        bodies = requests_for(model, f"tool {i}")
        assert len(bodies) == 2 and has_tool_result(bodies[1]), bodies
        assert [b["model"] for b in bodies] == ["alpha-1", "alpha-1"]
        assert all(system_prompt(b) == "You are alpha, first edition." for b in bodies), bodies[1]["messages"][0]
        assert all([t["function"]["name"] for t in b.get("tools") or []] == ["clock"] for b in bodies)
    for i, body in enumerate(after):   # the new route's profile
        assert body["model"] == "beta-1" and system_prompt(body) == "You are beta.", body
        assert not body.get("tools")
        assert f"echo: after {i}" in settled_answers(platform, f"c{i}", 2, gw=gw)
    assert keep["model"] == "alpha-2" and system_prompt(keep) == "You are alpha, second edition."
    assert "reload (reload) of" in gw.wait_log("reload (reload) of")


def test_an_invalid_file_changes_nothing_exit_78_with_the_reason(rig):
    gw, platform, model, original = rig
    running = gw.config.read_text()
    before = config_of(gw)
    try:
        gw.config.write_text(running + "\n[[routes\n")
        result = gw.cli("reload")
        assert result.returncode == 78, result.stdout + result.stderr
        assert str(gw.config) in result.stderr and "(syntax)" in result.stderr, result.stderr
        gw.wait_log("reload (reload) refused, the running configuration is kept: " + str(gw.config) + ": (syntax)")

        gw.config.write_text(running + '\n[[routes]]\nname = "ghost-route"\nchat = "ghost"\nprofile = "ghost"\n')
        result = gw.cli("reload", "--json")
        assert result.returncode == 78, result.stdout + result.stderr
        refused = json.loads(result.stdout)
        assert refused["ok"] is False and "no profile 'ghost'" in refused["error"] and refused["file"] == str(gw.config)
        gw.wait_log("no profile 'ghost'")

        # Valid alone, this file adds an adapter (a restart's business) and routes to it: the gateway refuses it.
        gw.config.write_text(running + f'\n[adapters.extra]\ntype = "fake"\nbase_url = "{platform.base_url}"\n'
                                       '\n[[routes]]\nname = "to-extra"\nadapter = "extra"\nprofile = "beta"\n')
        result = gw.cli("reload")
        assert result.returncode == 78, result.stdout + result.stderr
        assert "with the settings a reload keeps until a restart: [adapters.extra]" in result.stderr, result.stderr
    finally:
        gw.config.write_text(running)
    assert config_of(gw) == before
    platform.inject("c7", "still beta", user="u7")
    assert wait_requests(model, "still beta")[0]["model"] == "beta-1"   # the last good configuration runs on


def test_sighup_reloads_and_children_restarted_later_start_on_the_new_configuration(rig):
    gw, platform, model, original = rig
    third = original.replace(profiles(model.base_url, "first", "alpha-1", "alpha"),
                             profiles(model.base_url, "third", "alpha-3", "alpha"))
    # One setting only a restart changes: reported, its running value kept.
    gw.config.write_text(third.replace("poll_timeout_s = 0.5", "poll_timeout_s = 0.7"))
    os.kill(gw.launcher_pid, signal.SIGHUP)
    wait(lambda: config_of(gw)["generation"] == 3, 60, lambda: f"generation 3 ({config_of(gw)})")
    log = gw.wait_log("reload (SIGHUP) of")
    assert "needs a restart (running values kept): [adapters.fake]" in log

    platform.inject("c8", "after sighup", user="u8")
    body = wait_requests(model, "after sighup")[0]
    assert body["model"] == "alpha-3" and system_prompt(body) == "You are alpha, third edition."

    # The adapter and every shard crash and are restarted by their supervisors: on generation 3, not the first.
    tree = gw.tree()
    restartable = [n for n in _nodes(tree) if n["kind"] == "SessionShard" or n["name"] == "fake"]
    assert restartable, tree
    pids = {n["name"]: n["pid"] for n in restartable}
    for name in pids:
        gw.cli("fault", name, "--action", "crash", check=True)

    def restarted():
        now = {n["name"]: n for n in _nodes(gw.tree())}
        return all(name in now and now[name]["pid"] not in (0, None, pid) and now[name]["state"] == "running"
                   for name, pid in pids.items())
    wait(restarted, 60, lambda: f"{sorted(pids)} restarted with new pids (were {pids})")
    platform.inject("restarts", "after restarts", user="r")
    body = wait_requests(model, "after restarts")[0]
    assert body["model"] == "alpha-3" and system_prompt(body) == "You are alpha, third edition."
    assert "echo: after restarts" in settled_answers(platform, "restarts", 1, timeout=60, gw=gw)


def test_a_reload_adds_a_cron_job_where_there_was_none_and_takes_it_out_again(rig):
    gw, platform, model, original = rig
    running = gw.config.read_text()
    assert not [n for n in _nodes(gw.tree()) if n["kind"] == "Cron"]
    gw.config.write_text(running + '\n[cron.tick]\nschedule = "* * * * * *"\nprompt = "cron says hi"\n'
                                   'adapter = "fake"\nchat = "cronchat"\n')
    result = gw.cli("reload")
    assert result.returncode == 0 and "[cron.tick]" in result.stdout, result.stdout + result.stderr
    assert "echo: cron says hi" in settled_answers(platform, "cronchat", 1, timeout=60, gw=gw)[0]

    gw.config.write_text(running)
    result = gw.cli("reload")
    assert result.returncode == 0 and "[cron.tick]" in result.stdout, result.stdout + result.stderr
    gw.wait_log("cron: 0 job(s) after a reload")
    assert json.loads(gw.cli("status", "--json").stdout)["cron"]["jobs"] == 0


def test_a_reload_while_draining_is_refused(rig):
    gw, platform, model, original = rig
    model.hold(lambda body: body["messages"][-1].get("content") == "hold the drain")
    platform.inject("draining", "hold the drain", user="d")
    wait(lambda: model.holding == 1, 60, lambda: f"the turn held (holding {model.holding})")
    drain = subprocess.Popen([PYTHON, str(ROOT / "run_gateway.py"), "--config", str(gw.config), "drain",
                              "--timeout", "60"], env=gw.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    try:
        wait_for(lambda: json.loads(gw.cli("status", "--json").stdout).get("draining"), 60, 0.1, "the drain begun")
        result = gw.cli("reload")
        assert result.returncode == 1 and "draining" in result.stderr, result.stdout + result.stderr
    finally:
        model.release()
        drain.wait(timeout=90)
    assert "drained" in drain.stdout.read()


def _nodes(tree: dict) -> list[dict]:
    from tests.gateway import nodes
    return list(nodes(tree))
