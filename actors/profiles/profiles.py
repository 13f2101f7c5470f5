"""Profiles: ``[profiles.NAME]`` tables, each a persona with its own agent, tools and busy mode (docs/profiles.md).

A profile is also the first part of every session key (storage/keys.py): two profiles never share a session, so
they never share a transcript. ``default`` is the profile of every adapter that names none; ``[agent]`` is its
agent. A profile's ``agent`` table overrides ``[agent]`` key by key (a profile that only changes the model keeps
the base URL and the key variable); a profile without one runs on ``[agent]``. A profile name that no table
declares (an adapter's ``profile = "x"`` alone) is a namespace only: everything inherited.

Pure: ``validate_profiles`` checks the tables (``ConfigError`` naming the key: exit 78 at load), ``resolve``
gives the ``Profile`` a session runs with. ``Profiles`` is what a session cell keeps: the resolved profiles and
the agents built from them, one per profile, built on first use.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from actors.approvals.rules import APPROVERS, ApprovalSettings, approval_settings
from actors.memory.scope import LIMITS as MEMORY_LIMITS, MEMORY_TOOLS, MODES as MEMORY_MODES, MemorySettings, \
    limit_error, settings_from
from common.config import SCHEMA, TYPE_NAMES, ConfigError, gathering, raise_gathered, setting, unknown_name
from common.mcp_config import ToolChoice, server_specs, tool_choice

PROFILE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")   # a session key shows it as is (storage/keys.py)
DEFAULT_PROFILE = "default"
BUSY_MODES = SCHEMA["sessions"]["busy_mode"][2]
NOT_SET = object()


@dataclass(frozen=True)
class Spec:
    """One key of a profile table (like the adapters' ``Option``): its type, the values it may take, whether it is
    a secret (never shown in an error or an admin view)."""
    kind: type
    allowed: Optional[tuple] = None
    secret: bool = False
    doc: str = ""


PROFILE_KEYS: dict[str, Spec] = {
    "system_prompt": Spec(str, doc="the persona: the system prompt of every request (default: [agent] system_prompt)"),
    "busy_mode": Spec(str, BUSY_MODES, doc="what a message does while a turn runs (default: [sessions] busy_mode)"),
    "agent": Spec(dict, doc="this profile's agent, over [agent] key by key"),
    "description": Spec(str, doc="a note for the operator (shown by `routes explain`)"),
    "stream": Spec(bool, doc="show an answer as it is written, by edits, where the platform edits (default true); "
                             "false: send each answer once, complete"),
    "stream_without_edits": Spec(str, ("final", "paragraphs"), doc="where the platform cannot edit a message "
                                                                   "(WhatsApp, LINE, IRC, email, ...): final (the "
                                                                   "default) sends each answer once, complete; "
                                                                   "paragraphs sends it in paragraph-sized parts as "
                                                                   "it is written (docs/profiles.md)"),
    "status_reactions": Spec(str, doc="reactions on the user's message while working and once answered, e.g. "
                                      "\"👀 👍\" (default: [sessions] status_reactions; \"\": none)"),
    "memory": Spec(str, MEMORY_MODES, doc="whose memory a turn reads and its remember / forget tools write: off "
                                          "(default) | user | chat | profile (docs/profiles.md)"),
    "memory_max_entries": Spec(int, doc="entries one memory scope may hold (default 50)"),
    "memory_max_entry_bytes": Spec(int, doc="bytes of one remembered entry (default 500)"),
    "memory_prompt_bytes": Spec(int, doc="bytes of entries read into one request (default 4000)"),
    "mcp_servers": Spec(list, doc="the [mcp.NAME] servers whose tools this profile offers (default: every one)"),
    "mcp_allow": Spec(list, doc="patterns of server.tool offered, e.g. [\"files.read_*\"] (default: every tool)"),
    "mcp_deny": Spec(list, doc="patterns of server.tool never offered, e.g. [\"*.delete_*\"]"),
    "tool_progress": Spec(str, ("off", "lines", "bubble"), doc="what a streaming reply shows of the tools it runs: "
                                                             "off | lines (a line per tool call, kept) | bubble (one "
                                                             "live line, edited; the default)"),
    "voice_replies": Spec(bool, doc="answer a voice note with the text and then a voice note, where the platform "
                                    "sends them ([media] speech_url; default false)"),
    "models": Spec(list, doc="the models a chat may pick with /model (its agent's model is the default and always "
                             "allowed); default: none, /model only shows the model"),
    "approve_tools": Spec(list, doc="patterns of the tools whose calls wait for a person's yes: a built-in tool's "
                                    "name or server.tool, e.g. [\"files.delete_*\"] (docs/approvals.md)"),
    "approval_timeout_s": Spec(float, doc="how long a question waits for its answer, 10 to 86400 (default 600); "
                                          "past it the call is refused"),
    "max_tasks": Spec(int, doc="background tasks (/bg) one chat may have running at once, 1 to 100 (default 5)"),
    "task_timeout_s": Spec(float, doc="how long a background task may run before it is stopped, 10 to 86400 "
                                      "(default 1800)"),
    "task_max_tokens": Spec(int, doc="the tokens a background task's turn may use (prompt and completion, as the "
                                     "model service counts them) before it is stopped, 1000 to 100000000 "
                                     "(default 200000)"),
    "approvers": Spec(str, APPROVERS, doc="who may answer: chat (anyone in the chat that asked, or the operator; "
                                          "the default) | operator"),
}
AGENT_KEYS: dict[str, Spec] = {
    "kind": Spec(str, ("offline", "openai"), doc="offline | openai (default: openai when model and base_url are set)"),
    "base_url": Spec(str, doc="an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1"),
    "model": Spec(str, doc="the model name the server is asked for"),
    "api_key_env": Spec(str, doc="the environment variable holding the key"),
    "api_key": Spec(str, secret=True, doc="the key itself (better: api_key_env)"),
    "timeout_s": Spec(float, doc="how long the server may stay silent mid-answer"),
    "first_token_timeout_s": Spec(float, doc="how long a request may wait for the first chunk of its answer "
                                             "(default 30; 0: timeout_s only)"),
    "connect_timeout_s": Spec(float, doc="how long connecting may take"),
    "tools": Spec(list, doc="names of built-in tools (actors/agents/tools.py); [] for none; default all"),
    "max_tool_rounds": Spec(int, doc="tool calls and answers the model may go through in one turn"),
    "chunk_delay_s": Spec(float, doc="the offline agent's pause between words"),
}


@dataclass(frozen=True)
class Profile:
    name: str
    system_prompt: str
    busy_mode: str
    agent: Mapping[str, Any] = field(default_factory=dict)   # what build_agent takes: [agent] with overrides
    declared: bool = False                                   # a [profiles.NAME] table exists
    description: str = ""
    stream: bool = True
    stream_without_edits: str = "final"                      # final | paragraphs (actors/sessions/paragraph_parts.py)
    status_reactions: Optional[str] = None                   # None: [sessions] status_reactions
    memory: MemorySettings = MemorySettings()                # off unless the table says (actors/memory/scope.py)
    mcp: ToolChoice = ToolChoice()                           # which MCP servers and tools (common/mcp_config.py)
    models: tuple = ()                                       # what /model may pick, besides the agent's model
    voice_replies: bool = False                              # a voice note is answered with one too (media/speech.py)
    tool_progress: str = "bubble"                            # off | lines | bubble (actors/sessions/reply_text.py)
    approvals: ApprovalSettings = ApprovalSettings()         # which tool calls wait for a yes (actors/approvals/)
    max_tasks: int = 5                                       # background tasks of one chat at once (sessions/tasks.py)
    task_timeout_s: float = 1800.0                           # a background task is stopped past this
    task_max_tokens: int = 200_000                           # ... and past this many tokens of its model calls

    @property
    def default_model(self) -> Optional[str]:
        return self.agent.get("model") or None

    def allowed_models(self) -> tuple:
        """What /model may set: the agent's model first (the default), then the table's ``models``."""
        default = (self.default_model,) if self.default_model else ()
        return default + tuple(m for m in self.models if m not in default)


def _value(file: str, where: str, value: Any, spec: Spec) -> Any:
    if spec.kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, spec.kind) or (spec.kind in (int, float) and isinstance(value, bool)):
        shown = "[redacted]" if spec.secret else repr(value)
        raise ConfigError(file, where, f"expected {TYPE_NAMES.get(spec.kind, 'a table')}, got {shown}")
    if spec.allowed is not None and value not in spec.allowed:
        raise ConfigError(file, where, f"must be one of {', '.join(map(repr, spec.allowed))}, got {value!r}")
    if spec.kind in (int, float) and value < 0:
        raise ConfigError(file, where, f"must not be negative, got {value!r}")
    return value


def _table(file: str, where: str, table: Mapping, keys: Mapping[str, Spec]) -> dict:
    """The table's keys checked: ConfigError naming each bad key (``more``), not only the first."""
    out, errors = {}, []
    for key, value in table.items():
        with gathering(errors):
            if key not in keys:
                raise ConfigError(file, f"{where} {key}", unknown_name("key", key, keys))
            out[key] = _value(file, f"{where} {key}", value, keys[key])
    raise_gathered(errors)
    return out


def _builtin_tool_names() -> tuple:
    from actors.agents.tools import BUILTIN_TOOLS   # the tool registry: the names a profile may enable
    return tuple(BUILTIN_TOOLS)


def _check_tools(file: str, where: str, names: list) -> None:
    builtin = _builtin_tool_names()
    for name in names:
        if not isinstance(name, str) or name not in builtin:
            raise ConfigError(file, where, f"unknown tool {name!r} (built-in tools: {', '.join(sorted(builtin))})")
    if len(set(names)) != len(names):
        raise ConfigError(file, where, "names a tool twice")


def _check_memory(file: str, where: str, checked: Mapping, tools: list) -> None:
    for key in MEMORY_LIMITS:
        if key in checked and (problem := limit_error(key, checked[key])):
            raise ConfigError(file, f"{where} {key}", problem)
    named = [t for t in tools if t in MEMORY_TOOLS]
    if named and checked.get("memory", "off") == "off":
        raise ConfigError(file, f"{where} memory", f"the agent's tools name {', '.join(named)}, which write this "
                                                   "profile's memory: set memory = \"user\", \"chat\" or "
                                                   "\"profile\"")


TASK_BOUNDS = {"max_tasks": (1, 100), "task_timeout_s": (10.0, 86400.0), "task_max_tokens": (1000, 100_000_000)}


def _check_task_bounds(file: str, where: str, checked: Mapping) -> None:
    for key, (low, high) in TASK_BOUNDS.items():
        if key in checked and not low <= checked[key] <= high:
            raise ConfigError(file, f"{where} {key}", f"must be {low:g} to {high:g}, got {checked[key]!r}")


MAX_MODELS = 50            # a /model list is one chat message
MAX_MODEL_NAME = 128


def _check_models(file: str, where: str, names: list, agent: Mapping) -> None:
    for name in names:
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_MODEL_NAME or name != name.strip() \
                or any(c.isspace() for c in name):
            raise ConfigError(file, where, f"each model is a name of 1-{MAX_MODEL_NAME} characters without spaces, "
                                           f"got {name!r}")
    if len(set(names)) != len(names):
        raise ConfigError(file, where, "names a model twice")
    if len(names) > MAX_MODELS:
        raise ConfigError(file, where, f"at most {MAX_MODELS} models, got {len(names)}")
    if names and (agent.get("kind", "openai") != "openai" or not agent.get("model")):
        raise ConfigError(file, where, "a model list needs an agent of kind 'openai' with a model (here or in "
                                       "[agent])")


def validate_profiles(config: Mapping, file: str = "(configuration)") -> dict[str, Profile]:
    """Every ``[profiles.NAME]`` table checked and resolved: {name: Profile}; raises a ConfigError naming every bad
    key of every table (``more``). The default profile is always in the answer, declared or not."""
    tables = config.get("profiles") or {}
    out: dict[str, Profile] = {}
    errors: list[ConfigError] = []
    for name, table in tables.items():
        with gathering(errors):
            out[name] = _checked_profile(config, file, name, table)
    raise_gathered(errors)
    out.setdefault(DEFAULT_PROFILE, resolve(config, DEFAULT_PROFILE, {}))
    return out


def _checked_profile(config: Mapping, file: str, name: Any, table: Any) -> Profile:
    where = f"[profiles.{name}]"
    if not isinstance(name, str) or not PROFILE_NAME.fullmatch(name):
        raise ConfigError(file, where, "profile names are 1-32 of a-z, 0-9, '_' or '-', starting with a letter "
                                       "or digit")
    if not isinstance(table, Mapping):
        raise ConfigError(file, where, "must be a table")
    errors: list[ConfigError] = []
    checked, agent = {}, {}
    with gathering(errors):
        checked = _table(file, where, table, PROFILE_KEYS)
    with gathering(errors):   # an agent that is no table is the error above
        own_agent = table.get("agent") if isinstance(table.get("agent"), Mapping) else {}
        agent = _table(file, f"[profiles.{name}.agent]", own_agent, AGENT_KEYS)
    raise_gathered(errors)
    if "tools" in agent:
        _check_tools(file, f"[profiles.{name}.agent] tools", agent["tools"])
    _check_memory(file, where, checked, agent.get("tools") or [])
    _check_task_bounds(file, where, checked)
    checked["mcp"] = tool_choice(file, where, checked, server_specs(config, file))
    # the tool registry is loaded only for a profile that guards tools (a plain name must be a built-in tool's)
    builtin = _builtin_tool_names() if checked.get("approve_tools") else ()
    checked["approvals"] = approval_settings(file, where, checked, builtin, tuple((config.get("mcp") or {}).keys()))
    merged = {**dict(config.get("agent") or {}), **agent}
    if "models" in checked:
        _check_models(file, f"{where} models", checked["models"], merged)
    if merged.get("kind") == "openai" and not (merged.get("base_url") and merged.get("model")):
        raise ConfigError(file, f"[profiles.{name}.agent]", "kind 'openai' needs base_url and model (here or in "
                                                           "[agent])")
    return _profile(config, name, checked, merged)


def _profile(config: Mapping, name: str, checked: Mapping, agent: Mapping) -> Profile:
    prompt = checked.get("system_prompt", NOT_SET)
    prompt = setting(config, "agent", "system_prompt") if prompt is NOT_SET else prompt
    return Profile(name=name, system_prompt=prompt,
                   busy_mode=checked.get("busy_mode") or setting(config, "sessions", "busy_mode"),
                   agent={**agent, "system_prompt": prompt}, declared=True, description=checked.get("description", ""),
                   stream=checked.get("stream", True),
                   stream_without_edits=checked.get("stream_without_edits", "final"),
                   status_reactions=checked.get("status_reactions"),
                   memory=settings_from(checked), mcp=checked["mcp"], models=tuple(checked.get("models") or ()),
                   voice_replies=checked.get("voice_replies", False),
                   tool_progress=checked.get("tool_progress", "bubble"), approvals=checked["approvals"],
                   max_tasks=checked.get("max_tasks", Profile.max_tasks),
                   task_timeout_s=checked.get("task_timeout_s", Profile.task_timeout_s),
                   task_max_tokens=checked.get("task_max_tokens", Profile.task_max_tokens))


def resolve(config: Mapping, name: str, profiles: Optional[Mapping[str, Profile]] = None) -> Profile:
    """The profile ``name`` runs with: its validated table's, else everything inherited (an undeclared name)."""
    if profiles is not None and name in profiles:
        return profiles[name]
    return Profile(name=name, system_prompt=setting(config, "agent", "system_prompt"),
                   busy_mode=setting(config, "sessions", "busy_mode"), agent=dict(config.get("agent") or {}))


def profile_streams(config: Mapping, name: str) -> bool:
    """Whether replies of profile ``name`` stream (previews edited into place) or go once, complete."""
    return resolve(config, name, validate_profiles(config)).stream


def profile_stream_without_edits(config: Mapping, name: str) -> str:
    """How the streaming replies of profile ``name`` go where the platform has no edits: final | paragraphs."""
    return resolve(config, name, validate_profiles(config)).stream_without_edits


def profile_tool_progress(config: Mapping, name: str) -> str:
    """What the streaming replies of profile ``name`` show of their tools: off | lines | bubble."""
    return resolve(config, name, validate_profiles(config)).tool_progress


class Profiles:
    """A session cell's profiles: resolved once at its start (the configuration it was started with), and one
    agent per profile used, built on first use (a cell serves one session key, hence in practice one profile)."""

    def __init__(self, config: Mapping, test_hooks: bool = False):
        self.config = config
        self.test_hooks = test_hooks
        self.known = validate_profiles(config, config.get("_source") or "(configuration)")
        self._agents: dict[tuple, Any] = {}   # (profile, model or None) -> agent
        self._identities = None

    def identity_of(self, source: Any) -> Optional[str]:
        """The linked identity of a source's sender, if any (actors/profiles/identities.py)."""
        if self._identities is None:
            # a cycle through the registry, which imports this module (test_layering.py, KNOWN_CYCLES)
            from actors.profiles.identities import load_identities
            self._identities = load_identities(self.config)
        return self._identities.of(source.platform, getattr(source, "user_id", None))

    def get(self, name: Optional[str]) -> Profile:
        return resolve(self.config, name or DEFAULT_PROFILE, self.known)

    def agent(self, name: Optional[str], model: Optional[str] = None):
        """The profile's agent; with ``model`` (one of its allowed models, as /model chose), the same agent asking
        for that model instead. A model the profile no longer allows (a reload removed it) gives the default."""
        profile = self.get(name)
        if model not in profile.allowed_models() or model == profile.default_model:
            model = None
        if (profile.name, model) not in self._agents:
            # the agent clients load where an agent runs (the shards), not with the registry
            from actors.agents.build import build_agent
            from actors.agents.mcp_tools import mcp_tools_for
            settings = {**profile.agent, "model": model} if model else profile.agent
            agent = build_agent(settings, test_hooks=self.test_hooks)
            mcp_tools = mcp_tools_for(self.config, profile.mcp)   # the [mcp] servers' tools this profile offers
            if mcp_tools is not None:
                agent.registry.add_source(mcp_tools)
            self._agents[(profile.name, model)] = agent
        return self._agents[(profile.name, model)]
