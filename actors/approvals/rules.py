"""Which tool calls of a profile wait for a person's yes, and who may give it: the settings of a profile's
approvals, checked at load, and the matching of a tool's name (pure; docs/approvals.md).

    [profiles.ops]
    approve_tools = ["calculator", "files.delete_*"]   # fnmatch patterns of tool names (below)
    approval_timeout_s = 600                           # how long a question waits (10 to 86400 s)
    approvers = "chat"                                 # chat (anyone in the asking chat, or the operator) | operator

A tool is named as a profile names it everywhere else: a built-in tool by its name, an MCP tool as
``server.tool`` (as ``mcp_allow`` does; the model calls it ``server__tool``, common/mcp_config.py). One name per
tool, so ``*`` guards every tool and ``files.*`` every tool of one server.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any, Collection, Mapping

from common.config import ConfigError, did_you_mean, gathering, raise_gathered
from common.mcp_config import TOOL_SEPARATOR

DEFAULT_TIMEOUT_S = 600.0
TIMEOUT_RANGE_S = (10.0, 86_400.0)     # a question waits at least long enough to be read, at most a day
MAX_PATTERNS = 100
PATTERN = re.compile(r"[A-Za-z0-9_.*?\[\]!-]{1,130}")   # a server.tool name and fnmatch's wildcards
WILDCARDS = set("*?[")
# The values storage/approvals.py keeps (its column's CHECK); not imported from there, so that reading a
# configuration (every admin command) does not load the storage layer.
APPROVERS = ("chat", "operator")


@dataclass(frozen=True)
class ApprovalSettings:
    patterns: tuple = ()                   # nothing guarded: no call waits
    timeout_s: float = DEFAULT_TIMEOUT_S
    approvers: str = "chat"                # chat | operator

    @property
    def enabled(self) -> bool:
        return bool(self.patterns)


def policy_name(tool_name: str) -> str:
    """The name a profile's patterns match, from the name the model calls a tool by: ``files__delete`` (an MCP
    server's tool; a server name never holds ``__``) is ``files.delete``; a built-in tool keeps its name."""
    server, separator, tool = tool_name.partition(TOOL_SEPARATOR)
    return f"{server}.{tool}" if separator and server and tool else tool_name


def needs_approval(settings: ApprovalSettings, tool_name: str) -> bool:
    """Whether a call of ``tool_name`` (as the model names it) waits for a yes under ``settings``."""
    name = policy_name(tool_name)
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in settings.patterns)


def _pattern_problem(pattern: Any, builtin_tools: Collection[str], mcp_servers: Collection[str]) -> str:
    """Why ``pattern`` cannot be one of ``approve_tools`` ("" when it can)."""
    if not isinstance(pattern, str) or not PATTERN.fullmatch(pattern):
        return (f"each pattern is 1-130 of a-z A-Z 0-9 _ - . and the wildcards * ? [ ] !, got {pattern!r} (a "
                "built-in tool's name, or server.tool for an MCP server's tool)")
    if pattern.count(".") > 1:
        return f"pattern {pattern!r} has more than one '.': an MCP tool is named server.tool, e.g. \"files.delete\""
    if WILDCARDS & set(pattern):
        return ""
    server, dot, _tool = pattern.partition(".")
    if not dot and pattern not in builtin_tools:
        return (f"no built-in tool is named {pattern!r}{did_you_mean(pattern, builtin_tools)} (built-in tools: "
                f"{', '.join(sorted(builtin_tools))}; an MCP server's tool is server.tool)")
    if dot and server not in mcp_servers:
        return (f"pattern {pattern!r} names the server {server!r}, and no [mcp.{server}] server is configured "
                f"(configured: {', '.join(sorted(mcp_servers)) or 'none'})")
    return ""


def approval_settings(file: str, where: str, table: Mapping, builtin_tools: Collection[str],
                      mcp_servers: Collection[str]) -> ApprovalSettings:
    """A profile table's approval keys (their types already checked by the profile's ``Spec``s), checked: a
    ConfigError naming each bad key (``more``). ``builtin_tools``, ``mcp_servers``: the names a plain pattern may
    give (a typo would otherwise guard nothing, silently)."""
    errors: list[ConfigError] = []
    patterns = table.get("approve_tools", [])
    with gathering(errors):
        if len(patterns) > MAX_PATTERNS:
            raise ConfigError(file, f"{where} approve_tools", f"at most {MAX_PATTERNS} patterns, got {len(patterns)}")
        for pattern in patterns:
            with gathering(errors):
                if problem := _pattern_problem(pattern, builtin_tools, mcp_servers):
                    raise ConfigError(file, f"{where} approve_tools", problem)
        if len(set(map(repr, patterns))) != len(patterns):
            raise ConfigError(file, f"{where} approve_tools", "names a pattern twice")
    timeout_s = table.get("approval_timeout_s", DEFAULT_TIMEOUT_S)
    least, most = TIMEOUT_RANGE_S
    with gathering(errors):
        if not least <= timeout_s <= most:
            raise ConfigError(file, f"{where} approval_timeout_s", f"must be {least:g} to {most:g} seconds, got "
                                                                   f"{timeout_s!r}")
    approvers = table.get("approvers", "chat")
    with gathering(errors):
        if approvers not in APPROVERS:   # the Spec's allowed values say it first; kept for a caller without them
            raise ConfigError(file, f"{where} approvers", f"must be one of {', '.join(map(repr, APPROVERS))}, got "
                                                          f"{approvers!r}")
    raise_gathered(errors)
    return ApprovalSettings(tuple(patterns), float(timeout_s), approvers)
