"""MCP servers' tools through the real daemon (docs/mcp.md): a test server written with the official SDK
(tests/fakes/mcp/server.py) over stdio and over streamable HTTP, the fake OpenAI-compatible model asking for its
tools, the web chat (and a Telegram chat, on the fake Bot API) showing the answers. Text reaches the chat; an image
reaches it as a file; a hung call is cut at the server's timeout_s and the model told; a server that crashes
mid-call is restarted and the turn told; a call hung for long blocks none of 20 other chats; tree and status show
each server and its tools (a configured one before it starts too); a reload starts an added server and stops a
removed one at once, for the next turn of a chat that used it as for a new chat.

The fake model answers by the conversation: a user message "call TOOL ARGS" asks for that tool; a tool result is
answered "tool said: RESULT", so what the model read is what the chat shows.
"""
from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.actor_system import free_port, wait_for
from tests.fakes.mcp.http_process import HttpMcpServer
from tests.fakes.openai_server import FakeOpenAIServer, agent_toml, text_reply, tool_call_reply
from tests.webchat.client import WebChatClient
from tests.webchat.helpers import served_port, webchat_gateway

pytestmark = pytest.mark.timeout(300)

SERVER = Path(__file__).resolve().parents[1] / "fakes" / "mcp" / "server.py"
HANG_TIMEOUT_S = 3


def answer_by_conversation(body: dict):
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text_reply(f"tool said: {last['content']}")
    if last["role"] == "user" and str(last.get("content", "")).startswith("call "):
        _, tool, *arguments = last["content"].split(" ", 2)
        return tool_call_reply([(tool, arguments[0] if arguments else "{}")])
    return None


@pytest.fixture(scope="module")
def model():
    with FakeOpenAIServer() as server:
        server.answer = answer_by_conversation
        yield server


@pytest.fixture(scope="module")
def http_server(tmp_path_factory):
    server = HttpMcpServer(free_port(), str(tmp_path_factory.mktemp("mcp-http") / "calls.txt")).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, model, http_server):
    tmp = tmp_path_factory.mktemp("mcp")
    marker = tmp / "starts.txt"
    # every ask is a new visitor, all from 127.0.0.1
    gw = webchat_gateway(tmp, port=0, extra="new_visitors_per_hour = 1000\nmax_tabs_per_client = 1000\nmessages_per_minute_per_address = 6000\n" + agent_toml(model) + f"""
[sessions]
shards = 1          # every chat on one shard's loop: the one the hung call must not block

[mcp.fake]
command = "{sys.executable}"
args = ["{SERVER}", "--marker", "{marker}"]
timeout_s = {HANG_TIMEOUT_S}

[mcp.slow]
command = "{sys.executable}"
args = ["{SERVER}"]
timeout_s = 240

[mcp.remote]
url = "{http_server.url}"
headers = {{ Authorization = "REMOTE_MCP_AUTH" }}
""")
    gw.env["REMOTE_MCP_AUTH"] = "Bearer test-token"
    gw.start()
    try:
        gw.wait_ready()
        client = WebChatClient(f"http://127.0.0.1:{served_port(gw)}")
        yield gw, client, marker
        client.close()
    finally:
        gw.cli("stop")
        gw.kill_everything()


def final_ops(client: WebChatClient, visitor: str) -> list[dict]:
    return [f for f in client.visitor(visitor).frames if f.get("type") == "op" and f.get("final")
            and f.get("action") in ("send", "edit") and not f.get("file")]


def ask(gw, client: WebChatClient, text: str, timeout: float = 90, visitor: str = "") -> tuple[str, list[dict]]:
    """A visitor (a new one unless named) says ``text``; (the final answer's text, every frame it got)."""
    visitor = visitor or f"v-{uuid.uuid4().hex[:8]}"
    answered = len(final_ops(client, visitor)) if visitor in client.visitors else 0
    client.say(visitor, uuid.uuid4().hex, text)
    try:
        final = wait_for(lambda: final_ops(client, visitor)[answered:], timeout, 0.05, f"the answer to {text!r}")
    except AssertionError as exc:
        tail = "\n".join(gw.log().splitlines()[-25:])
        raise AssertionError(f"{exc}\nframes: {client.visitor(visitor).frames[-5:]}\nlog:\n{tail}") from None
    return final[-1]["text"], client.visitor(visitor).frames


def wait_tools_offered(model: FakeOpenAIServer, gw, client) -> None:
    """The servers start with the first agent: ask until the model is offered every server's tools."""
    def offered():
        text, _ = ask(gw, client, "hello")
        names = {t["function"]["name"] for t in model.requests[-1].body.get("tools", [])}
        return {"fake__shout", "remote__shout", "slow__hang"} <= names and names
    wait_for(offered, 90, 0.5, "every MCP server's tools offered to the model")


