"""Idle sessions are passivated (their cell stops) and come back on the next message; the live-session cap (per
shard) passivates the least recently used first. Nothing is lost either way: the inbox is the truth."""
from __future__ import annotations

import pytest

from tests.actor_system import wait_for
from tests.gateway import nodes
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import CURSOR, pipeline_gateway, settled_answers, visible

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
        gw = pipeline_gateway(tmp_path, platform, extra="[sessions]\nshards = 1\nmax_live = 2\n")
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


def test_a_burst_past_the_cap_waits_for_slots_and_every_chat_is_answered(tmp_path):
    """Admission: 12 new chats at once over a cap of 3 live sessions. No more than 3 Session cells are ever live
    together (sampled from the tree), and every chat still gets its one answer."""
    chats = [f"burst{i}" for i in range(12)]
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform, extra="[sessions]\nshards = 1\nmax_live = 3\n",
                              agent="[agent]\nchunk_delay_s = 0.05\n")
        try:
            gw.start()
            gw.wait_ready()
            for chat in chats:
                platform.inject(chat, f"hello from {chat}")
            most = 0

            def all_answered():
                nonlocal most
                most = max(most, len(live_sessions(gw)))
                return all(len(visible(platform, c)) == 1 and CURSOR not in visible(platform, c)[0]["text"]
                           for c in chats)
            wait_for(all_answered, 120, 0.05, "every chat of the burst answered")
            assert most <= 3, f"{most} Session cells at once over a cap of 3"
            assert all(len(platform.messages(c)) == 1 for c in chats)
        finally:
            gw.cli("stop")
            gw.kill_everything()
