"""actors/approvals/rules.py: which tool calls wait for a yes (a profile's patterns over one name per tool), and
the approval keys of a profile checked at load."""
from __future__ import annotations

import pytest

from actors.approvals import rules
from actors.approvals.rules import ApprovalSettings, approval_settings, needs_approval, policy_name
from common.config import ConfigError
from storage import approvals as stored

pytestmark = pytest.mark.timeout(30)

BUILTIN = ("calculator", "clock", "text_image", "remember", "forget")
SERVERS = ("files", "search")


def settings(*patterns: str) -> ApprovalSettings:
    return ApprovalSettings(patterns=patterns)


def test_an_mcp_tool_is_matched_as_server_dot_tool_and_a_builtin_by_its_name():
    assert policy_name("files__delete_file") == "files.delete_file"
    assert policy_name("calculator") == "calculator"
    assert policy_name("files__") == "files__" and policy_name("__x") == "__x"   # not a server's tool
    guarded = settings("calculator", "files.delete_*", "*.write")
    assert needs_approval(guarded, "calculator") and not needs_approval(guarded, "clock")
    assert needs_approval(guarded, "files__delete_file") and not needs_approval(guarded, "files__read")
    assert needs_approval(guarded, "search__write") and not needs_approval(guarded, "search__writer")
    assert not needs_approval(guarded, "files__Delete_file")                       # case counts, as everywhere
    assert not needs_approval(settings(), "calculator") and not settings().enabled


def test_a_star_guards_every_tool_and_a_server_star_only_that_servers():
    assert all(needs_approval(settings("*"), name) for name in ("clock", "files__read", "search__web_find"))
    assert needs_approval(settings("files.*"), "files__read") and not needs_approval(settings("files.*"), "clock")
    assert not needs_approval(settings("files.*"), "filesx__read")


def test_the_keys_read_into_settings():
    got = approval_settings("gw.toml", "[profiles.ops]", {"approve_tools": ["clock", "files.*"],
                                                          "approval_timeout_s": 30, "approvers": "operator"},
                            BUILTIN, SERVERS)
    assert got == ApprovalSettings(("clock", "files.*"), 30.0, "operator") and got.enabled
    assert approval_settings("gw.toml", "[profiles.ops]", {}, BUILTIN, SERVERS) == ApprovalSettings()


@pytest.mark.parametrize("table, key, reason", [
    ({"approve_tools": ["calculater"]}, "approve_tools", "no built-in tool is named 'calculater', did you mean "
                                                         "'calculator'?"),
    ({"approve_tools": ["shell.run"]}, "approve_tools", "names the server 'shell', and no [mcp.shell] server"),
    ({"approve_tools": ["mcp.files.delete"]}, "approve_tools", "more than one '.'"),
    ({"approve_tools": [""]}, "approve_tools", "each pattern is 1-130"),
    ({"approve_tools": [3]}, "approve_tools", "got 3"),
    ({"approve_tools": ["rm -rf"]}, "approve_tools", "each pattern is"),
    ({"approve_tools": ["clock", "clock"]}, "approve_tools", "names a pattern twice"),
    ({"approve_tools": [f"files.t{n}" for n in range(101)]}, "approve_tools", "at most 100 patterns"),
    ({"approve_tools": ["clock"], "approval_timeout_s": 5}, "approval_timeout_s", "must be 10 to 86400 seconds"),
    ({"approve_tools": ["clock"], "approval_timeout_s": 86401}, "approval_timeout_s", "must be 10 to 86400"),
    ({"approve_tools": ["clock"], "approvers": "anyone"}, "approvers", "must be one of 'chat', 'operator'"),
])
def test_a_bad_key_is_a_config_error_naming_it(table, key, reason):
    with pytest.raises(ConfigError) as caught:
        approval_settings("gw.toml", "[profiles.ops]", table, BUILTIN, SERVERS)
    assert caught.value.key == f"[profiles.ops] {key}" and reason in caught.value.reason, caught.value


def test_every_bad_key_is_named_in_one_reading():
    with pytest.raises(ConfigError) as caught:
        approval_settings("gw.toml", "[profiles.ops]", {"approve_tools": ["nope", "a.b.c"], "approval_timeout_s": 0},
                          BUILTIN, SERVERS)
    reasons = [e.reason for e in caught.value.every()]
    assert len(reasons) == 3 and "'nope'" in reasons[0] and "'a.b.c'" in reasons[1] and "10 to 86400" in reasons[2]


def test_wildcards_and_plain_names_of_configured_servers_pass():
    patterns = ["*", "files.delete", "*.delete_*", "search.web_[ab]?", "files.[!r]*"]
    got = approval_settings("gw.toml", "[profiles.ops]", {"approve_tools": patterns}, BUILTIN, SERVERS)
    assert got.patterns == tuple(patterns)


def test_the_approvers_a_profile_may_name_are_those_storage_keeps():
    assert rules.APPROVERS == stored.APPROVERS
