"""actors/profiles/profiles.py: [profiles.NAME] validated like adapter tables, resolved over [agent]."""
from __future__ import annotations

import pytest

from actors.agents.offline import OfflineAgent
from actors.agents.openai_compat import OpenAICompatAgent
from actors.profiles.profiles import Profiles, resolve, validate_profiles
from common.config import ConfigError, validate

BASE = {"agent": {"kind": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "base", "system_prompt": "Base."}}


def config(**profiles):
    return validate({**BASE, "profiles": profiles}, "gw.toml")


def test_a_profile_agent_overrides_agent_key_by_key():
    known = validate_profiles(config(support={"system_prompt": "Support.", "busy_mode": "interrupt",
                                              "agent": {"model": "small", "tools": ["clock"], "timeout_s": 5}}))
    support = known["support"]
    assert support.system_prompt == "Support." and support.busy_mode == "interrupt" and support.declared
    assert support.agent["model"] == "small" and support.agent["base_url"] == "http://127.0.0.1:1/v1"
    assert support.agent["tools"] == ["clock"] and support.agent["timeout_s"] == 5.0
    assert support.agent["system_prompt"] == "Support."


def test_without_a_table_everything_is_inherited():
    cfg = config(plain={})
    known = validate_profiles(cfg)
    for profile in (known["plain"], known["default"], resolve(cfg, "undeclared", known)):
        assert profile.system_prompt == "Base." and profile.busy_mode == "queue"
        assert profile.agent["model"] == "base"


@pytest.mark.parametrize("profiles, key, reason", [
    ({"Bad Name": {}}, "[profiles.Bad Name]", "profile names"),
    ({"p": {"persona": "x"}}, "[profiles.p] persona", "unknown key"),
    ({"p": {"busy_mode": "later"}}, "[profiles.p] busy_mode", "must be one of"),
    ({"p": {"agent": {"model": 3}}}, "[profiles.p.agent] model", "expected a string"),
    ({"p": {"agent": {"tools": ["clock", "shell"]}}}, "[profiles.p.agent] tools", "unknown tool 'shell'"),
    ({"p": {"agent": {"max_tool_rounds": -1}}}, "[profiles.p.agent] max_tool_rounds", "must not be negative"),
    ({"p": {"agent": {"api_key": 12345}}}, "[profiles.p.agent] api_key", "[redacted]"),
    ({"p": {"agent": "small"}}, "[profiles.p] agent", "expected a table"),
    ({"p": {"tool_progress": "verbose"}}, "[profiles.p] tool_progress", "must be one of 'off', 'lines', 'bubble'"),
    ({"p": {"voice_replies": "yes"}}, "[profiles.p] voice_replies", "expected"),
    ({"p": {"models": "big"}}, "[profiles.p] models", "expected"),
    ({"p": {"approve_tools": "calculator"}}, "[profiles.p] approve_tools", "expected"),
    ({"p": {"approve_tools": ["shell_*", "shel"]}}, "[profiles.p] approve_tools", "no built-in tool is named 'shel'"),
    ({"p": {"approve_tools": ["files.delete"]}}, "[profiles.p] approve_tools", "no [mcp.files] server is configured"),
    ({"p": {"approve_tools": ["mcp.files.delete"]}}, "[profiles.p] approve_tools", "more than one '.'"),
    ({"p": {"approve_tools": [{"tool": "clock"}]}}, "[profiles.p] approve_tools", "each pattern is 1-130"),
    ({"p": {"approve_tools": ["clock"], "approval_timeout_s": 1}}, "[profiles.p] approval_timeout_s",
     "must be 10 to 86400 seconds, got 1.0"),
    ({"p": {"approve_tools": ["clock"], "approval_timeout_s": "10m"}}, "[profiles.p] approval_timeout_s", "expected"),
    ({"p": {"approvers": "admins"}}, "[profiles.p] approvers", "must be one of 'chat', 'operator'"),
], ids=["name", "unknown-key", "busy-mode", "type", "tool", "negative", "secret-redacted", "agent-not-table",
        "tool-progress", "voice-replies", "models-not-list", "approve-not-list", "approve-unknown-tool",
        "approve-unknown-server", "approve-two-dots", "approve-not-string", "approval-timeout-range",
        "approval-timeout-type", "approvers"])
def test_bad_tables_are_refused_naming_the_key(profiles, key, reason):
    with pytest.raises(ConfigError) as caught:
        validate_profiles(config(**profiles), "gw.toml")
    assert caught.value.key == key and reason in caught.value.reason


def test_a_profile_names_the_tools_that_wait_for_a_yes():
    cfg = validate({**BASE, "mcp": {"files": {"command": "files-server"}},
                    "profiles": {"ops": {"approve_tools": ["calculator", "files.delete_*"], "approval_timeout_s": 60,
                                         "approvers": "operator"}, "plain": {}}}, "gw.toml")
    known = validate_profiles(cfg)
    ops = known["ops"].approvals
    assert (ops.patterns, ops.timeout_s, ops.approvers) == (("calculator", "files.delete_*"), 60.0, "operator")
    assert not known["plain"].approvals.enabled and not known["default"].approvals.enabled


def test_openai_needs_a_model_somewhere():
    with pytest.raises(ConfigError) as caught:
        validate_profiles(validate({"profiles": {"p": {"agent": {"kind": "openai", "base_url": "http://x/v1"}}}},
                                   "gw.toml"))
    assert caught.value.key == "[profiles.p.agent]" and "needs base_url and model" in caught.value.reason


def test_each_profile_gets_its_own_agent_built_once():
    cfg = config(quiet={"agent": {"kind": "offline", "tools": []}}, small={"agent": {"model": "small"}})
    profiles = Profiles(cfg)
    quiet, small = profiles.agent("quiet"), profiles.agent("small")
    assert isinstance(quiet, OfflineAgent) and isinstance(small, OpenAICompatAgent)
    assert small.model == "small" and profiles.agent("small") is small
    assert profiles.agent(None).model == "base"


def test_a_profile_that_does_not_stream_gets_its_replies_paced_as_without_edits():
    from actors.adapters.registry import reply_pacing
    cfg = validate({**BASE, "adapters": {"tg": {"type": "telegram", "token": "123:abc"}},
                    "profiles": {"plain": {"stream": False}, "live": {}}}, "gw.toml")
    assert reply_pacing(cfg, "tg", "telegram").supports_edit
    assert reply_pacing(cfg, "tg", "telegram", profile="live").supports_edit
    assert not reply_pacing(cfg, "tg", "telegram", profile="plain").supports_edit
    assert validate_profiles(cfg)["plain"].stream is False


def test_a_profile_chooses_how_its_answers_stream_where_the_platform_has_no_edits():
    cfg = validate({**BASE, "profiles": {"parts": {"stream_without_edits": "paragraphs"}, "plain": {}}}, "gw.toml")
    known = validate_profiles(cfg)
    assert (known["parts"].stream_without_edits, known["plain"].stream_without_edits) == ("paragraphs", "final")
    with pytest.raises(ConfigError, match=r"stream_without_edits.*must be one of 'final', 'paragraphs'"):
        validate_profiles({**BASE, "profiles": {"bad": {"stream_without_edits": "words"}}})
