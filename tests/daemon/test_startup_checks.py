"""The warnings the gateway gives as it starts (daemon/startup_checks.py): pure, on a config and an environment."""
from __future__ import annotations

import pytest

from common import config as config_mod
from daemon.startup_checks import startup_warnings

OPENAI = {"kind": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key_env": "MY_KEY"}


def configured(**agent) -> dict:
    config = config_mod.defaults()
    config["agent"].update(agent)
    return config


def test_an_openai_agent_without_its_key_variable_is_warned_about_by_name():
    [warning] = startup_warnings(configured(**OPENAI), env={})
    assert "$MY_KEY is not set" in warning and "HTTP 401" in warning


def test_a_model_and_base_url_without_a_kind_are_an_openai_agent_too():
    [warning] = startup_warnings(configured(**{**OPENAI, "kind": ""}), env={"OTHER": "x"})
    assert "$MY_KEY" in warning


@pytest.mark.parametrize("agent, env", [
    (OPENAI, {"MY_KEY": "sk-set"}),
    ({**OPENAI, "api_key": "inline-key"}, {}),
    ({"kind": "offline"}, {}),
    ({}, {}),
])
def test_no_warning_when_the_key_is_there_or_none_is_needed(agent, env):
    assert startup_warnings(configured(**agent), env=env) == []
