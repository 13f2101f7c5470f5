"""A plugin cannot silence an adapter: the real daemon with the web chat and a plugin whose before_dispatch hook
calls sys.exit() (or raises KeyboardInterrupt). The hook is skipped and logged, the message answered, and the web
chat goes on answering; a loop that dies anyway crashes its adapter, which is restarted and answers again; a loop
that is stuck misses the watchdog's pings, which has the adapter restarted."""
from __future__ import annotations

import uuid

import pytest

from tests.actor_system import free_port, wait_for
from tests.gateway import ROOT
from tests.webchat.client import WebChatClient
from tests.webchat.helpers import ADAPTER, served_port, wait_log, webchat_gateway

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    gw = webchat_gateway(tmp_path_factory.mktemp("adapter-loop"), port=free_port(), extra="""
[agent]
chunk_delay_s = 0.0

[plugins.exiter]
module = "tests.integration.hook_plugins:Exiter"
""")
    gw.env["PYTHONPATH"] = str(ROOT)
    try:
        gw.start()
        gw.wait_ready()
        client = WebChatClient(f"http://127.0.0.1:{served_port(gw)}")
        yield gw, client
        client.close()
    finally:
        gw.cli("stop")
        gw.kill_everything()


def answered(client: WebChatClient, visitor: str, text: str, timeout: float = 30) -> str:
    """The assistant's answer to ``text`` in the visitor's history (the offline agent quotes what it was told)."""
    def found():
        frame = client.request(visitor, {"type": "history"})
        return next((m["text"] for m in frame["messages"] if m["role"] == "assistant" and text in m["text"]), None)
    return wait_for(found, timeout, 0.2, f"an answer quoting {text!r}")


def adapter_pid(gw) -> int:
    return gw.node(ADAPTER)["pid"]


def test_a_hook_calling_sys_exit_or_raising_keyboard_interrupt_is_skipped_logged_and_the_chat_answers(served):
    gw, client = served
    visitor = f"visitor-{uuid.uuid4().hex[:8]}"
    pid = adapter_pid(gw)
    client.say(visitor, "exit", "please #exit-hook")
    [line] = wait_log(gw, "plugin exiter: before_dispatch hook error: raised SystemExit", timeout=30)
    assert "the exiting hook exits, as asked" in line
    answered(client, visitor, "please #exit-hook")
    client.say(visitor, "interrupt", "now #interrupt-hook")
    wait_log(gw, "plugin exiter: before_dispatch hook error: raised KeyboardInterrupt", timeout=30)
    answered(client, visitor, "now #interrupt-hook")
    client.say(visitor, "after", "still there?")
    answered(client, visitor, "still there?")
    assert adapter_pid(gw) == pid     # nothing was restarted: the hook's failure cost only the hook


def test_an_adapter_whose_loop_dies_crashes_and_its_restart_answers(served):
    gw, client = served
    visitor = f"visitor-{uuid.uuid4().hex[:8]}"
    pid = adapter_pid(gw)
    gw.cli("fault", ADAPTER, "--action", "loop_exit", check=True)
    wait_log(gw, f"{ADAPTER} crashed on WatchMessage: LoopGone: its asyncio loop died (SystemExit", timeout=30)
    wait_for(lambda: adapter_pid(gw) not in (pid, None), 30, 0.2, "the web chat adapter restarted")
    client.say(visitor, "after-exit", "answered after the loop died?")
    answered(client, visitor, "answered after the loop died?")


def test_an_adapter_whose_loop_is_stuck_misses_its_pings_and_is_restarted(served):
    gw, client = served
    visitor = f"visitor-{uuid.uuid4().hex[:8]}"
    pid = adapter_pid(gw)
    gw.cli("fault", ADAPTER, "--action", "loop_hang", "--seconds", "60", check=True)
    # The actor's own thread is free all along: only a ping answered through the loop sees it stuck.
    wait_log(gw, f"watchdog: WebChatAdapter {ADAPTER} (pid {pid}) did not answer", timeout=30)
    wait_for(lambda: adapter_pid(gw) not in (pid, None), 30, 0.2, "the web chat adapter restarted by the watchdog")
    client.say(visitor, "after-hang", "answered after the loop hung?")
    answered(client, visitor, "answered after the loop hung?")
