"""``doctor``'s MCP lines: each configured ``[mcp.NAME]`` server started (or connected to) once, with the daemon's
environment for its ``env`` and ``headers`` variables, its tools listed, and stopped (docs/mcp.md)."""
from __future__ import annotations

from typing import Mapping

from actors.agents.mcp_hub import describe_error, list_server_tools
from common.mcp_config import McpServerSpec, server_specs
from daemon.doctor_probes import Check

MAX_LISTED = 12


def mcp_probes(config: dict, env: Mapping[str, str]) -> list:
    """A coroutine per configured server, each answering a Check."""
    try:
        specs = server_specs(config)
    except Exception:   # noqa: BLE001 - the config line already says what is wrong
        return []
    return [probe_mcp(spec, env) for spec in specs.values()]


async def probe_mcp(spec: McpServerSpec, env: Mapping[str, str]) -> Check:
    where = spec.command if spec.transport == "stdio" else spec.url
    try:
        tools = await list_server_tools(spec, env, timeout_s=min(30.0, spec.timeout_s + 10))
    except BaseException as exc:  # noqa: BLE001 - whatever stops the server is the check's answer
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return Check("fail", f"mcp {spec.name}", f"{spec.transport} {where}: {describe_error(exc)}")
    names = [tool.name for tool in tools]
    shown = ", ".join(names[:MAX_LISTED]) + (f", … ({len(names)} in all)" if len(names) > MAX_LISTED else "")
    return Check("ok", f"mcp {spec.name}", f"{spec.transport} {where}: {len(names)} tools: {shown or 'none'}")
