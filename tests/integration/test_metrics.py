"""Prometheus metrics and the health probes, on the real daemon: real actors, real sockets, the fake platform."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import urllib.error
import urllib.request

import psutil
import pytest

from tests.actor_system import wait_for
from tests.gateway import DEFAULT_ADAPTERS_ANY_PORT, PYTHON, ROOT, Gateway, nodes
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import CURSOR, actor_pid, crash_cell, pipeline_gateway, settled_answers, visible

pytestmark = pytest.mark.timeout(120)

METRICS_ON_A_FREE_PORT = "[metrics]\nport = 0\n"
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


# ------------------------------------------------------------------------------------------------- helpers

def parse(text: str) -> dict:
    """The text format 0.0.4 as {(name, frozenset(labels)): value}; every line must be a comment or a sample."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        name, labels, value = match.groups()
        samples[(name, frozenset(LABEL.findall(labels or "")))] = float(value)
    return samples


def value(samples: dict, name: str, **labels) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def endpoint(gw: Gateway) -> dict:
    """The metrics record in runtime.json (written once the metrics actor listens)."""
    def read():
        path = gw.state / "run" / "runtime.json"
        return path.exists() and json.loads(path.read_text()).get("metrics")
    return wait_for(read, 20, 0.05, "the metrics port in runtime.json")


def get(gw: Gateway, path: str, host: str | None = None) -> tuple[int, str]:
    info = endpoint(gw)
    request = urllib.request.Request(f"http://{info['host']}:{info['port']}{path}",
                                     headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(gw: Gateway) -> dict:
    status, body = get(gw, "/metrics")
    assert status == 200, body
    return parse(body)


def wait_metric(gw: Gateway, check, what: str, timeout: float = 20) -> dict:
    return wait_for(lambda: (s := scrape(gw)) and check(s) and s, timeout, 0.1, what)


# --------------------------------------------------------------------------------------------------- tests

def test_a_turn_a_killed_session_and_a_429_show_up_in_metrics(tmp_path):
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform, extra=METRICS_ON_A_FREE_PORT + "[debug]\nfault_injection = true\n")
        try:
            gw.start()
            gw.wait_ready()
            platform.inject("m1", "hello metrics")
            assert "hello metrics" in settled_answers(platform, "m1", gw=gw)[0]
            turn = {"profile": "default", "platform": "fake", "outcome": "done"}
            # Counters are live; gauges come from a tree walk cached for a second: wait for both to agree.
            s = wait_metric(gw, lambda s: value(s, "gateway_turns_total", **turn) == 1
                            and value(s, "gateway_deliveries", state="delivered") == 1
                            and value(s, "gateway_sessions_live") == 1
                            and value(s, "gateway_actors", kind="Session", state="running") == 1
                            and value(s, "gateway_up") == 1    # the watchdog's first heartbeat may come after
                            # the adapter's report of its connection and the walk that names its address: both
                            # reach the metrics actor on their own, in either order
                            and value(s, "gateway_adapter_connected", adapter="fake") == 1,
                            "one turn, delivered, its session live, its adapter connected, the gateway up")
            assert value(s, "gateway_sessions_live") == 1, {k: v for k, v in s.items() if "actors" in k[0]}
            assert value(s, "gateway_turn_seconds_count", profile="default", platform="fake") == 1
            assert value(s, "gateway_turn_seconds_bucket", profile="default", platform="fake", le="+Inf") == 1
            assert value(s, "gateway_adapter_connected", adapter="fake") == 1
            assert value(s, "gateway_actors", kind="Session", state="running") == 1
            assert value(s, "gateway_up") == 1 and value(s, "gateway_draining") == 0
            assert value(s, "gateway_actor_restarts_total", kind="Session") is None
            assert get(gw, "/healthz") == (200, "ok\n") and get(gw, "/readyz") == (200, "ok\n")
            assert get(gw, "/healthz", host=f"localhost:{endpoint(gw)['port']}")[0] == 200
            # A page of another site whose name resolves to 127.0.0.1 (DNS rebinding) reads nothing.
            assert get(gw, "/metrics", host="rebound.example:9464") == (421, "scrape by IP address or localhost\n")

            # An idle session cell crashes: its shard restarts it, and that restart is counted once.
            crash_cell(gw, "Session")
            s = wait_metric(gw, lambda s: value(s, "gateway_actor_restarts_total", kind="Session") is not None,
                            "the session restart counted")
            assert value(s, "gateway_actor_restarts_total", kind="Session") == 1
            s = wait_metric(gw, lambda s: value(s, "gateway_sessions_live") == 1, "the session live again")

            # kill -9 of the shard that hosts it: the session supervisor restarts the shard, counted once.
            os.kill(actor_pid(gw, "Session"), signal.SIGKILL)
            s = wait_metric(gw, lambda s: value(s, "gateway_actor_restarts_total", kind="SessionShard") == 1,
                            "the shard restart counted")
            assert value(s, "gateway_actor_restarts_total", kind="Session") == 1

            # One 429 from the platform: waited out by the adapter, counted with the wait it imposed.
            platform.set_faults(next=["flood"], flood_retry_after=0.4, methods=["send"])
            platform.inject("m2", "through a flood")
            assert "through a flood" in settled_answers(platform, "m2", gw=gw)[0]
            # The chat shows the answer a moment before the session hears it was delivered and counts the turn.
            s = wait_metric(gw, lambda s: value(s, "gateway_flood_waits_total", platform="fake") == 1
                            and value(s, "gateway_turns_total", **turn) == 2, "the flood wait and the turn counted")
            assert value(s, "gateway_flood_wait_seconds_total", platform="fake") == pytest.approx(0.4)
            assert value(s, "gateway_turns_total", **turn) == 2

            # The port listens on loopback only, and `status` shows where.
            info = endpoint(gw)
            metrics_node = next(n for n in nodes(gw.tree()) if n["kind"] == "Metrics")
            assert info["pid"] == metrics_node["pid"]
            listening = [c for c in psutil.net_connections(kind="inet")
                         if c.status == psutil.CONN_LISTEN and c.pid == info["pid"]]
            assert listening and all(c.laddr.ip == "127.0.0.1" for c in listening), listening
            assert info["port"] in {c.laddr.port for c in listening}
            status = gw.cli("status", check=True).stdout
            assert f"http://127.0.0.1:{info['port']}/metrics" in status
            assert json.loads(gw.cli("status", "--json", check=True).stdout)["metrics_url"] == info["url"]
        finally:
            gw.cli("stop")
            gw.kill_everything()