def test_a_text_tool_over_stdio_and_over_http_answers_in_the_chat(gateway, model):
    gw, client, _ = gateway
    wait_tools_offered(model, gw, client)
    text, _ = ask(gw, client, 'call fake__shout {"text": "hello stdio"}')
    assert "tool said: SHOUTED: HELLO STDIO" in text
    text, _ = ask(gw, client, 'call remote__shout {"text": "hello http"}')
    assert "tool said: SHOUTED: HELLO HTTP" in text
    offered = {t["function"]["name"]: t["function"] for t in model.requests[-1].body["tools"]}
    assert {"clock", "calculator", "fake__picture", "fake__crash", "remote__hang"} <= set(offered)
    assert offered["fake__shout"]["parameters"]["properties"]["text"]["type"] == "string"


def test_an_image_result_reaches_the_chat_as_a_file(gateway, model):
    gw, client, _ = gateway
    wait_tools_offered(model, gw, client)
    text, frames = ask(gw, client, "call fake__picture {}")
    assert "file sent to the chat: image-1.png" in text, text     # what the model read
    (sent,) = wait_for(lambda: [f["file"] for f in frames if f.get("type") == "op" and f.get("file")], 60, 0.05,
                       "the image sent to the chat after the text")
    assert sent["name"] == "image-1.png" and sent["mime"] == "image/png", sent


def test_a_hung_call_is_cut_at_the_servers_timeout_and_the_model_is_told(gateway, model):
    gw, client, _ = gateway
    wait_tools_offered(model, gw, client)
    started = time.monotonic()
    text, _ = ask(gw, client, "call fake__hang {}")
    assert f"took longer than {HANG_TIMEOUT_S}s; the call was stopped" in text, text
    assert time.monotonic() - started >= HANG_TIMEOUT_S


def test_a_server_that_crashes_mid_call_is_restarted_and_the_turn_told(gateway, model):
    gw, client, marker = gateway
    wait_tools_offered(model, gw, client)
    starts_before = len(marker.read_text().splitlines())
    text, _ = ask(gw, client, "call fake__crash {}")
    assert "MCP server 'fake' stopped answering during the call" in text and "being restarted" in text, text
    wait_for(lambda: len(marker.read_text().splitlines()) > starts_before, 60, 0.1, "the server started again")

    def answers_again():
        answer, _ = ask(gw, client, 'call fake__shout {"text": "back"}')
        return "SHOUTED: BACK" in answer or print("meanwhile:", answer)
    wait_for(answers_again, 90, 0.5, "the restarted server to answer")


def test_a_long_hung_call_blocks_none_of_20_other_chats(gateway, model):
    gw, client, _ = gateway
    wait_tools_offered(model, gw, client)
    hung = f"v-{uuid.uuid4().hex[:8]}"
    client.say(hung, uuid.uuid4().hex, "call slow__hang {}")
    wait_for(lambda: [f for f in client.visitor(hung).frames if "slow__hang" in str(f.get("tool"))], 60, 0.05,
             "the chat to show the hanging tool running")
    visitors = [f"v-{uuid.uuid4().hex[:8]}" for _ in range(20)]
    for number, visitor in enumerate(visitors):
        client.say(visitor, uuid.uuid4().hex, f'call fake__shout {{"text": "chat {number}"}}')
    for number, visitor in enumerate(visitors):
        op = wait_for(lambda: final_ops(client, visitor), 120, 0.05, f"chat {number}'s answer")[-1]
        assert f"SHOUTED: CHAT {number}" in op["text"], op["text"]
    assert not final_ops(client, hung), "the hung call was answered: the test proves nothing"


def test_tree_and_status_show_each_server_and_its_tools(gateway, model):
    gw, client, _ = gateway
    wait_tools_offered(model, gw, client)
    every_tool = "[shout, picture, hang, crash]"

    def shown():
        tree = gw.cli("tree", timeout=60).stdout
        status = gw.cli("status", timeout=60).stdout
        return all(f"{name} ready {every_tool}" in text for name in ("fake", "remote", "slow")
                   for text in (tree, status)) and (tree, status)
    try:
        tree, status = wait_for(shown, 60, 0.5, "every server ready with its tools in tree and status")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{gw.cli('tree').stdout}\n{gw.cli('status').stdout}") from None
    assert "mcp=" in tree and "mcp: " in status


