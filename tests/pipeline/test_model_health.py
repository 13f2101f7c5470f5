"""The model service as a component of health, through the real daemon and a fake OpenAI-compatible model: while
turns fail because the model is down, `status` is degraded and names it (state, last error, since when), `health
--ready` and /readyz say not ready, /metrics shows gateway_model_up 0; the next turn it answers makes it up again."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.fakes.openai_server import MODEL, FakeOpenAIServer, agent_toml, error_reply
from tests.pipeline.harness import pipeline_gateway, settled_answers

pytestmark = pytest.mark.timeout(180)


def status_of(gw) -> tuple[int, dict]:
    result = gw.cli("status", "--json")
    return result.returncode, json.loads(result.stdout)


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_failing_model_degrades_status_until_a_turn_succeeds(tmp_path):
    with FakePlatform() as platform, FakeOpenAIServer() as model:
        model.script(*[error_reply(500, "the model backend is down")] * 4)   # every attempt of the first turn
        gw = pipeline_gateway(tmp_path, platform, agent=agent_toml(model))
        endpoint = f"{MODEL} at {model.base_url}"
        try:
            gw.start()
            gw.wait_ready()
            code, status = status_of(gw)
            assert code == 0 and status["health"] == "healthy" and status["models"] == [], status
            assert "none asked since the start" in gw.cli("status").stdout

            platform.inject("m", "hello model")
            [notice] = settled_answers(platform, "m", gw=gw, timeout=60)
            assert "internal error" in notice, notice
            code, status = wait_for(lambda: (s := status_of(gw))[1]["models"] and s, 30, 0.2,
                                    "the model's row in status")
            [row] = status["models"]
            assert row["name"] == endpoint and row["state"] == "failing" and row["failed_turns"] == 1, row
            assert "HTTP 500: the model backend is down" in row["error"] and row["since"] > 0, row
            assert code == 1 and status["health"] == "degraded", status
            assert [p for p in status["problems"] if p.startswith(f"model {endpoint} failing (1 turn failed)")], \
                status["problems"]
            screen = gw.cli("status").stdout
            assert "models       1, 1 failing" in screen and f"{endpoint}  failing for" in screen, screen

            ready = gw.cli("health", "--ready")
            assert ready.returncode == 1 and f"model {endpoint} failing" in ready.stderr, ready
            assert gw.cli("health").returncode == 0, "a failing model does not make the gateway dead"
            metrics = status["metrics_url"]
            code, body = wait_for(lambda: (r := http_get(metrics.replace("/metrics", "/readyz")))[0] == 503 and r,
                                  15, 0.2, "/readyz saying not ready")
            assert f"model {endpoint} failing" in body, body
            assert f'gateway_model_up{{model="{endpoint}"}} 0' in http_get(metrics)[1]

            platform.inject("m", "and now?")   # nothing scripted: the fake model answers (an echo)
            settled_answers(platform, "m", count=2, gw=gw, timeout=60)
            code, status = wait_for(lambda: (s := status_of(gw))[1]["models"][0]["state"] == "up" and s, 30, 0.2,
                                    "the model up again")
            assert code == 0 and status["health"] == "healthy", status
            [row] = status["models"]
            assert row["failed_turns"] == 0 and "the model backend is down" in row["error"], \
                "the last failure is kept, with its time"
            assert "last failure" in gw.cli("status").stdout
            assert gw.cli("health", "--ready").returncode == 0
            wait_for(lambda: f'gateway_model_up{{model="{endpoint}"}} 1' in http_get(metrics)[1], 15, 0.2,
                     "gateway_model_up 1")
        finally:
            gw.cli("stop")
            gw.kill_everything()