@pytest.mark.timeout(180)
def test_readyz_answers_503_during_a_drain(tmp_path):
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform, extra=METRICS_ON_A_FREE_PORT)
        drain = None
        try:
            gw.start()
            gw.wait_ready()
            wait_for(lambda: get(gw, "/readyz") == (200, "ok\n"), 20, 0.1, "ready")
            info = endpoint(gw)
            platform.inject("md", "keep me busy while the gateway drains #slow 0.1")
            wait_for(lambda: any(CURSOR in m["text"] for m in visible(platform, "md")), 20, 0.01, "streaming")
            drain = subprocess.Popen([PYTHON, str(ROOT / "run_gateway.py"), "--config", str(gw.config), "drain",
                                      "--timeout", "60", "--json"], env=gw.env, stdout=subprocess.PIPE, text=True)
            status, body = wait_for(lambda: (r := get(gw, "/readyz"))[0] == 503 and r, 20, 0.05, "readyz 503")
            assert "draining" in body
            assert value(scrape(gw), "gateway_draining") == 1
            assert get(gw, "/healthz")[0] == 200  # draining is not unhealthy: the process must not be restarted
            report = json.loads(drain.communicate(timeout=90)[0])
            assert report["ok"] and report["exited"]
            with pytest.raises(OSError):  # gone with the gateway
                urllib.request.urlopen(f"http://127.0.0.1:{info['port']}/readyz", timeout=2)
        finally:
            if drain is not None and drain.poll() is None:
                drain.kill()
            gw.cli("stop")
            gw.kill_everything()


def test_metrics_disabled_opens_no_port(tmp_path):
    gw = Gateway(tmp_path, extra_toml="[metrics]\nenabled = false\n" + DEFAULT_ADAPTERS_ANY_PORT)
    try:
        gw.start()
        tree = gw.wait_ready()
        assert "Metrics" not in {n["kind"] for n in nodes(tree)}
        runtime = json.loads((gw.state / "run" / "runtime.json").read_text())
        assert "metrics" not in runtime and not (gw.state / "run" / "metrics.json").exists()
        assert "metrics      off" in gw.cli("status", check=True).stdout
        listening = {c.laddr.port for c in psutil.net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN and c.pid in gw.seen_pids}
        assert 9464 not in listening
    finally:
        gw.cli("stop")
        gw.kill_everything()


def test_the_exposition_escapes_labels_and_accumulates_buckets():
    from actors.metric_families import Histogram, counter, exposition, histogram, registry_of
    h = Histogram((1.0, 5.0))
    for seconds in (0.5, 2.0, 2.0, 60.0):
        h.observe(seconds)
    registry = registry_of(lambda: [counter("gateway_x_total", "help", [({"platform": 'a"b\\c\nd'}, 3)]),
                                    histogram("gateway_t_seconds", "help", ("profile", "platform"),
                                              {("default", "fake"): h})])
    text = exposition(registry)
    assert "# TYPE gateway_x_total counter" in text and "# TYPE gateway_t_seconds histogram" in text
    samples = parse(text)
    assert samples[("gateway_x_total", frozenset({("platform", r'a\"b\\c\nd')}))] == 3
    buckets = {le: value(samples, "gateway_t_seconds_bucket", profile="default", platform="fake", le=le)
               for le in ("1.0", "5.0", "+Inf")}
    assert buckets == {"1.0": 1, "5.0": 3, "+Inf": 4}
    assert value(samples, "gateway_t_seconds_count", profile="default", platform="fake") == 4
    assert value(samples, "gateway_t_seconds_sum", profile="default", platform="fake") == 64.5


def test_the_exposition_has_the_families_docs_metrics_md_lists_and_nothing_else(tmp_path):
    """The actor's own registry: no _created series, none of prometheus_client's process or platform metrics, and
    every family of the table in docs/metrics.md with its type, even before any fact has arrived."""
    from actors.metrics import Metrics
    metrics = Metrics()
    metrics.state_dir, metrics.heartbeat_max_age = tmp_path, 10.0
    text = metrics.exposition()
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    documented = dict(re.findall(r"^\| `(gateway_[a-z_]+)` \| (\w+) \|", (ROOT / "docs" / "metrics.md").read_text(),
                                 re.MULTILINE))
    assert types == documented
    assert all(line.startswith("#") or line.split("{")[0].split(" ")[0].startswith(tuple(types))
               for line in text.splitlines()), text
    assert "_created" not in text and value(parse(text), "gateway_up") == 0   # no heartbeat in tmp_path
