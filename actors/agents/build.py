"""Building the agent an ``[agent]`` configuration describes (a profile's, with its overrides).

Apart from the interface (base.py) because it knows every agent: the agents import the interface, and this module
imports them, so nothing imports around a cycle.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from actors.agents.base import Agent, agent_kind, resolve_api_key
from actors.agents.offline import OfflineAgent
from actors.agents.openai_compat import FIRST_TOKEN_TIMEOUT_S, OpenAICompatAgent
from actors.agents.tools import default_registry


def build_agent(config: Optional[Mapping[str, Any]] = None, env: Mapping[str, str] = os.environ,
                test_hooks: bool = False) -> Agent:
    """The agent described by the ``[agent]`` configuration section. ``test_hooks``: the offline agent honours its
    test hooks (``[debug] fault_injection``).

    Keys: kind ('offline' | 'openai'; default 'openai' when model and base_url are set, else 'offline'),
    base_url, model, api_key or api_key_env, timeout_s, first_token_timeout_s, connect_timeout_s, system_prompt,
    tools (names of built-in tools; all of them by default), max_tool_rounds, chunk_delay_s (offline).
    """
    config = dict(config or {})
    kind = agent_kind(config)
    registry = default_registry(config.get("tools"))
    if kind == "offline":
        return OfflineAgent(registry=registry, chunk_delay_s=float(config.get("chunk_delay_s", 0.03)),
                            test_hooks=test_hooks)
    if kind == "openai":
        if not config.get("base_url") or not config.get("model"):
            raise ValueError("agent kind 'openai' needs base_url and model")
        return OpenAICompatAgent(
            base_url=str(config["base_url"]), model=str(config["model"]), api_key=resolve_api_key(config, env),
            registry=registry, system_prompt=config.get("system_prompt"),
            idle_timeout_s=float(config.get("timeout_s", 120.0)),
            connect_timeout_s=float(config.get("connect_timeout_s", 10.0)),
            first_token_timeout_s=float(config.get("first_token_timeout_s", FIRST_TOKEN_TIMEOUT_S)),
            max_tool_rounds=int(config.get("max_tool_rounds", 5)))
    raise ValueError(f"unknown agent kind {kind!r} (expected 'offline' or 'openai')")
