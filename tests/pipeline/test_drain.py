"""Drain for rolling restarts (G9): intake stops, turns in flight finish, everything is flushed, exit 0; what was
still pending is picked up by the next instance."""
from __future__ import annotations

import json

import pytest

from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import CURSOR, pipeline_gateway, settled_answers, visible
from tests.actor_system import wait_for

pytestmark = pytest.mark.timeout(180)


def test_drain_lets_the_turn_in_flight_finish_then_exits_0(tmp_path):
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform)
        try:
            gw.start()
            gw.wait_ready()
            platform.inject("dr", "finish me before you go #slow 0.1")
            wait_for(lambda: any(CURSOR in m["text"] for m in visible(platform, "dr")), 20, 0.01, "streaming")
            report = json.loads(gw.cli("drain", "--timeout", "30", "--json", check=True).stdout)
            assert report["ok"] and report["exited"] and report["in_flight_left"] == 0
            [answer] = settled_answers(platform, "dr", timeout=5, gw=gw)
            assert "finish me before you go" in answer and "api_key_env" in answer
            gw.assert_no_process_left()
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_what_a_short_drain_leaves_is_finished_by_the_next_instance(tmp_path):
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform)
        try:
            gw.start()
            gw.wait_ready()
            platform.inject("dr2", "a long one #slow 0.3")
            wait_for(lambda: any(CURSOR in m["text"] for m in visible(platform, "dr2")), 20, 0.01, "streaming")
            report = json.loads(gw.cli("drain", "--timeout", "0.2", "--json", check=True).stdout)
            assert report["exited"] and report["in_flight_left"] == 1
            busy = report["detail"].split("still busy at the deadline: ")[-1]
            assert "session:" in busy, report   # who held the drain up (slow children are listed too)
            gw.assert_no_process_left()
            platform.inject("dr2", "sent between the two instances")
            gw.start()
            texts = settled_answers(platform, "dr2", count=2, timeout=60, gw=gw)
            assert "a long one" in texts[0] and "api_key_env" in texts[0]
            assert "sent between the two instances" in texts[1]
            assert len(platform.messages("dr2")) == 2
        finally:
            gw.cli("stop")
            gw.kill_everything()
