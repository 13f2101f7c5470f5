"""A profile's MCP tools as the agent's tools (docs/mcp.md): a ``ToolRegistry`` source (actors/agents/tools.py)
listing, at each request, the tools of the servers the profile offers (common/mcp_config.py ``ToolChoice``), named
``server__tool`` for the model.

A call goes to the process's hub (actors/agents/mcp_hub.py: off this loop, bounded by the server's ``timeout_s``);
its text is bounded by ``max_result_chars`` and its images and files go to the chat through the media pipeline
(``ToolOutput``). Every failure is an answer the model reads: the server is restarting, the call took too long, the
server answered an error.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Mapping

from actors.agents.mcp_hub import McpHub, ServerUnavailable, process_hub, result_parts
from actors.agents.tools import Tool, ToolAnswer
from actors.media.outgoing import ToolFile, ToolOutput
from common.mcp_config import MODEL_TOOL_NAME, ToolChoice, model_tool_name, server_specs

log = logging.getLogger(__name__)
MAX_DESCRIPTION_CHARS = 1024


class McpTools:
    """The MCP tools one agent offers: ``tools()`` is read at every request, so a server's tools appear once it is
    ready and stay offered (answering "unavailable") while it restarts."""

    def __init__(self, hub: McpHub, choice: ToolChoice):
        self.hub, self.choice = hub, choice

    async def prepare(self) -> None:
        """Before a turn's first request: wait, briefly, for servers still on their first start."""
        # the choice, not today's names: the servers of an ensure just submitted may not exist yet on this thread
        await self.hub.settled(self.choice.offers_server, self.hub.policy.connect_timeout_s)

    def tools(self) -> list[Tool]:
        out = []
        for state in self.hub.states():
            name = state.spec.name
            if not self.choice.offers_server(name):
                continue
            for tool in state.tools:
                model_name = model_tool_name(name, tool.name)
                if not self.choice.offers(name, tool.name) or not MODEL_TOOL_NAME.fullmatch(model_name):
                    continue
                description = f"[{name}] {tool.description or ''}".strip()[:MAX_DESCRIPTION_CHARS]
                schema = tool.inputSchema if isinstance(tool.inputSchema, dict) else {"type": "object"}
                out.append(Tool(name=model_name, description=description, json_schema=schema,
                                fn=self._caller(name, tool.name)))
        return out

    def _caller(self, server: str, tool: str):
        async def call(arguments: dict) -> Any:
            return await call_mcp_tool(self.hub, server, tool, arguments)
        return call


async def call_mcp_tool(hub: McpHub, server: str, tool: str, arguments: dict) -> Any:
    """A ``ToolOutput`` (text and files) or a ``ToolAnswer`` saying why not."""
    state = hub.state(server)
    if state is None:
        return ToolAnswer(False, f"MCP server {server!r} is not configured any more")
    try:
        result = await hub.call(server, tool, arguments)
    except asyncio.TimeoutError:
        return ToolAnswer(False, f"tool {tool} of MCP server {server!r} took longer than {state.spec.timeout_s:g}s; "
                                 "the call was stopped")
    except ServerUnavailable as exc:
        return ToolAnswer(False, str(exc))
    except Exception as exc:  # noqa: BLE001 - the server's error is information for the model
        return ToolAnswer(False, f"tool {tool} of MCP server {server!r} failed: {exc}"[:2000])
    ok, text, files = result_parts(result, state.spec.max_result_chars)
    if not ok:
        return ToolAnswer(False, text or f"tool {tool} of MCP server {server!r} reported an error")
    return ToolOutput(text, tuple(ToolFile(data, name) for data, name in files))


def mcp_tools_for(config: Mapping, choice: ToolChoice) -> McpTools | None:
    """The MCP tools of a profile in this process, starting (or reconciling) the configured servers; None when no
    server is configured."""
    specs = server_specs(config, config.get("_source") or "(configuration)")
    hub = process_hub()
    if not specs and not hub.states():
        return None
    hub.ensure(specs, int(config.get("_generation") or 0))
    return McpTools(hub, choice)
