"""What the page's welcome line names: the agent a visitor talks to (its profile) and the model behind it. Pure: read
from the configuration at each connect, so a page opened after a reload names what answers now."""
from __future__ import annotations

from typing import Mapping

from actors.agents.base import agent_kind
from actors.profiles.profiles import resolve, validate_profiles


def agent_facts(config: Mapping, profile: str) -> dict:
    """``{"profile", "agent", "model"}``: the profile's name, its agent's kind (offline | openai) and, for a model
    server, the model's name. Never a URL or a key: the page is shown to anyone who may chat."""
    try:
        agent = resolve(config, profile, validate_profiles(config)).agent
    except ValueError:       # a configuration the daemon would not have started with; say nothing rather than fail
        return {"profile": profile, "agent": "", "model": ""}
    kind = agent_kind(agent)
    return {"profile": profile, "agent": kind, "model": str(agent.get("model") or "") if kind == "openai" else ""}
