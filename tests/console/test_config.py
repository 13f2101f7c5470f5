"""The [console] table: on by default, on loopback, read-only; off, the tree has no console."""
from __future__ import annotations

import pytest

from actors.root import root_children
from common.config import ConfigError, defaults, validate

pytestmark = pytest.mark.timeout(10)


def test_the_defaults_are_loopback_enabled_read_only():
    console = defaults()["console"]
    assert (console["enabled"], console["host"], console["allow_actions"], console["login_token"]) == \
        (True, "127.0.0.1", False, "")
    assert "console" in [spec.name for spec in root_children(validate({}, "gateway.toml"))]


def test_disabled_the_tree_has_no_console():
    config = validate({"console": {"enabled": False}}, "gateway.toml")
    assert "console" not in [spec.name for spec in root_children(config)]


def test_a_host_that_is_not_an_address_is_refused():
    with pytest.raises(ConfigError, match=r"\[console\] host"):
        validate({"console": {"host": "example.org", "login_token": "x"}}, "gateway.toml")
    validate({"console": {"host": "localhost"}}, "gateway.toml")