def test_an_http_server_gone_mid_call_ends_the_turn_saying_so_and_is_used_again_once_back(gateway, model,
                                                                                      http_server):
    """The remote server is killed while a chat's call waits on it: the turn ends well within the call's timeout_s
    (30 s), the model having read that the connection was lost; once the server listens again the shard's hub
    reconnects by itself and the next chat's call goes through."""
    gw, client, _ = gateway
    wait_tools_offered(model, gw, client)
    visitor = f"v-{uuid.uuid4().hex[:8]}"
    hangs = http_server.calls().count("hang")
    started = time.monotonic()
    client.say(visitor, uuid.uuid4().hex, "call remote__hang {}")
    try:
        wait_for(lambda: http_server.calls().count("hang") > hangs, 60, 0.05, "the hang call at the HTTP server")
        http_server.kill()
        final = wait_for(lambda: final_ops(client, visitor), 60, 0.05, "the turn's answer after the server went away")
    finally:
        if http_server.process.poll() is not None:
            http_server.start()
    took = time.monotonic() - started
    text = final[-1]["text"]
    assert "tool said: MCP server 'remote' stopped answering during the call (the connection was lost" in text, text
    assert took < 30, f"the turn took {took:.1f}s: as long as the call's timeout"

    def back():
        text, _ = ask(gw, client, 'call remote__shout {"text": "back"}')
        return "SHOUTED: BACK" in text and text
    wait_for(back, 90, 0.5, "a call to the remote server once it is back")


def test_a_reload_starts_an_added_server_and_stops_a_removed_one(tmp_path, model):
    """Before any chat, tree and status already show the configured server (not started). A reload that replaces
    it is applied at once: tree shows the new set without a new chat, the next turn of the chat that used the old
    server is offered the new one, and a new chat too."""
    first = f'[mcp.fake]\ncommand = "{sys.executable}"\nargs = ["{SERVER}"]\n'
    gw = webchat_gateway(tmp_path, port=0, extra="new_visitors_per_hour = 1000\n" + agent_toml(model)
                         + "[sessions]\nshards = 1\n" + first)
    gw.start()
    try:
        gw.wait_ready()
        for view in ("tree", "status"):
            shown = gw.cli(view, timeout=60).stdout
            assert "fake not started" in shown, shown
        client = WebChatClient(f"http://127.0.0.1:{served_port(gw)}")
        try:
            regular = f"v-{uuid.uuid4().hex[:8]}"
            assert "SHOUTED: ONE" in ask(gw, client, 'call fake__shout {"text": "one"}', visitor=regular)[0]
            gw.config.write_text(gw.config.read_text().replace(first, first.replace("[mcp.fake]", "[mcp.added]")))
            reloaded = gw.cli("reload", timeout=60)
            assert reloaded.returncode == 0 and "[mcp.added]" in reloaded.stdout + reloaded.stderr, reloaded

            def applied():   # no chat since the reload: the shard applied it itself
                tree = gw.cli("tree", timeout=60).stdout
                return "added ready [shout" in tree and "fake " not in tree and tree
            try:
                wait_for(applied, 60, 0.5, "the reloaded servers in tree before any new turn")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{gw.cli('tree').stdout}") from None
            text, _ = ask(gw, client, 'call added__shout {"text": "two"}', visitor=regular)   # its next turn
            assert "SHOUTED: TWO" in text, text
            text, _ = ask(gw, client, 'call fake__shout {"text": "three"}')   # a new chat
            assert "unknown tool 'fake__shout'" in text and "added__shout" in text, text
        finally:
            client.close()
    finally:
        gw.cli("stop")
        gw.kill_everything()


def test_text_and_an_image_reach_a_telegram_chat(tmp_path, model):
    from tests.fakes.telegram import FakeTelegram
    from tests.pipeline.harness import telegram_gateway
    with FakeTelegram() as tg:
        gw = telegram_gateway(tmp_path, tg.base_url, extra=agent_toml(model).replace("[agent]\n", "") + f"""
[sessions]
shards = 1

[mcp.fake]
command = "{sys.executable}"
args = ["{SERVER}"]
""")
        try:
            gw.start()
            gw.wait_ready()
            tg.inject_message('call fake__shout {"text": "over telegram"}', 81)
            wait_for(lambda: any("tool said: SHOUTED: OVER TELEGRAM" in m["text"] for m in tg.messages(81)), 90,
                     0.1, "the tool's text in the Telegram chat")
            tg.inject_message("call fake__picture {}", 82)
            (upload,) = wait_for(lambda: [u for u in tg.uploads if u["chat_id"] == 82], 90, 0.1,
                                 "the tool's image sent to the Telegram chat")
            assert upload["kind"] == "photo" and upload["data"].startswith(b"\x89PNG"), upload["kind"]
        finally:
            gw.cli("stop")
            gw.kill_everything()
