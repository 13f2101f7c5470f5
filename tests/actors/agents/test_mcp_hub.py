"""The process's MCP hub against the test MCP server (tests/fakes/mcp/server.py, a real subprocess over stdio or
streamable HTTP): a crashed server's tools answer "unavailable" while it waits out its backoff, results are bounded,
a removed server is stopped, an HTTP server that goes away mid-call ends the call at once saying so and is
reconnected once it is back, and `doctor` lists each server's tools or says why it cannot."""
from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from actors.agents.mcp_hub import McpHub, RestartPolicy
from actors.agents.mcp_tools import McpTools, call_mcp_tool
from actors.agents.tools import ToolAnswer
from actors.media.outgoing import ToolOutput
from common.mcp_config import McpServerSpec, ToolChoice
from tests.actor_system import free_port
from tests.fakes.mcp.http_process import HttpMcpServer
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(120)

SERVER = str(Path(__file__).resolve().parents[2] / "fakes" / "mcp" / "server.py")


def spec(name: str = "fake", **options) -> McpServerSpec:
    return McpServerSpec(name, command=sys.executable, args=(SERVER,), **options)


async def until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


def test_a_crashed_servers_tools_answer_unavailable_until_it_is_back_and_results_are_bounded():
    async def scenario():
        hub = McpHub(RestartPolicy(base_s=120, cap_s=120))     # a backoff far longer than the test: still down
        hub.ensure({"fake": spec(max_result_chars=100)})
        await hub.settled(lambda name: name == "fake", 60)
        assert hub.state("fake").status == "ready", hub.state("fake").describe()
        tools = McpTools(hub, ToolChoice(deny=("fake.crash",)))
        assert {t.name for t in tools.tools()} == {"fake__shout", "fake__picture", "fake__hang"}
        long = await call_mcp_tool(hub, "fake", "shout", {"text": "x" * 500})
        assert isinstance(long, ToolOutput) and long.text.startswith("SHOUTED: XXX")
        assert "[result cut: 509 characters, only the first 100 shown]" in long.text and len(long.text) < 200
        crashed = await call_mcp_tool(hub, "fake", "crash", {})
        assert isinstance(crashed, ToolAnswer) and not crashed.ok and "stopped answering" in crashed.text
        await until(lambda: hub.state("fake").status == "restarting", 30, "the server to be restarting")
        meanwhile = await call_mcp_tool(hub, "fake", "shout", {"text": "hello"})
        assert isinstance(meanwhile, ToolAnswer) and not meanwhile.ok
        assert "MCP server 'fake' is restarting" in meanwhile.text and "unavailable for now" in meanwhile.text
        assert {t.name for t in tools.tools()} >= {"fake__shout"}     # still offered: the model is told, not lost
        hub.ensure({}, 2)                                              # removed (a reload): stopped
        await until(lambda: hub.state("fake") is None, 30, "the server to be removed")
        gone = await call_mcp_tool(hub, "fake", "shout", {"text": "hello"})
        assert not gone.ok and "not configured" in gone.text
    asyncio.run(scenario())


def test_calls_past_a_servers_in_flight_bound_are_refused_at_once_and_its_slots_free_when_calls_end():
    """Two calls hang (the bound is 2): a third is refused at once, saying why, without reaching the server; once the
    hanging calls are cut (their timeout) the server takes calls again."""
    async def scenario():
        hub = McpHub()
        hub.ensure({"fake": spec(max_calls_in_flight=2, timeout_s=3)})
        await hub.settled(lambda name: name == "fake", 60)
        hanging = [asyncio.ensure_future(call_mcp_tool(hub, "fake", "hang", {})) for _ in range(2)]
        await until(lambda: hub.state("fake").calls_in_flight == 2, 30, "two calls in flight")
        refused = await asyncio.wait_for(call_mcp_tool(hub, "fake", "shout", {"text": "hi"}), 1)
        assert isinstance(refused, ToolAnswer) and not refused.ok, refused
        assert "already has 2 calls in flight" in refused.text and "max_calls_in_flight" in refused.text
        cut = await asyncio.gather(*hanging)
        assert all(not a.ok and "took longer than 3s" in a.text for a in cut), cut
        await until(lambda: hub.state("fake").calls_in_flight == 0, 30, "the cut calls' slots freed")
        again = await call_mcp_tool(hub, "fake", "shout", {"text": "hi"})
        assert isinstance(again, ToolOutput) and again.text == "SHOUTED: HI", again
        hub.ensure({}, 2)
    asyncio.run(scenario())


def test_an_http_server_gone_mid_call_ends_the_call_at_once_and_is_reconnected_when_back():
    """The server is killed while a call waits on it: the call ends well within its timeout_s, saying the connection
    was lost (not that it took too long); while the server is away its tools answer unavailable; once it listens
    again the hub reconnects by itself and calls go through."""
    server = HttpMcpServer(free_port()).start()

    async def scenario():
        hub = McpHub(RestartPolicy(base_s=0.2, cap_s=1.0))
        hub.ensure({"remote": McpServerSpec("remote", url=server.url, timeout_s=60)})
        await hub.settled(lambda name: name == "remote", 60)
        assert hub.state("remote").status == "ready", hub.state("remote").describe()
        started = time.monotonic()
        call = asyncio.ensure_future(call_mcp_tool(hub, "remote", "hang", {}))
        await until(lambda: hub.state("remote").calls_in_flight == 1, 30, "the call in flight")
        server.kill()
        answer = await asyncio.wait_for(call, 50)      # well within timeout_s = 60
        took = time.monotonic() - started
        assert isinstance(answer, ToolAnswer) and not answer.ok, answer
        assert "stopped answering during the call (the connection was lost" in answer.text, answer.text
        assert "took longer" not in answer.text and took < 50, (took, answer.text)
        assert hub.state("remote").calls_in_flight == 0
        meanwhile = await call_mcp_tool(hub, "remote", "shout", {"text": "hi"})
        assert not meanwhile.ok and "MCP server 'remote' is restarting" in meanwhile.text, meanwhile
        server.start()
        await until(lambda: hub.state("remote").status == "ready", 60, "the hub to reconnect to the server")
        again = await call_mcp_tool(hub, "remote", "shout", {"text": "back"})
        assert isinstance(again, ToolOutput) and again.text == "SHOUTED: BACK", again
        hub.ensure({}, 2)
    try:
        asyncio.run(scenario())
    finally:
        server.kill()


def test_doctor_lists_each_servers_tools_or_says_why_not(tmp_path):
    gw = Gateway(tmp_path, extra_toml=f"""
[mcp.fake]
command = "{sys.executable}"
args = ["{SERVER}"]

[mcp.missing]
command = "{tmp_path}/no-such-server"

[mcp.web]
url = "http://127.0.0.1:9/mcp"
headers = {{ Authorization = "MCP_TEST_UNSET_VARIABLE" }}
""")
    result = gw.cli("doctor", "--json", timeout=90)
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["mcp fake"]["status"] == "ok"
    assert checks["mcp fake"]["detail"].endswith("4 tools: shout, picture, hang, crash")
    assert checks["mcp missing"]["status"] == "fail" and "No such file" in checks["mcp missing"]["detail"]
    assert checks["mcp web"]["status"] == "fail"
    assert "MCP_TEST_UNSET_VARIABLE (for headers) is not set" in checks["mcp web"]["detail"]
