"""kill -9 in the middle of a turn: after recovery the reply is in the chat exactly once, edited into place (G1-G3,
G8). Each trial kills one kind of actor, or the whole daemon, while the answer is streaming."""
from __future__ import annotations

import os
import signal
import sqlite3

import pytest

from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import CURSOR, actor_pid, pipeline_gateway, settled_answers, visible

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def platform():
    with FakePlatform() as fake:
        yield fake


def inbox_states(gw) -> list[tuple]:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        return db.execute("SELECT platform_message_id, state FROM inbox ORDER BY seq").fetchall()


def wait_all_done(gw, timeout: float = 20) -> None:
    try:
        wait_for(lambda: inbox_states(gw) and all(s == "done" for _, s in inbox_states(gw)), timeout, 0.05,
                 "every inbound message to be done")
    except AssertionError as exc:
        tail = [line for line in gw.log().splitlines() if " INFO root" not in line][-40:]
        raise AssertionError(f"{exc}: {inbox_states(gw)}\n" + "\n".join(tail)) from None


def streaming_started(platform, chat):
    return wait_for(lambda: any(CURSOR in m["text"] for m in visible(platform, chat)), 20, 0.01,
                    "the answer to start streaming")


@pytest.mark.parametrize("victim", ["Session", "StreamConsumer", "FakePlatformAdapter"])
def test_kill_9_of_an_actor_mid_turn_delivers_the_reply_once(tmp_path, platform, victim):
    gw = pipeline_gateway(tmp_path, platform)
    try:
        gw.start()
        gw.wait_ready()
        platform.inject("k", f"tell me about {victim} #slow 0.15")
        streaming_started(platform, "k")
        pid = actor_pid(gw, victim)
        assert pid, f"no {victim} running"
        os.kill(pid, signal.SIGKILL)
        [answer] = settled_answers(platform, "k", timeout=60, gw=gw)
        assert f"tell me about {victim}" in answer and "api_key_env" in answer  # the whole answer, not a piece
        assert len(platform.messages("k")) == 1, "no second message: the reply was edited into place"
        wait_all_done(gw)
        platform.inject("k", "and one more")
        texts = settled_answers(platform, "k", count=2, timeout=60)
        assert "and one more" in texts[1]
    finally:
        gw.cli("stop")
        gw.kill_everything()


def test_kill_9_of_the_daemon_mid_turn_resumes_once_and_edits_in_place(tmp_path, platform):
    gw = pipeline_gateway(tmp_path, platform)
    try:
        gw.start()
        gw.wait_ready()
        platform.inject("d", "survive a daemon crash #slow 0.15")
        streaming_started(platform, "d")
        os.kill(gw.launcher_pid, signal.SIGKILL)
        gw.assert_no_process_left()
        gw.start()
        [answer] = settled_answers(platform, "d", timeout=60, gw=gw)
        assert "survive a daemon crash" in answer and "api_key_env" in answer
        assert len(platform.messages("d")) == 1
        assert "resuming the turn interrupted by a restart" in gw.log()
        wait_all_done(gw)
        assert len(inbox_states(gw)) == 1
    finally:
        gw.cli("stop")
        gw.kill_everything()


def test_inbound_that_arrives_while_the_daemon_is_down_is_answered_once_after_restart(tmp_path, platform):
    gw = pipeline_gateway(tmp_path, platform)
    try:
        gw.start()
        gw.wait_ready()
        gw.cli("stop")
        platform.inject("late", "are you there?")
        gw.start()
        [answer] = settled_answers(platform, "late", timeout=60)
        assert "are you there?" in answer
        gw.cli("stop")
        gw.start()
        gw.wait_ready()
        platform.inject("late", "second")
        texts = settled_answers(platform, "late", count=2, timeout=60)
        assert len(texts) == 2 and "second" in texts[1]
    finally:
        gw.cli("stop")
        gw.kill_everything()
