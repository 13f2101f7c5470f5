"""The hook machinery without an actor: the bounded runner (answers, overruns, exceptions, the busy bound), plugin
discovery (entry points through a .dist-info on the path, [plugins.NAME] modules, load errors), what each hook point
makes of the answers, and the example plugin."""
from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest

from actors.agents.base import AgentRequest
from actors.hooks import events, points, runner as runner_mod
from actors.hooks.events import Answer, Drop, Rewrite
from actors.hooks.plugins import ENTRY_POINT_GROUP, Plugin, load_plugins, validate_plugins
from actors.hooks.runner import HookRunner, hooks_for
from actors.hooks.plugins import Loaded
from actors.messages import HookFailed
from common.config import ConfigError, defaults
from storage import InboundItem

ROOT = Path(__file__).resolve().parents[3]
SECRET = "sk-" + "A1b2C3d4E5f6G7h8J9k0"    # a key shape: redacted for a plugin not granted secrets


def config(tmp_path: Path, **hooks) -> dict:
    cfg = defaults()
    cfg["gateway"]["state_dir"] = str(tmp_path)
    cfg["hooks"].update(hooks)
    return cfg


def runner_with(tmp_path, *plugins: Plugin, **hooks) -> HookRunner:
    return HookRunner(config(tmp_path, **hooks), Loaded(list(plugins)))


def run(coro):
    return asyncio.run(coro)


def message(text: str) -> events.InboundMessage:
    return events.InboundMessage("fake", "fake", "c1", "dm", "u1", "Ann", "default", "m1", text, 0)


# ------------------------------------------------------------------------------------------------- the runner

def test_an_answer_comes_back_and_a_raising_hook_is_skipped_with_its_name_and_traceback(tmp_path):
    def broken(event):
        raise ValueError("no such word")
    r = runner_with(tmp_path, Plugin("echo", {"before_dispatch": lambda e: Rewrite(e.text.upper())}),
                    Plugin("broken", {"before_dispatch": broken}))
    posted = []
    assert run(r.run_one(r.plugins[0], "before_dispatch", message("hi"), posted.append)) == (True, Rewrite("HI"))
    assert run(r.run_one(r.plugins[1], "before_dispatch", message("hi"), posted.append)) == (False, None)
    [failure] = posted
    assert (failure.plugin, failure.hook, failure.outcome) == ("broken", "before_dispatch", "error")
    assert "ValueError: no such word" in failure.log_line and "Traceback" in failure.detail
    assert failure.metric_fact


def test_an_overrun_is_given_up_on_at_its_bound_and_a_stuck_plugin_gets_busy_not_a_growing_queue(tmp_path):
    release = threading.Event()
    stuck = Plugin("stuck", {"after_turn": lambda e: release.wait(30)}, timeout_s=0.05)
    r = runner_with(tmp_path, stuck, threads=1)
    posted = []

    async def many():
        return await asyncio.gather(*(r.run_one(stuck, "after_turn", i, posted.append)
                                      for i in range(runner_mod.QUEUED_PER_THREAD + 5)))
    try:
        results = run(many())
        assert all(result == (False, None) for result in results)
        outcomes = [f.outcome for f in posted]
        assert outcomes.count("busy") >= 3 and "timeout" in outcomes, outcomes
        assert all(f.plugin == "stuck" for f in posted)
    finally:
        release.set()


def test_an_async_hook_is_awaited_and_the_event_is_redacted_unless_secrets_are_granted(tmp_path):
    seen = []

    async def look(event):
        seen.append(event.text)
    cfg = config(tmp_path)
    cfg["adapters"] = {"tg": {"type": "telegram", "token": "123456:configured-token-value-here"}}
    r = HookRunner(cfg, Loaded([Plugin("plain", {"after_turn": look}), Plugin("trusted", {"after_turn": look},
                                                                          see_secrets=True)]))
    text = f"my key {SECRET} and 123456:configured-token-value-here"
    run(r.observe("after_turn", lambda clean: message(clean(text)), [].append))
    assert SECRET not in seen[0] and "configured-token-value-here" not in seen[0] and "[redacted]" in seen[0]
    assert seen[1] == text


