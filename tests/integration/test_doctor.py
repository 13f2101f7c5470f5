"""`doctor` through the real CLI: a temp configuration, real sockets on 127.0.0.1, a fake Bot API, a real daemon."""
from __future__ import annotations

import json
import os
import socket

import pytest

from tests.actor_system import free_port
from tests.gateway import Gateway
from tests.fakes.telegram import DEFAULT_TOKEN, FakeTelegram

pytestmark = pytest.mark.timeout(120)

KEY_VARIABLE = "GATEWAY_TEST_DOCTOR_KEY"
WRONG_TOKEN = "987654321:TEST-wrong-token-BBBBBBBBBBBBBBBBBBBBBB"


def lines(output: str) -> dict:
    """{check name: (status, detail)} of doctor's screen."""
    found = {}
    for line in output.splitlines()[:-1]:
        status, rest = line.split(None, 1)
        name, _, detail = rest.partition("  ")
        found[name.strip()] = (status, detail.strip())
    return found


def test_doctor_names_the_missing_key_the_dead_model_port_and_the_taken_port(tmp_path):
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    taken, free, dead = held.getsockname()[1], free_port(), free_port()
    with held, FakeTelegram() as tg:
        gw = Gateway(tmp_path, extra_toml=f"""
[agent]
kind = "openai"
base_url = "http://127.0.0.1:{dead}/v1"
model = "test-model"
api_key_env = "{KEY_VARIABLE}"
[adapters.web]
type = "webchat"
port = {taken}
[adapters.api]
type = "http"
port = {free}
api_tokens = ["doctor-test-token-0123456789"]
[adapters.tg]
type = "telegram"
token = "{DEFAULT_TOKEN}"
base_url = "{tg.base_url}"
[adapters.tg_wrong]
type = "telegram"
token = "{WRONG_TOKEN}"
base_url = "{tg.base_url}"
""")
        gw.env.pop(KEY_VARIABLE, None)
        gw.state.mkdir(mode=0o755)
        gw.state.chmod(0o755)
        result = gw.cli("doctor")
        assert result.returncode == 1, (result.stdout, result.stderr)
        checks = lines(result.stdout)
        assert checks["agent key"][0] == "fail" and f"${KEY_VARIABLE} is not set" in checks["agent key"][1]
        assert checks["model endpoint"][0] == "fail" and "unreachable" in checks["model endpoint"][1]
        status, detail = checks["port web"]
        # this test holds it
        assert status == "fail" and detail.startswith(f"127.0.0.1:{taken} is in use by pid {os.getpid()} ("), detail
        assert checks["port api"] == ("ok", f"127.0.0.1:{free} is free")
        assert checks["adapter tg"][0] == "ok" and "@fake_gateway_bot" in checks["adapter tg"][1]
        assert checks["adapter tg_wrong"][0] == "fail" and "refused the token" in checks["adapter tg_wrong"][1]
        assert checks["state dir"][0] == "fail" and "0755" in checks["state dir"][1]
        assert checks["disk"][0] in ("ok", "warn") and checks["config"][0] == "ok"
        assert result.stdout.splitlines()[-1].startswith("doctor: 5 fail")
        assert DEFAULT_TOKEN not in result.stdout and WRONG_TOKEN not in result.stdout

        # The key set, the state dir private: those two lines turn ok, and --json says the same as the screen.
        gw.env[KEY_VARIABLE] = "sk-doctor-test-key-0123456789abcdef"
        gw.state.chmod(0o700)
        document = json.loads(gw.cli("doctor", "--json").stdout)
        by_name = {c["name"]: c for c in document["checks"]}
        assert by_name["agent key"]["status"] == "ok" and by_name["state dir"]["status"] == "ok"
        assert by_name["port web"]["status"] == "fail" and document["ok"] is False
        assert "sk-doctor-test-key" not in json.dumps(document)


def test_doctor_on_a_running_gateway_finds_its_ports_held_by_it(tmp_path):
    web = free_port()
    gw = Gateway(tmp_path, admin_port=free_port(), extra_toml=f'[adapters.web]\ntype = "webchat"\nport = {web}\n')
    try:
        gw.start()
        gw.wait_ready()
        result = gw.cli("doctor")
        assert result.returncode == 0, (result.stdout, result.stderr)
        checks = lines(result.stdout)
        assert checks["port web"][0] == "ok" and "held by this gateway" in checks["port web"][1], checks
        assert checks["port admin"][0] == "ok" and "held by this gateway" in checks["port admin"][1], checks
        assert checks["agent"][0] == "ok" and "agent key" not in checks and checks["state dir"][0] == "ok"
    finally:
        gw.cli("stop")
        gw.kill_everything()


def test_doctor_reports_a_bad_configuration_with_the_loaders_words(tmp_path):
    gw = Gateway(tmp_path, extra_toml='[agent]\nkind = "gpt"\n')
    result = gw.cli("doctor")
    assert result.returncode == 78, (result.stdout, result.stderr)
    assert "[agent] kind: must be one of" in result.stderr and str(gw.config) in result.stderr
