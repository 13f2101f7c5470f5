"""An OpenAI-compatible agent without its key and on a dead port, on the real daemon.

`start` warns (on its stderr and in the log) that the key variable is unset; a turn then fails because nothing
listens on the model port, and the chat is told so in plain words, without the backend's host, port or exception
class, which the operator finds in the log.
"""
from __future__ import annotations

import json

import pytest

from tests.actor_system import free_port
from tests.gateway import DEFAULT_ADAPTERS_ANY_PORT, Gateway

pytestmark = pytest.mark.timeout(120)

KEY_VARIABLE = "GATEWAY_TEST_KEY_THAT_IS_NOT_SET"


def test_start_warns_of_a_missing_key_and_a_dead_model_port_reads_plainly_in_the_chat(tmp_path):
    dead = free_port()
    gw = Gateway(tmp_path, extra_toml=DEFAULT_ADAPTERS_ANY_PORT + f"""
[agent]
kind = "openai"
base_url = "http://127.0.0.1:{dead}/v1"
model = "test-model"
api_key_env = "{KEY_VARIABLE}"
""")
    gw.env.pop(KEY_VARIABLE, None)
    try:
        started = gw.cli("start", "--json")
        assert started.returncode == 0, (started.stdout, started.stderr)
        gw.launcher_pid = json.loads(started.stdout)["pid"]
        gw.seen_pids.add(gw.launcher_pid)
        assert started.stderr.startswith("warning: [agent] kind = \"openai\" has no API key"), started.stderr
        assert f"${KEY_VARIABLE} is not set" in started.stderr
        gw.wait_ready()
        gw.wait_log(f"${KEY_VARIABLE} is not set")

        turn = gw.cli("chat", "--as", "ann", "--message", "hello?", timeout=90)
        assert turn.returncode == 1, (turn.stdout, turn.stderr)
        assert turn.stderr.startswith("the turn failed: I can't reach the model service right now"), turn.stderr
        shown = turn.stdout + turn.stderr
        for internal in (str(dead), "127.0.0.1", "ClientConnectorError", "Cannot connect", "ssl:default"):
            assert internal not in shown, (internal, shown)
        log = gw.wait_log("agent failed")
        assert f"127.0.0.1:{dead}" in log and "ClientConnectorError" in log, log[-2000:]
    finally:
        gw.cli("stop")
        gw.kill_everything()