def test_an_observer_that_answers_is_told_so(tmp_path):
    r = runner_with(tmp_path, Plugin("chatty", {"on_delivery": lambda e: "ok"}))
    posted = []
    run(r.observe("on_delivery", lambda clean: None, posted.append))
    assert [(f.plugin, f.outcome) for f in posted] == [("chatty", "bad_answer")]


# ---------------------------------------------------------------------------------------------- discovery

def write_dist_info(site: Path, name: str, target: str) -> None:
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {target}\n")


def test_entry_points_are_discovered_and_config_named_modules_loaded_and_failures_reported(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "ep_plugin_mod.py").parent.mkdir(parents=True)
    (site / "ep_plugin_mod.py").write_text("def before_dispatch(message):\n    return None\n")
    (site / "cfg_plugin_mod.py").write_text("class P:\n    def __init__(self, options):\n        self.options = options\n"
                                           "    def after_turn(self, turn):\n        return None\n")
    write_dist_info(site, "ep_plugin", "ep_plugin_mod")
    write_dist_info(site, "broken_plugin", "no_such_module_here:thing")
    monkeypatch.syspath_prepend(str(site))
    cfg = config(tmp_path)
    cfg["plugins"] = {"configured": {"module": "cfg_plugin_mod:P", "colour": "blue", "see_secrets": True},
                      "missing": {}, "switched_off": {"module": "no_such_module_here", "enabled": False}}
    loaded = load_plugins(cfg)
    by_name = {p.name: p for p in loaded.plugins}
    assert set(by_name) == {"ep_plugin", "configured"}
    assert by_name["ep_plugin"].origin == "entry point" and by_name["configured"].see_secrets
    options = by_name["configured"].hooks["after_turn"].__self__.options
    assert options["colour"] == "blue" and Path(options["plugin_dir"]) == tmp_path / "plugins" / "configured"
    assert {e.plugin for e in loaded.errors} == {"broken_plugin", "missing"}
    cfg["hooks"]["entry_points"] = False
    assert {p.name for p in load_plugins(cfg).plugins} == {"configured"}


def test_plugin_tables_are_checked_and_runners_are_per_process_and_configuration(tmp_path):
    cfg = config(tmp_path)
    cfg["plugins"] = {"x": {"see_secrets": "yes"}}
    with pytest.raises(ConfigError, match=r"\[plugins.x\] see_secrets"):
        validate_plugins(cfg)
    cfg["plugins"] = {"x": {"timeout_s": 1}}
    validate_plugins(cfg)
    assert hooks_for(cfg) is hooks_for(cfg) and hooks_for(config(tmp_path)) is not hooks_for(cfg)


# ---------------------------------------------------------------------------------------------- hook points

def row(text: str, mid: str = "m1", internal: bool = False) -> InboundItem:
    payload = {"source": {"platform": "fake", "chat_id": "c1", "chat_type": "dm", "user_id": "u1",
                          "user_name": "Ann", "profile": "default", "thread_id": None}, "text": text,
               "platform_message_id": mid}
    if internal:
        payload["internal"] = True
    return InboundItem("key", "fake", mid, payload)


def test_dispatch_rewrites_drops_answers_and_keeps_rows_a_hook_failed_on(tmp_path):
    def verdict(message):
        return {"drop me": Drop(), "answer me": Answer("not today"), "colour": Rewrite("color"),
                "odd": 42}.get(message.text)

    def raises(message):
        raise RuntimeError("bug")
    r = runner_with(tmp_path, Plugin("a", {"before_dispatch": raises}), Plugin("b", {"before_dispatch": verdict}))
    answers, posted = [], []
    rows = [row("colour", "1"), row("drop me", "2"), row("answer me", "3"), row("odd", "4"), row("plain", "5"),
            row("drop me", "6", internal=True)]
    kept = run(points.dispatch_rows(r, rows, "fake", "fake", posted.append,
                                    lambda source, text, mid: answers.append((source["chat_id"], text, mid))))
    assert [k.payload["text"] if k else None for k in kept] == ["color", None, None, "odd", "plain", "drop me"]
    assert kept[4] is rows[4] and answers == [("c1", "not today", "3")]
    outcomes = sorted((f.plugin, f.outcome) for f in posted)
    assert outcomes == [("a", "error")] * 5 + [("b", "bad_answer")], outcomes


