"""`status` and `health` on the real daemon, with adapters whose platform is unreachable or whose port is taken.

A web chat whose port another program holds, a fake platform and a Telegram Bot API on closed ports: `status` must
name each, say why, and exit 1 (as must `health --ready`), while plain `health` (liveness) stays 0. Once the port
is free and the platforms listen, the same gateway is healthy and ready, and shows the web chat's URL.
"""
from __future__ import annotations

import json
import socket

import pytest

from tests.actor_system import free_port, wait_for
from tests.gateway import Gateway, nodes
from tests.fakes.fakeplatform import FakePlatform
from tests.fakes.telegram import DEFAULT_TOKEN, FakeTelegram

pytestmark = pytest.mark.timeout(120)


def status(gw: Gateway) -> tuple[int, dict]:
    result = gw.cli("status", "--json")
    assert result.returncode in (0, 1), (result.returncode, result.stdout, result.stderr)
    return result.returncode, json.loads(result.stdout)


def rows(document: dict) -> dict:
    return {row["name"]: row for row in document["adapters"]}


def test_status_and_health_name_each_adapter_that_is_down_and_why(tmp_path):
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    web_port, fake_port, tg_port = held.getsockname()[1], free_port(), free_port()
    gw = Gateway(tmp_path, extra_toml=f"""
[adapters.web]
type = "webchat"
port = {web_port}
[adapters.fake]
type = "fake"
base_url = "http://127.0.0.1:{fake_port}"
poll_timeout_s = 0.5
[adapters.tg]
type = "telegram"
access = "open"
token = "{DEFAULT_TOKEN}"
base_url = "http://127.0.0.1:{tg_port}"
poll_timeout_s = 1.0
[adapters.api]
type = "http"
port = 0
api_tokens = ["status-test-token-0123456789"]
""")
    try:
        gw.start()
        gw.wait_ready()
        down = ("web", "fake", "tg")
        code, doc = wait_for(lambda: (s := status(gw)) and all(rows(s[1])[n]["state"] == "retrying" for n in down)
                             and s, 30, 0.1, "web, fake and tg retrying")
        assert code == 1 and doc["health"] == "degraded", doc
        web, fake, tg, api = (rows(doc)[n] for n in ("web", "fake", "tg", "api"))
        assert "address already in use" in web["error"] and web["attempts"] >= 1 and web["since"] > 0, web
        assert fake["error"] and tg["error"].startswith("getMe:"), (fake, tg)
        assert api["state"] == "connected" and api["url"].startswith("http://127.0.0.1:"), api
        assert rows(doc)["cli"]["state"] == "up"
        assert {p.split(":")[0] for p in doc["problems"]} == {f"adapter {n} retrying" for n in down}, doc
        assert DEFAULT_TOKEN not in json.dumps(doc)

        screen = gw.cli("status")
        assert screen.returncode == 1 and screen.stdout.startswith("gateway degraded"), screen
        web_line = next(line for line in screen.stdout.splitlines() if line.strip().startswith("web "))
        assert "retrying for" in web_line and "address already in use" in web_line, screen.stdout
        assert api["url"] in screen.stdout

        live = gw.cli("health")
        assert live.returncode == 0 and live.stdout.startswith("live:"), live
        ready = gw.cli("health", "--ready")
        assert ready.returncode == 1 and len(ready.stderr.strip().splitlines()) == 1, ready
        assert ready.stderr.startswith("not ready:") and "adapter web retrying" in ready.stderr, ready
        verdict = json.loads(gw.cli("health", "--ready", "--json").stdout)
        assert verdict["ok"] is False and verdict["check"] == "ready" and len(verdict["problems"]) == 3, verdict

        # The port is let go and both platforms come up on the ports the adapters keep trying.
        held.close()
        with FakePlatform(port=fake_port), FakeTelegram(port=tg_port):
            code, doc = wait_for(lambda: (s := status(gw))[0] == 0 and s, 60, 0.2, "every adapter connected")
            assert doc["health"] == "healthy" and doc["problems"] == [], doc
            assert rows(doc)["web"]["url"] == f"http://127.0.0.1:{web_port}/", doc
            assert "error" not in rows(doc)["web"], doc
            ready = gw.cli("health", "--ready")
            assert ready.returncode == 0 and ready.stdout.startswith("ready:"), ready
    finally:
        held.close()
        gw.cli("stop")
        gw.kill_everything()


def test_health_says_so_when_no_gateway_runs(tmp_path):
    result = Gateway(tmp_path).cli("health", "--json")
    assert result.returncode == 3, result
    verdict = json.loads(result.stdout)
    assert verdict["ok"] is False and verdict["running"] is False, verdict
    assert "no gateway running" in verdict["problems"][0], verdict


def test_a_refused_token_leaves_the_gateway_serving_and_status_names_the_adapter(tmp_path):
    """A revoked token used to crash its adapter until the restarts escalated and the launcher exited 70, taking
    every other adapter down with it. Now the adapter stays up, down in status with the platform's refusal."""
    with FakeTelegram() as tg:
        gw = Gateway(tmp_path, extra_toml=f"""
[adapters.tg]
type = "telegram"
token = "999999:not-the-token-the-platform-knows"
base_url = "{tg.base_url}"
poll_timeout_s = 1.0
[adapters.web]
type = "webchat"
port = 0
""")
        try:
            gw.start()
            gw.wait_ready()
            code, doc = wait_for(lambda: (s := status(gw)) and "refused" in rows(s[1])["tg"].get("error", "") and s,
                                 30, 0.2, "tg shown down with the platform's refusal")
            assert code == 1 and doc["health"] == "degraded", doc
            assert rows(doc)["tg"]["state"] == "retrying" and "Unauthorized" in rows(doc)["tg"]["error"], doc
            gw.wait_log("refuses this adapter")
            answer = gw.cli("chat", "--message", "still there?", timeout=60)
            assert answer.returncode == 0 and "still there?" in answer.stdout, answer
            tree = {n["name"]: n for n in nodes(gw.tree())}
            assert tree["tg"]["restarts"] == 0, tree["tg"]
            assert gw.alive_pids() and gw.launcher_pid in gw.alive_pids(), "the gateway runs on"
        finally:
            gw.cli("stop")
            gw.kill_everything()
