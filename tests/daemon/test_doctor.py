"""The pure parts of `doctor` (daemon/doctor.py, daemon/doctor_probes.py): answers read, ports planned, the state
dir judged, real sockets for the port check."""
from __future__ import annotations

import os
import socket

import pytest

from actors.adapters import registry
from common import config as config_mod
from daemon.doctor import agent_checks, planned_ports, render, state_dir_check
from daemon.doctor_probes import Check, model_answer, port_check


@pytest.mark.parametrize("status, listed, expected", [
    (200, ["m", "other"], "ok"),
    (200, None, "ok"),
    (200, ["other"], "warn"),
    (401, None, "fail"),
    (403, None, "fail"),
    (404, None, "warn"),
    (429, None, "warn"),
    (503, None, "fail"),
    (418, None, "warn"),
])
def test_what_an_answer_to_get_models_means(status, listed, expected):
    check = model_answer(status, "m", listed)
    assert check.status == expected and check.name == "model endpoint", check
    assert (f"HTTP {status}" in check.detail) or status == 200


def test_the_ports_a_configuration_listens_on():
    config = config_mod.validate({"gateway": {"admin_port": 17000}, "metrics": {"port": 9000}, "adapters": {
        "web": {"type": "webchat", "port": 8000},
        "hook": {"type": "telegram", "token": "1:x", "mode": "webhook", "webhook_secret": "s3cret-value",
                 "webhook_port": 8443},
        "poll": {"type": "telegram", "token": "1:y"},
        "sl": {"type": "slack", "bot_token": "xoxb-1", "inbound": "events_api", "signing_secret": "s",
               "events_port": 3001},
        "sock": {"type": "slack", "bot_token": "xoxb-2", "app_token": "xapp-2"}}}, "(test)")
    adapters = {n: a for n, a in registry.validate_all(config).items() if a["type"] != "cli"}
    assert planned_ports(config, adapters) == [("admin", "127.0.0.1", 17000), ("metrics", "127.0.0.1", 9000),
                                               ("console", "127.0.0.1", 8770),
                                               ("web", "127.0.0.1", 8000), ("hook webhook", "127.0.0.1", 8443),
                                               ("sl events", "127.0.0.1", 3001)]
    config["metrics"]["enabled"] = config["console"]["enabled"] = False
    assert not {"metrics", "console"} & {label for label, _host, _port in planned_ports(config, adapters)}


def test_a_port_free_taken_or_held_by_the_gateway():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert port_check("web", "127.0.0.1", port, set()).status == "fail"
        assert port_check("web", "127.0.0.1", port, {os.getpid()}) == \
            Check("ok", "port web", f"127.0.0.1:{port} is held by this gateway (pid {os.getpid()})")
    assert port_check("web", "127.0.0.1", port, set()).status == "ok"
    assert port_check("web", "127.0.0.1", 0, set()).status == "ok"


def test_the_state_dir_must_be_private(tmp_path):
    state = tmp_path / "state"
    assert state_dir_check(state).status == "ok"             # created private at the first start
    state.mkdir(mode=0o700)
    assert state_dir_check(state).status == "ok"
    (state / "gateway.db").write_text("")
    (state / "gateway.db").chmod(0o644)
    assert state_dir_check(state).status == "fail" and "gateway.db" in state_dir_check(state).detail
    (state / "gateway.db").chmod(0o600)
    state.chmod(0o750)
    assert state_dir_check(state).status == "fail" and "0750" in state_dir_check(state).detail


def test_agent_checks_need_base_url_model_and_key():
    assert [c.status for c in agent_checks({}, {})] == ["ok"]
    assert [c.status for c in agent_checks({"kind": "openai", "model": "m"}, {})] == ["fail"]
    agent = {"kind": "openai", "base_url": "http://h/v1", "model": "m", "api_key_env": "K"}
    assert [c.status for c in agent_checks(agent, {})] == ["ok", "fail"]
    assert [c.status for c in agent_checks(agent, {"K": "v"})] == ["ok", "ok"]


def test_render_aligns_and_counts():
    text = render([Check("ok", "config", "fine"), Check("fail", "port web", "taken")])
    assert text.splitlines() == ["ok    config    fine", "fail  port web  taken", "doctor: 1 fail, 1 ok"]
