"""Idle sessions are passivated (their actor stops) and come back on the next message; the live-session cap
passivates the least recently used first. Nothing is lost either way: the inbox is the truth."""
from __future__ import annotations

import pytest

from tests.actor_system import wait_for
from tests.daemon import nodes
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import pipeline_gateway, settled_answers

pytestmark = pytest.mark.timeout(120)


def live_sessions(gw) -> list[dict]:
    return [n for n in nodes(gw._tree_or_none() or {}) if n["kind"] == "Session"]


def test_an_idle_session_is_passivated_and_answers_again_after(tmp_path):
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform, extra="[sessions]\nidle_s = 1\n")
        try:
            gw.start()
            gw.wait_ready()
            platform.inject("idle", "first")
            settled_answers(platform, "idle", gw=gw)
            wait_for(lambda: not live_sessions(gw), 20, 0.1, "the idle session to be passivated")
            platform.inject("idle", "second")
            texts = settled_answers(platform, "idle", count=2, gw=gw)
            assert "second" in texts[1] and "2 messages from you" in texts[1], "the history survived passivation"
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_the_live_session_cap_passivates_the_least_recently_used(tmp_path):
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform, extra="[sessions]\nmax_live = 2\n")
        try:
            gw.start()
            gw.wait_ready()
            for i in range(5):
                platform.inject(f"cap{i}", f"hello {i}")
                settled_answers(platform, f"cap{i}", gw=gw)
            wait_for(lambda: len(live_sessions(gw)) <= 2, 20, 0.1, "at most 2 live sessions")
            platform.inject("cap0", "back again")
            texts = settled_answers(platform, "cap0", count=2, gw=gw)
            assert "back again" in texts[1]
        finally:
            gw.cli("stop")
            gw.kill_everything()
