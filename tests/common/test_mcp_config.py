"""[mcp.NAME] tables and a profile's choice of MCP servers and tools: checked at load with errors naming the key."""
import pytest

from actors.config_reload import check_whole
from actors.profiles.profiles import validate_profiles
from common.config import ConfigError, validate
from common.mcp_config import ToolChoice, server_specs

pytestmark = pytest.mark.timeout(30)


def _error(raw: dict) -> ConfigError:
    """The error a start (or reload) gives: the schema, then check_whole's checks of the [mcp] tables."""
    with pytest.raises(ConfigError) as caught:
        check_whole(validate(raw, "g.toml"))
    return caught.value


def test_a_stdio_and_an_http_server_are_read():
    config = validate({"mcp": {
        "files": {"command": "mcp-files", "args": ["--root", "/srv"], "env": {"TOKEN": "FILES_TOKEN"}, "cwd": "/tmp",
                  "timeout_s": 5, "max_result_chars": 1000},
        "web": {"url": "https://mcp.example/mcp", "headers": {"Authorization": "WEB_AUTH"}}}}, "g.toml")
    specs = server_specs(config)
    assert specs["files"].transport == "stdio" and specs["files"].args == ("--root", "/srv")
    assert specs["files"].env == (("TOKEN", "FILES_TOKEN"),) and specs["files"].timeout_s == 5.0
    assert specs["web"].transport == "http" and specs["web"].headers == (("Authorization", "WEB_AUTH"),)
    assert specs["web"].timeout_s == 30.0 and specs["web"].max_result_chars == 20_000


@pytest.mark.parametrize("table, key, words", [
    ({}, "[mcp.s]", "exactly one of command"),
    ({"command": "x", "url": "http://h/mcp"}, "[mcp.s]", "exactly one of command"),
    ({"url": "ftp://h"}, "[mcp.s] url", "http:// or https://"),
    ({"url": "http://h/mcp", "args": ["a"]}, "[mcp.s] args", "stdio servers"),
    ({"command": "x", "headers": {"A": "B"}}, "[mcp.s] headers", "HTTP servers"),
    ({"command": "x", "timout_s": 3}, "[mcp.s] timout_s", "did you mean 'timeout_s'"),
    ({"command": "x", "timeout_s": 0}, "[mcp.s] timeout_s", "above 0"),
    ({"command": "x", "max_result_chars": 10}, "[mcp.s] max_result_chars", "between 100"),
    ({"command": "x", "max_calls_in_flight": 0}, "[mcp.s] max_calls_in_flight", "between 1 and 256"),
    ({"command": "x", "args": [1]}, "[mcp.s] args", "array of strings"),
    ({"command": 3}, "[mcp.s] command", "expected a string"),
])
def test_a_bad_server_table_is_refused_naming_the_key(table, key, words):
    error = _error({"mcp": {"s": table}})
    assert error.key == key and words in error.reason, (error.key, error.reason)


def test_a_secret_written_in_the_file_is_refused_and_not_echoed():
    error = _error({"mcp": {"web": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer sk-very-secret"}}}})
    assert error.key == "[mcp.web] headers.Authorization" and "environment variable" in error.reason
    assert "sk-very-secret" not in str(error)


def test_a_server_name_that_would_break_tool_names_is_refused():
    assert "server names" in _error({"mcp": {"a__b": {"command": "x"}}}).reason
    assert "server names" in _error({"mcp": {"A": {"command": "x"}}}).reason


def test_a_profile_chooses_servers_and_tools_by_pattern():
    config = validate({"mcp": {"files": {"command": "x"}, "web": {"command": "y"}},
                       "profiles": {"p": {"mcp_servers": ["files"], "mcp_allow": ["files.read_*", "files.list"],
                                          "mcp_deny": ["*.read_secret*"]}}}, "g.toml")
    choice = validate_profiles(config)["p"].mcp
    assert choice.offers("files", "read_file") and choice.offers("files", "list")
    assert not choice.offers("files", "read_secrets") and not choice.offers("files", "write")
    assert not choice.offers("web", "read_file")
    assert validate_profiles(config)["default"].mcp == ToolChoice()   # every server, every tool
    assert ToolChoice().offers("web", "anything")


@pytest.mark.parametrize("table, words", [
    ({"mcp_servers": ["nope"]}, "no [mcp.nope] server"),
    ({"mcp_allow": ["read_*"]}, "must match server.tool"),
    ({"mcp_deny": "files.*"}, "expected"),
])
def test_a_bad_profile_choice_is_refused(table, words):
    config = validate({"mcp": {"files": {"command": "x"}}, "profiles": {"p": table}}, "g.toml")
    with pytest.raises(ConfigError) as caught:
        validate_profiles(config, "g.toml")
    assert words in caught.value.reason and caught.value.key.startswith("[profiles.p]")
