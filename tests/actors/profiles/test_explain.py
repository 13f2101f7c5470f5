"""actors/profiles/explain.py and ``run_gateway.py routes``: the SOURCE syntax, the answer, the CLI's exits."""
from __future__ import annotations

import json

import pytest

import run_gateway
from actors.profiles.explain import BadSource, parse_source

pytestmark = pytest.mark.timeout(30)

ADAPTERS = {"tg": {"type": "telegram"}, "dc": {"type": "discord"}}
CONFIG = """
[agent]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "base-model"

[adapters.tg]
type = "fake"
base_url = "http://127.0.0.1:9"

[profiles.support]
system_prompt = "You are support."
agent = { model = "support-model", tools = ["clock"] }

[[routes]]
name = "support-chat"
chat = "-100"
profile = "support"
respond = "all"

[[routes]]
adapter = "tg"
user = 9
per_user_in_groups = true
"""


def test_the_source_syntax():
    seen = parse_source("tg:chat=-100, user=9,type=group", ADAPTERS)
    assert (seen.adapter, seen.platform, seen.chat, seen.user, seen.chat_type) == ("tg", "telegram", "-100", "9",
                                                                                   "group")
    assert parse_source("dc:community=5,chat=6", ADAPTERS).chat_type == "group"   # a community: not a DM
    assert parse_source("tg", ADAPTERS).chat is None


@pytest.mark.parametrize("text, reason", [
    ("", "starts with an adapter"), ("nope:chat=1", "no adapter 'nope'"), ("tg:chat", "FIELD=VALUE"),
    ("tg:colour=red", "unknown field"), ("tg:chat=1,chat=2", "given twice"), ("tg:chat=1,type=room", "type must"),
    ("tg:thread=4", "give chat too"),
], ids=["empty", "adapter", "no-value", "field", "twice", "type", "thread-alone"])
def test_bad_sources_say_why(text, reason):
    with pytest.raises(BadSource, match=reason):
        parse_source(text, ADAPTERS)


def run(tmp_path, capsys, *words, config=CONFIG):
    path = tmp_path / "gw.toml"
    path.write_text(config)
    code = run_gateway.main(["--config", str(path), *words])
    return code, capsys.readouterr()


def test_explain_names_route_profile_agent_and_the_losers(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GATEWAY_STATE_DIR", str(tmp_path / "state"))
    code, seen = run(tmp_path, capsys, "routes", "explain", "tg:chat=-100,user=9,type=group", "--json")
    answer = json.loads(seen.out)
    assert code == 0 and answer["route"] == "support-chat" and answer["profile"] == "support"
    assert answer["model"] == "support-model" and answer["tools"] == ["clock"] and answer["respond"] == "all"
    assert answer["matched"] == ["chat=-100"] and answer["session_key"].startswith("support.tg.group.chat-")
    assert answer["lost"] == [{"route": "routes[2]", "why": "matches too, but support-chat is more specific (it "
                                                            "names chat)"}]
    code, seen = run(tmp_path, capsys, "routes", "explain", "tg:chat=5,user=9,type=group")
    assert code == 0 and "route:    routes[2]" in seen.out and "one session per user" in seen.out
    assert "profile:  default (from [adapters.tg] profile" in seen.out and "base-model" in seen.out


def test_list_orders_most_specific_first_and_bad_input_exits_usage(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GATEWAY_STATE_DIR", str(tmp_path / "state"))
    code, seen = run(tmp_path, capsys, "routes", "list", "--json")
    assert code == 0 and [r["route"] for r in json.loads(seen.out)["routes"]] == ["support-chat", "routes[2]"]
    code, seen = run(tmp_path, capsys, "routes", "explain", "tg:who=1", "--json")
    assert code == 2 and "unknown field" in json.loads(seen.out)["error"]


def test_a_bad_route_or_profile_stops_every_command_that_uses_the_file_with_exit_78(tmp_path, capsys, monkeypatch):
    """``start``, ``routes``, ``doctor`` and the others that work from the file check it whole. The commands that
    act on the running gateway (``status``, ``health``, ``stop``...) do not: a file being edited must not make a
    health probe fail (a service manager would restart a gateway that runs fine, into the bad file)."""
    monkeypatch.setenv("GATEWAY_STATE_DIR", str(tmp_path / "state"))
    code, seen = run(tmp_path, capsys, "routes", "list", "--json", config=CONFIG + '[[routes]]\nchat = "-100"\n')
    assert code == 78 and json.loads(seen.out)["key"] == "[[routes]] routes[3]"
    bad_tool = CONFIG.replace('tools = ["clock"]', 'tools = ["rm"]')
    code, seen = run(tmp_path, capsys, "start", "--json", config=bad_tool)
    assert code == 78 and json.loads(seen.out)["key"] == "[profiles.support.agent] tools"
    for command in ("status", "health", "stop"):
        code, seen = run(tmp_path, capsys, command, "--json", config=bad_tool)
        assert code == 3 and "no gateway running" in seen.out, (command, seen.out)
