"""``[mcp.NAME]`` tables: the MCP servers whose tools the agent may offer (docs/mcp.md). Pure: checked at load
(``ConfigError`` naming the key: exit 78), read by actors/agents/mcp_hub.py.

A server is either a local program spoken to over stdio (``command``, ``args``, ``env``, ``cwd``) or a streamable
HTTP endpoint (``url``, ``headers``). Secrets are never written in the file: a header's value names the environment
variable that holds it (``headers = { Authorization = "GITHUB_AUTH" }``), like ``api_key_env``; an ``env`` entry
passed to a stdio server likewise names a variable of the daemon's environment (``env = { TOKEN = "MY_TOKEN" }``).
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from common.config import ConfigError, unknown_name

SERVER_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]|_(?!_)){0,23}")   # "__" separates server and tool in a tool name
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TOOL_SEPARATOR = "__"
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_RESULT_CHARS = 20_000
# Calls one server may have in flight (per process: each shard has its own connection to it): each holds a request
# in the server (a subprocess or a remote endpoint) until it answers or its timeout_s; chats that make the model call
# a hanging tool again and again meet this bound. 32: twenty chats of one shard calling a quick tool at once, with a
# hung call beside them, all go through (tests/pipeline/test_mcp_tools.py).
DEFAULT_MAX_CALLS_IN_FLIGHT = 32
MAX_CALLS_IN_FLIGHT_LIMIT = 256
MAX_RESULT_CHARS_LIMIT = 1_000_000

# key -> (type, what it is)
SERVER_KEYS: dict[str, tuple[type, str]] = {
    "command": (str, "the program of a stdio server"),
    "args": (list, "its arguments (strings)"),
    "env": (dict, "variables given to it: NAME = \"VARIABLE_OF_THE_DAEMON_HOLDING_THE_VALUE\""),
    "cwd": (str, "its working directory"),
    "url": (str, "a streamable HTTP server's endpoint, e.g. https://host/mcp"),
    "headers": (dict, "HTTP headers: Header-Name = \"VARIABLE_HOLDING_THE_VALUE\""),
    "timeout_s": (float, f"how long one tool call may take (default {DEFAULT_TIMEOUT_S:g})"),
    "max_result_chars": (int, f"the longest tool result the model reads (default {DEFAULT_MAX_RESULT_CHARS})"),
    "max_calls_in_flight": (int, "calls this server may have unanswered at once; one more is refused at once, and "
                                 f"the model told (default {DEFAULT_MAX_CALLS_IN_FLIGHT})"),
    "enabled": (bool, "false: configured but not started"),
}
PROFILE_MCP_KEYS = ("mcp_servers", "mcp_allow", "mcp_deny")


@dataclass(frozen=True)
class McpServerSpec:
    """One checked ``[mcp.NAME]`` table. ``env`` and ``headers`` map names to the *variables* holding the values."""
    name: str
    command: str = ""
    args: tuple = ()
    env: tuple = ()                 # of (name, variable)
    cwd: str = ""
    url: str = ""
    headers: tuple = ()             # of (header, variable)
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    max_calls_in_flight: int = DEFAULT_MAX_CALLS_IN_FLIGHT

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"


def _typed(file: str, where: str, value: Any, kind: type) -> Any:
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
        names = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "an array",
                 dict: "a table"}
        shown = f"{type(value).__name__}" if kind is dict else repr(value)
        raise ConfigError(file, where, f"expected {names[kind]}, got {shown}")
    return value


def _variables(file: str, where: str, table: Mapping, header: bool) -> tuple:
    out = []
    for key, variable in table.items():
        if not isinstance(variable, str) or not ENV_NAME.fullmatch(variable):
            # never echo the value: someone may have written the secret itself here
            raise ConfigError(file, f"{where}.{key}", "must name an environment variable holding the value (e.g. "
                                                      f"{'API_TOKEN' if header else 'MY_VAR'}), never the value "
                                                      "itself (it is not shown here)")
        if not header and not ENV_NAME.fullmatch(str(key)):
            raise ConfigError(file, f"{where}.{key}", "is not a valid environment variable name")
        out.append((str(key), variable))
    return tuple(out)


def server_spec(file: str, name: str, table: Any) -> McpServerSpec:
    """The checked ``[mcp.NAME]`` table; ConfigError naming the key otherwise."""
    where = f"[mcp.{name}]"
    if not isinstance(name, str) or not SERVER_NAME.fullmatch(name):
        raise ConfigError(file, where, "server names are 1-24 of a-z, 0-9, '-' or '_' (never two '_' in a row), "
                                       "starting with a letter or digit")
    if not isinstance(table, Mapping):
        raise ConfigError(file, where, "must be a table")
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in SERVER_KEYS:
            raise ConfigError(file, f"{where} {key}", unknown_name("key", key, SERVER_KEYS))
        values[key] = _typed(file, f"{where} {key}", value, SERVER_KEYS[key][0])
    has_command, has_url = bool(values.get("command")), bool(values.get("url"))
    if has_command == has_url:
        raise ConfigError(file, where, "needs exactly one of command (a stdio server) or url (a streamable HTTP "
                                       "server)")
    stdio_only = [k for k in ("args", "env", "cwd") if k in values]
    if has_url and stdio_only:
        raise ConfigError(file, f"{where} {stdio_only[0]}", "is for stdio servers (command); this one has a url")
    if has_command and "headers" in values:
        raise ConfigError(file, f"{where} headers", "is for HTTP servers (url); this one has a command")
    if has_url and not re.match(r"https?://[^/\s]+", values["url"]):
        raise ConfigError(file, f"{where} url", f"must be an http:// or https:// URL, got {values['url']!r}")
    if not all(isinstance(a, str) for a in values.get("args", [])):
        raise ConfigError(file, f"{where} args", "must be an array of strings")
    timeout_s = values.get("timeout_s", DEFAULT_TIMEOUT_S)
    if not 0 < timeout_s <= 3600:
        raise ConfigError(file, f"{where} timeout_s", f"must be above 0 and at most 3600, got {timeout_s!r}")
    max_chars = values.get("max_result_chars", DEFAULT_MAX_RESULT_CHARS)
    if not 100 <= max_chars <= MAX_RESULT_CHARS_LIMIT:
        raise ConfigError(file, f"{where} max_result_chars",
                          f"must be between 100 and {MAX_RESULT_CHARS_LIMIT}, got {max_chars!r}")
    in_flight = values.get("max_calls_in_flight", DEFAULT_MAX_CALLS_IN_FLIGHT)
    if not 1 <= in_flight <= MAX_CALLS_IN_FLIGHT_LIMIT:
        raise ConfigError(file, f"{where} max_calls_in_flight",
                          f"must be between 1 and {MAX_CALLS_IN_FLIGHT_LIMIT}, got {in_flight!r}")
    return McpServerSpec(
        name=name, command=values.get("command", ""), args=tuple(values.get("args", ())),
        env=_variables(file, f"{where} env", values.get("env", {}), header=False), cwd=values.get("cwd", ""),
        url=values.get("url", ""), headers=_variables(file, f"{where} headers", values.get("headers", {}),
                                                      header=True),
        timeout_s=timeout_s, max_result_chars=max_chars, max_calls_in_flight=in_flight)


def server_specs(config: Mapping, file: str = "(configuration)") -> dict[str, McpServerSpec]:
    """Every enabled ``[mcp.NAME]`` server, checked: {name: spec}."""
    out = {}
    for name, table in (config.get("mcp") or {}).items():
        spec = server_spec(file, name, table)
        if table.get("enabled", True):
            out[name] = spec
    return out


def check_servers(file: str, config: Mapping) -> None:
    server_specs(config, file)


@dataclass(frozen=True)
class ToolChoice:
    """Which MCP servers and tools a profile offers. ``servers`` None: every configured one. Patterns (fnmatch)
    match ``server.tool``; a tool is offered when it matches an allow pattern (or there are none) and no deny."""
    servers: tuple | None = None
    allow: tuple = ()
    deny: tuple = field(default=())

    def offers_server(self, server: str) -> bool:
        return self.servers is None or server in self.servers

    def offers(self, server: str, tool: str) -> bool:
        qualified = f"{server}.{tool}"
        if not self.offers_server(server):
            return False
        if self.allow and not any(fnmatch.fnmatchcase(qualified, p) for p in self.allow):
            return False
        return not any(fnmatch.fnmatchcase(qualified, p) for p in self.deny)


def tool_choice(file: str, where: str, table: Mapping, known_servers) -> ToolChoice:
    """A profile table's ``mcp_servers`` / ``mcp_allow`` / ``mcp_deny``, checked against the configured servers."""
    lists = {}
    for key in PROFILE_MCP_KEYS:
        if key not in table:
            continue
        value = table[key]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ConfigError(file, f"{where} {key}", "must be an array of non-empty strings")
        lists[key] = tuple(value)
    for server in lists.get("mcp_servers", ()):
        if server not in known_servers:
            raise ConfigError(file, f"{where} mcp_servers", f"no [mcp.{server}] server is configured "
                                                            f"(configured: {', '.join(sorted(known_servers)) or 'none'})")
    for key in ("mcp_allow", "mcp_deny"):
        for pattern in lists.get(key, ()):
            if "." not in pattern:
                raise ConfigError(file, f"{where} {key}", f"pattern {pattern!r} must match server.tool, e.g. "
                                                          "\"files.read_*\" or \"*.search\"")
    return ToolChoice(servers=lists.get("mcp_servers"), allow=lists.get("mcp_allow", ()),
                      deny=lists.get("mcp_deny", ()))


def model_tool_name(server: str, tool: str) -> str:
    """The name the model calls a server's tool by (OpenAI function names: ``^[a-zA-Z0-9_-]{1,64}$``)."""
    return f"{server}{TOOL_SEPARATOR}{tool}"


MODEL_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
