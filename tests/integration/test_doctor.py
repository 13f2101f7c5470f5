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
        assert status == "fail" and detail.startswith(f"127.0.0.1:{taken} is in use by pid {os.getpid()}, python"), detail
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
    assert f"fail  config        {gw.config}: [agent] kind: must be one of" in result.stdout, result.stdout


def test_doctor_reports_every_config_error_and_still_runs_the_other_checks(tmp_path):
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    with held:
        gw = Gateway(tmp_path, extra_toml=f'[adapters.web]\ntype = "webchat"\nport = {held.getsockname()[1]}\n'
                                          '[storage]\ndurability = "sometimes"\n[sesions]\nbusy_mode = "steer"\n',
                     gateway_toml="admin_prot = 1\n")
        result = gw.cli("doctor")
    assert result.returncode == 78, (result.stdout, result.stderr)
    config_lines = [line for line in result.stdout.splitlines() if line.startswith("fail  config ")]
    assert len(config_lines) == 3, result.stdout
    said = "\n".join(config_lines)
    assert "[gateway] admin_prot: unknown key, did you mean 'admin_port'?" in said, said
    assert "[storage] durability: must be one of" in said, said
    assert "sesions: unknown section, did you mean 'sessions'?" in said, said
    checks = lines(result.stdout)
    assert checks["port web"][0] == "fail" and "in use by pid" in checks["port web"][1], result.stdout
    assert checks["disk"][0] == "ok" and checks["state dir"][0] == "ok", result.stdout

    started = gw.cli("start")
    assert started.returncode == 78 and started.stderr.count("config error: ") == 3, started.stderr
    assert "(3 errors in the configuration)" in started.stderr, started.stderr


def test_doctor_beside_a_running_gateway_checks_the_key_in_the_daemons_environment(tmp_path):
    agent = f'[agent]\nkind = "openai"\nbase_url = "http://127.0.0.1:{free_port()}/v1"\nmodel = "m"\n' \
            f'api_key_env = "{KEY_VARIABLE}"\n'
    gw = Gateway(tmp_path, extra_toml=agent + '[adapters.web]\ntype = "webchat"\nport = 0\n')
    gw.env.pop(KEY_VARIABLE, None)
    try:
        gw.start()                                          # the daemon has no key
        gw.env[KEY_VARIABLE] = "sk-only-in-this-shell"      # this shell has one: it proves nothing
        checks = lines(gw.cli("doctor").stdout)
        status, detail = checks["agent key"]
        assert status == "fail" and f"${KEY_VARIABLE} is not set in the running gateway's environment (pid " \
            f"{gw.launcher_pid})" in detail, detail
        gw.cli("stop", timeout=60, check=True)
        gw.start()                                          # started with the key; this shell now without
        gw.env.pop(KEY_VARIABLE)
        checks = lines(gw.cli("doctor").stdout)
        assert checks["agent key"] == ("ok", f"${KEY_VARIABLE} is set in the running gateway's environment (pid "
                                             f"{gw.launcher_pid})"), checks["agent key"]
    finally:
        gw.cli("stop", timeout=60)
        gw.kill_everything()