def test_context_goes_in_as_a_system_message_before_the_users_message(tmp_path):
    r = runner_with(tmp_path, Plugin("ctx", {"before_model_call": lambda call: f"the user said {call.text!r}"}),
                    Plugin("quiet", {"before_model_call": lambda call: None}))
    request = AgentRequest(({"role": "system", "content": "persona"}, {"role": "user", "content": "hello"}),
                           "default", "t1")
    out = run(points.with_context(r, "key", request, [].append))
    assert out.messages == ({"role": "system", "content": "persona"},
                            {"role": "system", "content": "the user said 'hello'"},
                            {"role": "user", "content": "hello"})
    assert run(points.with_context(runner_with(tmp_path), "key", request, [].append)) is request


def test_hook_failures_are_bridge_facts_the_actor_thread_logs_and_reports():
    failure = HookFailed("p", "after_turn", "timeout", "no answer within 2s; skipped")
    assert failure.metric_fact and failure.log_line == "plugin p: after_turn hook timeout: no answer within 2s; skipped"


# ------------------------------------------------------------------------------------------ the example plugin

def test_the_example_keyword_filter(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "keyword_filter"))
    from gateway_keyword_filter import KeywordFilter
    f = KeywordFilter({"blocked": ["casino"], "blocked_reply": "No.", "replace": {"colour": "color"},
                       "plugin_dir": str(tmp_path)})
    assert f.before_dispatch(message("Best CASINO deals")) == Answer("No.")
    assert KeywordFilter({"blocked": ["casino"]}).before_dispatch(message("casino")) == Drop("blocked word")
    assert f.before_dispatch(message("my favourite Colour")) == Rewrite("my favourite color")
    assert f.before_dispatch(message("casinos are fine")) is None
    f.on_delivery(events.Delivery("k", "fake", "c1", None, "t1", "the answer", ("9",), "consumer"))
    line = (tmp_path / "audit.jsonl").read_text()
    assert '"chars": 10' in line and "the answer" not in line
    sys.modules.pop("gateway_keyword_filter", None)


def test_doctor_says_which_plugins_load_and_why_one_does_not_without_making_their_directories(tmp_path):
    from daemon.doctor import plugin_checks
    cfg = config(tmp_path, entry_points=False)
    cfg["plugins"] = {"good": {"module": "tests.integration.hook_plugins:Raiser"}, "bad": {"module": "no_such_mod_x"}}
    checks = {c.name: c for c in plugin_checks(cfg)}
    assert checks["plugin good"].status == "ok" and "after_turn, before_model_call" in checks["plugin good"].detail
    assert checks["plugin bad"].status == "fail" and "ModuleNotFoundError" in checks["plugin bad"].detail
    assert not (tmp_path / "plugins").exists()


def test_a_full_round_goes_through_a_healthy_hook_and_a_stuck_one_costs_it_one_bound(tmp_path):
    import time
    release = threading.Event()
    upper = Plugin("upper", {"before_dispatch": lambda m: Rewrite(m.text.upper())})
    stuck = Plugin("stuck", {"before_dispatch": lambda m: release.wait(30)}, timeout_s=0.2)
    rows = [row(f"row {i}", str(i)) for i in range(100)]
    kept = run(points.dispatch_rows(runner_with(tmp_path, upper), rows, "fake", "fake", [].append, None))
    assert [k.payload["text"] for k in kept] == [f"ROW {i}" for i in range(100)]
    posted, started = [], time.monotonic()
    try:
        kept = run(points.dispatch_rows(runner_with(tmp_path, stuck), rows, "fake", "fake", posted.append, None))
    finally:
        release.set()
    assert kept == rows and time.monotonic() - started < 5, time.monotonic() - started
    assert {f.outcome for f in posted} == {"timeout"} and len(posted) == 100
