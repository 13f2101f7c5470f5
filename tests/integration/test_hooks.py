"""Plugins' hooks through the real daemon (one gateway for the module, the fake platform, the fake OpenAI-compatible
server): a rewrite before dispatch is what the model receives; a hook that overruns its bound or raises is skipped,
logged by name and counted in /metrics, and the message is answered once; the example plugin, found by its entry
point (a .dist-info on the daemon's path: real importlib.metadata discovery, no table in the configuration), writes
its audit line for each delivered reply (by the sweeper too); hooks see a key-shaped text redacted; observers see
each turn and each adapter's connection."""
from __future__ import annotations

import json

import pytest

from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.fakes.openai_server import FakeOpenAIServer
from tests.gateway import ROOT
from tests.integration.test_metrics import get
from tests.pipeline.harness import pipeline_gateway, settled_answers, visible
from tests.pipeline.test_sweeper import orphan_reply

pytestmark = pytest.mark.timeout(180)
KEY_SHAPE = "ghp_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    info = site / "gateway_keyword_filter-0.1.0.dist-info"   # what `pip install examples/keyword_filter` writes
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gateway-keyword-filter\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[agent_gateway.plugins]\n"
                                           "keyword_filter = gateway_keyword_filter:KeywordFilter\n")
    with FakePlatform() as platform, FakeOpenAIServer() as model:
        gw = pipeline_gateway(tmp_path_factory.mktemp("gw"), platform, agent=f"""
[agent]
kind = "openai"
base_url = "{model.base_url}"
model = "m"
api_key = "sk-test-key-0123456789abcdef"

[delivery]
sweep_interval_s = 1.0

[plugins.rewriter]
module = "tests.integration.hook_plugins:Rewriter"

[plugins.sleepy]
module = "tests.integration.hook_plugins:Sleepy"
timeout_s = 0.3

[plugins.raiser]
module = "tests.integration.hook_plugins:Raiser"
""")
        gw.env["PYTHONPATH"] = ":".join([str(ROOT), str(ROOT / "examples" / "keyword_filter"), str(site)])
        gw.start()
        gw.wait_ready()
        try:
            yield gw, platform, model
        finally:
            gw.cli("stop")
            gw.kill_everything()


def requests_for(model: FakeOpenAIServer, fragment: str) -> list[dict]:
    return [r.body for r in model.requests if fragment in str(r.body["messages"][-1].get("content"))]


def answered_once(gw, platform, model, chat: str, fragment: str) -> str:
    [answer] = settled_answers(platform, chat, 1, 60, gw)
    assert len(visible(platform, chat)) == 1 and len(requests_for(model, fragment)) == 1, \
        (visible(platform, chat), requests_for(model, fragment))
    return answer


def test_a_rewrite_before_dispatch_is_what_the_model_receives_and_context_is_added(rig):
    gw, platform, model = rig
    platform.inject("rewrite", "what colour is the sky? #context")
    answer = answered_once(gw, platform, model, "rewrite", "is the sky")
    [body] = requests_for(model, "is the sky")
    assert body["messages"][-1]["content"] == "what color is the sky? #context", body["messages"]
    assert {"role": "system", "content": "Context added by a plugin."} in body["messages"], body["messages"]
    assert "color" in answer and "colour" not in answer


def test_a_hook_past_its_bound_or_raising_is_skipped_logged_counted_and_the_message_answered_once(rig):
    gw, platform, model = rig
    platform.inject("sleepy", "a slow one #sleep-hook")
    platform.inject("raising", "a broken one #raise-hook")
    assert "a slow one #sleep-hook" in answered_once(gw, platform, model, "sleepy", "#sleep-hook")
    assert "a broken one #raise-hook" in answered_once(gw, platform, model, "raising", "#raise-hook")
    gw.wait_log("plugin sleepy: before_dispatch hook timeout", 30)
    log = gw.wait_log("plugin raiser: after_turn hook error", 30)
    assert "plugin raiser: before_model_call hook error: raised RuntimeError: the raising hook raised" in log
    assert "Traceback" in log

    def counted():
        _status, body = get(gw, "/metrics")
        lines = [line for line in body.splitlines() if line.startswith("gateway_hook_failures_total{")]
        return lines if any('plugin="sleepy"' in line and 'outcome="timeout"' in line for line in lines) and \
            any('plugin="raiser"' in line and 'hook="before_model_call"' in line for line in lines) else None
    wait_for(counted, 30, 0.2, "hook failures in /metrics")
    # Well past the sleepy hook's own end: its late rewrite never reached anything, and nothing was answered twice.
    assert not requests_for(model, "late rewrite")
    assert len(visible(platform, "sleepy")) == 1 and len(visible(platform, "raising")) == 1


def test_a_plugin_found_by_entry_point_runs_without_configuration_and_hooks_see_redacted_text(rig):
    gw, platform, model = rig
    platform.inject("audited", f"keep this {KEY_SHAPE} safe")
    settled_answers(platform, "audited", 1, 60, gw)
    audit = gw.state / "plugins" / "keyword_filter" / "audit.jsonl"

    def audited():
        lines = [json.loads(line) for line in audit.read_text().splitlines()] if audit.exists() else []
        return [e for e in lines if e["chat"] == "audited"] or None
    [entry] = wait_for(audited, 30, 0.1, f"an audit line for the chat 'audited' in {audit}")
    assert entry["by"] == "consumer" and entry["parts"] == 1 and "text" not in entry
    seen = (gw.state / "plugins" / "rewriter" / "seen.jsonl").read_text()
    assert "keep this [redacted] safe" in seen and KEY_SHAPE not in seen


def seen(gw, hook: str) -> list[dict]:
    path = gw.state / "plugins" / "rewriter" / "seen.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [e for e in lines if e["hook"] == hook]


def test_observers_see_each_turn_each_adapter_connection_and_what_the_sweeper_delivers(rig):
    gw, platform, model = rig
    platform.inject("observed", "tell me about the turn")
    settled_answers(platform, "observed", 1, 60, gw)
    turns = wait_for(lambda: [t for t in seen(gw, "after_turn") if t["text"] == "tell me about the turn"] or None,
                     30, 0.1, "the turn's after_turn event")
    assert turns[0]["delivered"] and "tell me about the turn" in turns[0]["answer"] and turns[0]["tools"] == []
    assert any(e["adapter"] == "fake" and e["connected"] for e in seen(gw, "on_adapter_state")), \
        seen(gw, "on_adapter_state")
    # A reply whose owner died (claimed by a process that exited): the sweeper delivers it, and says so.
    orphan_reply(gw, "swept", "finished by the sweeper")
    assert settled_answers(platform, "swept", 1, 60, gw) == ["finished by the sweeper"]
    audit = gw.state / "plugins" / "keyword_filter" / "audit.jsonl"
    wait_for(lambda: any(json.loads(line)["by"] == "sweeper" and json.loads(line)["chat"] == "swept"
                         for line in audit.read_text().splitlines()) or None, 30, 0.1, "the sweeper's audit line")
