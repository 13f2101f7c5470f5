"""The zombie connection (actors/adapters/liveness.py), in the real daemon: the fake platform's long poll goes
through a relay that freezes it (open, silent, never closed). The intake believes itself connected; past its bound
the adapter is restarted by its supervisor, says why in the log and in `status`, counts it in /metrics, and the
message sent while it was a zombie is answered once."""
from __future__ import annotations

import re
import urllib.request

import pytest

from tests.actor_system import wait_for
from tests.adapters.freezing_proxy import FreezingProxy
from tests.fakes.fakeplatform import FakePlatform
from tests.gateway import Gateway, nodes

pytestmark = pytest.mark.timeout(120)
SILENCE_S = 3.0


def adapter_node(gateway: Gateway):
    return next((n for n in nodes(gateway.tree()) if n["name"] == "fake"), None)


def test_a_frozen_long_poll_restarts_the_adapter_and_nothing_is_lost(tmp_path):
    platform = FakePlatform(port=0, state_file=tmp_path / "fake.json")
    platform.start()
    proxy = FreezingProxy("127.0.0.1", platform.port).start()
    gateway = Gateway(tmp_path, watchdog_interval=30.0, extra_toml=f"""
[adapters.fake]
type = "fake"
base_url = "{proxy.base_url}"
poll_timeout_s = 0.5
max_silence_s = {SILENCE_S}
""")
    try:
        gateway.start()
        gateway.wait_ready()
        platform.inject("before", "hello before")
        wait_for(lambda: platform.messages("before"), 30, 0.1, "an answer in chat 'before'")
        first_pid = adapter_node(gateway)["pid"]

        frozen = proxy.freeze()
        assert frozen >= 1, "the adapter holds no connection through the relay"
        platform.inject("during", "hello during the freeze")

        def restarted():
            node = adapter_node(gateway)
            return node if node and node["pid"] and node["pid"] != first_pid and node["state"] == "running" else None
        node = wait_for(restarted, 60, 0.2, f"the adapter restarted after {SILENCE_S}s of silence "
                                            f"(first pid {first_pid}, now {adapter_node(gateway)})")
        assert node["restarts"] >= 1
        answers = wait_for(lambda: platform.messages("during"), 60, 0.1, "the answer to the message sent meanwhile")
        assert "intake is connected but silent" in gateway.log()
        status = gateway.cli("status").stdout
        assert re.search(r"fake .*last restart: .*intake stalled: no progress", status), status
        metrics_url = re.search(r"http://127\.0\.0\.1:\d+/metrics", status).group(0)
        body = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
        assert re.search(r'gateway_intake_stalls_total\{adapter="fake"\} [1-9]', body), body[-2000:]
        wait_for(lambda: len([o for o in platform.ops("during") if o["op"] == "send"]) >= 1, 30, 0.1, "the send")
        assert len([m for m in platform.messages("during") if not m["deleted"]]) == len(answers) == 1, \
            f"the message sent during the freeze was answered {len(answers)} times: {answers}"
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        proxy.stop()
        platform.stop()
