"""The adapter registry: [adapters.NAME] tables -> validated args -> child specs; errors name the key."""
from __future__ import annotations

import dataclasses

import pytest

from actors.adapters import registry
from actors.adapters.registry import Option
from actors.adapters.spec import Platform
from actors.adapters.supervisor import adapter_specs
from common.config import ConfigError
from supervision.spec import Restart
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(30)

FAKE = {"type": "fake", "base_url": "http://127.0.0.1:1"}


def config_with(**tables) -> dict:
    return {"_source": "/etc/gw.toml", "adapters": tables}


def test_a_valid_table_gets_its_defaults_and_becomes_one_permanent_child():
    [spec] = [s for s in adapter_specs(config_with(bot=dict(FAKE))) if s.name == "bot"]
    assert spec.name == "bot" and spec.actor == "actors.adapters.fake.adapter.FakePlatformAdapter"
    assert spec.kind_name == "FakePlatformAdapter" and spec.restart is Restart.PERMANENT
    assert spec.args == {**FAKE, "profile": "default", "pacing": {}, "poll_timeout_s": 1.0, "access": "",
                         "allow": [], "pairing": {}, "limits": {}, "max_silence_s": 0.0}


def test_with_no_adapters_configured_the_terminal_and_the_web_chat_run():
    for config in ({"adapters": {}}, {}):
        assert sorted(s.name for s in adapter_specs(config)) == ["cli", "web"]


def test_integers_are_accepted_for_numbers():
    args = registry.validate_adapter("bot", {**FAKE, "poll_timeout_s": 2})
    assert args["poll_timeout_s"] == 2.0 and isinstance(args["poll_timeout_s"], float)


@pytest.mark.parametrize("name, table, key, reason", [
    ("bot", {"base_url": "x"}, "[adapters.bot] type", "missing"),
    ("bot", {**FAKE, "access": "closed"}, "[adapters.bot] access", "must be one of"),
    ("bot", {**FAKE, "allow": [["1"]]}, "[adapters.bot] allow", "strings or integers"),
    ("bot", {**FAKE, "pairing": {"ttl_s": 0}}, "[adapters.bot] pairing", "positive"),
    ("bot", {**FAKE, "pairing": {"ttl": 5}}, "[adapters.bot] pairing", "unknown key"),
    ("bot", {"type": "carrier-pigeon"}, "[adapters.bot] type", "unknown adapter type 'carrier-pigeon'"),
    ("bot", {"type": ["fake"]}, "[adapters.bot] type", "unknown adapter type ['fake']"),
    ("bot", {"type": "fake"}, "[adapters.bot] base_url", "missing (required"),
    ("bot", {**FAKE, "base_url": "  "}, "[adapters.bot] base_url", "must not be empty"),
    ("bot", {**FAKE, "base_url": 5}, "[adapters.bot] base_url", "expected a string"),
    ("bot", {**FAKE, "poll_timeout_s": "soon"}, "[adapters.bot] poll_timeout_s", "expected a number"),
    ("bot", {**FAKE, "poll_timeout_s": True}, "[adapters.bot] poll_timeout_s", "expected a number"),
    ("bot", {**FAKE, "poll_timeout_s": -1}, "[adapters.bot] poll_timeout_s", "must not be negative"),
    ("bot", {**FAKE, "tokn": "x"}, "[adapters.bot] tokn", "unknown key for type 'fake'"),
    ("bot", {**FAKE, "pacing": {"speed": 1}}, "[adapters.bot] pacing.speed", "unknown pacing field"),
    ("bot", {**FAKE, "pacing": {"per_chat_burst": "3"}}, "[adapters.bot] pacing.per_chat_burst", "expected an int"),
    ("bot", {**FAKE, "pacing": {"supports_edit": 1}}, "[adapters.bot] pacing.supports_edit", "expected true"),
    ("Bad Name", dict(FAKE), "[adapters.Bad Name]", "adapter names must be"),
])
def test_bad_tables_name_the_file_and_key(name, table, key, reason):
    with pytest.raises(ConfigError) as caught:
        adapter_specs(config_with(**{name: table}))
    assert caught.value.file == "/etc/gw.toml" and caught.value.key == key and reason in caught.value.reason


def test_pacing_comes_from_the_platform_with_overrides():
    pacing = registry.pacing_of(registry.validate_adapter("bot", {**FAKE, "pacing": {"per_chat_burst": 2}}))
    assert pacing.platform == "fake" and pacing.per_chat_burst == 2


def test_a_replys_pacing_is_worked_out_once_per_configuration_and_anew_after_a_reload():
    config = config_with(bot={**FAKE, "pacing": {"per_chat_burst": 2}})
    first = registry.reply_pacing(config, "bot", "fake", stream=True)
    assert first.per_chat_burst == 2 and registry.reply_pacing(config, "bot", "fake", stream=True) is first
    reloaded = config_with(bot={**FAKE, "pacing": {"per_chat_burst": 7}})   # a reload is a new config object
    assert registry.reply_pacing(reloaded, "bot", "fake", stream=True).per_chat_burst == 7
    assert not registry.reply_pacing(config, "bot", "fake", stream=False).supports_edit


def like_fake(type_name: str, **changes) -> Platform:
    """The fake platform's entry under another type name."""
    fake = registry.REGISTRY["fake"]
    return dataclasses.replace(fake, type=type_name, pacing=dataclasses.replace(fake.pacing, platform=type_name),
                               **changes)


@pytest.fixture
def secret_type():
    entry = registry.register(like_fake("test-secret", options={"token": Option(str, secret=True)}))
    yield entry
    registry.REGISTRY.pop(entry.type)


def test_secrets_are_listed_for_redaction_and_never_echoed_in_errors(secret_type):
    args = registry.validate_adapter("bot", {"type": "test-secret", "token": "123:very-secret"})
    assert registry.secret_values(args) == ["123:very-secret"]
    with pytest.raises(ConfigError) as caught:
        registry.validate_adapter("bot", {"type": "test-secret", "token": 123456789})
    assert "123456789" not in str(caught.value) and "[redacted]" in str(caught.value)


def test_an_entry_may_not_redefine_the_common_keys():
    with pytest.raises(ValueError):
        registry.register(like_fake("clash", options={"profile": Option(str)}))
    assert "clash" not in registry.REGISTRY


@pytest.mark.timeout(60)
def test_the_daemon_refuses_a_bad_adapter_table_and_names_the_key(tmp_path):
    gw = Gateway(tmp_path, extra_toml='[adapters.bot]\ntype = "fake"\nbase_url = 5\n')
    try:
        result = gw.cli("run", timeout=50)
        assert result.returncode != 0
        assert "[adapters.bot] base_url: expected a string" in result.stdout + result.stderr
    finally:
        gw.kill_everything()
