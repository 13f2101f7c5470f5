"""``config show`` takes the secrets out by key itself (the admin output's redaction filter is a second line), and
its TOML reads back as the same values."""
from __future__ import annotations

import tomllib

import pytest

from actors.adapters import registry
from common import config as config_mod
from common.config import ConfigError
from daemon.cli_config import NOT_IN_SAMPLE, adapter_samples, effective, toml_text

pytestmark = pytest.mark.timeout(30)


def test_every_secret_option_is_redacted_by_its_key_and_the_rest_is_kept():
    config = config_mod.validate({
        "agent": {"api_key": "SECRET-agent", "api_key_env": "MY_KEY"},
        "adapters": {"api": {"type": "http", "api_tokens": ["SECRET-t1", "SECRET-t2"], "hmac_secret": "SECRET-hmac"},
                     "tg": {"type": "telegram", "token": "SECRET-bot", "webhook_secret": ""}},
    }, "test")
    shown = effective(config)
    assert shown["agent"]["api_key"] == "[redacted]" and shown["agent"]["api_key_env"] == "MY_KEY"
    assert shown["adapters"]["api"]["api_tokens"] == "[redacted]" == shown["adapters"]["api"]["hmac_secret"]
    assert shown["adapters"]["tg"]["token"] == "[redacted]"
    assert shown["adapters"]["tg"]["webhook_secret"] == "", "an empty secret shows that it is not set"
    assert "SECRET-" not in repr(shown)
    assert config["agent"]["api_key"] == "SECRET-agent", "the configuration itself is left alone"


def test_the_text_form_is_toml_of_the_same_values():
    config = config_mod.validate({"sessions": {"resent_marker": "↻ \"quoted\" \\ back"},
                                  "adapters": {"x": {"type": "fake", "base_url": "http://127.0.0.1:9",
                                                     "limits": {"per_minute": 5}}}}, "test")
    shown = effective(config)
    assert tomllib.loads(toml_text(shown)) == {
        s: {n: {k: v for k, v in t.items() if v is not None} for n, t in tables.items()}
        if s in config_mod.OPEN_SECTIONS else tables for s, tables in shown.items()}


def test_the_sample_has_a_table_for_every_platform_whose_keys_its_type_takes():
    """Each platform's commented table, uncommented, is TOML of a table with its type's required keys and no key the
    type does not take (its placeholders are no real values: only those may be refused)."""
    blocks = {block.splitlines()[1].split('"')[1]: block for block in adapter_samples()}
    assert set(blocks) == set(registry.REGISTRY) - set(NOT_IN_SAMPLE)
    for kind, block in blocks.items():
        table = tomllib.loads("\n".join(line[2:].split("   #")[0] for line in block.splitlines()))["adapters"][kind]
        try:
            registry.validate_adapter(kind, table)
        except ConfigError as exc:
            problems = [exc] + list(exc.more)
            assert not any("missing" in p.reason or "unknown key" in p.reason for p in problems), (kind, problems)
