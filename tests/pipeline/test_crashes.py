"""kill -9 in the middle of a turn: after recovery the reply is in the chat exactly once, edited into place (G1-G3,
G8). Each trial kills one kind of actor, or the whole daemon, while the answer is streaming. The ambiguous send (the
platform created a message whose id died with the daemon) ends with the answer once, marked as re-sent."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import threading
import urllib.request

import pytest

from actors.adapters.pacing import DEFAULT_RESENT_MARKER
from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import CURSOR, actor_pid, crash_cell, pipeline_gateway, settled_answers, visible

pytestmark = pytest.mark.timeout(180)


class HoldingPlatform(FakePlatform):
    """The fake platform, except that the first send into ``hold_chat`` creates its message and then holds the HTTP
    answer until ``released``: the message exists and the gateway cannot learn its id, the window a kill -9 of the
    daemon must fall into to leave an ambiguous send."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hold_chat: str | None = None
        self.holding, self.released = threading.Event(), threading.Event()

    def _op_handler(self, op: str):
        perform = super()._op_handler(op)
        if op != "send":
            return perform

        async def send_then_hold(request):
            body = await request.json()   # aiohttp keeps the body: the fake's own handler reads it again
            hold = str(body.get("chat")) == self.hold_chat and not self.holding.is_set()
            answer = await perform(request)
            if hold:
                self.holding.set()
                while not self.released.is_set():
                    await asyncio.sleep(0.02)
            return answer
        return send_then_hold


@pytest.fixture
def platform():
    with HoldingPlatform() as fake:
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


def streaming_started(platform, chat, gw):
    """The first preview is on the platform and its id in the ledger: a kill from now on is not an ambiguous send
    (that one has its own test below)."""
    wait_for(lambda: any(CURSOR in m["text"] for m in visible(platform, chat)), 20, 0.01,
             "the answer to start streaming")
    wait_for(lambda: recorded_parts(gw), 20, 0.01, "the first part's id in the ledger")


def recorded_parts(gw) -> int:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        return db.execute("SELECT count(*) FROM obligation_parts").fetchone()[0]


@pytest.mark.parametrize("victim", ["SessionShard", "FakePlatformAdapter", "Session cell", "StreamConsumer cell"])
def test_kill_9_of_an_actor_mid_turn_delivers_the_reply_once(tmp_path, platform, victim):
    """A process (the session's shard, the adapter) killed with -9, or a cell (the session, the reply's consumer)
    crashing in a handler, while the answer streams."""
    gw = pipeline_gateway(tmp_path, platform, extra="[debug]\nfault_injection = true\n")
    try:
        gw.start()
        gw.wait_ready()
        # A cell is crashed through the admin CLI after a tree walk: on a loaded machine that takes seconds, so its
        # answer streams longer (about 10 s) for the cell to be still there.
        platform.inject("k", f"tell me about {victim} #slow {0.3 if victim.endswith(' cell') else 0.15}")
        streaming_started(platform, "k", gw)
        if victim.endswith(" cell"):
            crash_cell(gw, victim.split()[0])
            wait_for(lambda: "crashed on Fault" in gw.log(), 20, 0.05, f"the {victim} to crash")
        else:
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
        streaming_started(platform, "d", gw)
        os.kill(gw.launcher_pid, signal.SIGKILL)
        gw.assert_no_process_left()
        gw.start()
        [answer] = settled_answers(platform, "d", timeout=60, gw=gw)
        assert "survive a daemon crash" in answer and "api_key_env" in answer
        assert len(platform.messages("d")) == 1
        assert DEFAULT_RESENT_MARKER not in answer, "every send's id was recorded: nothing to mark"
        gw.wait_log("resuming the turn interrupted by a restart")
        wait_all_done(gw)
        assert len(inbox_states(gw)) == 1
        [delivery] = deliveries(gw)["deliveries"]
        assert delivery["state"] == "delivered" and not delivery["ambiguous"]
    finally:
        gw.cli("stop")
        gw.kill_everything()


def test_a_turn_cut_past_max_resumes_is_not_resumed_again_and_the_user_is_told_which_message(tmp_path, platform):
    """G8, bounded resume ([sessions] max_resumes = 1 here): the daemon is killed mid-turn, and again while the
    resumed turn runs. The next start does not loop on it: the chat gets one notice that quotes the message, and
    nothing else."""
    gw = pipeline_gateway(tmp_path, platform, extra="[sessions]\nmax_resumes = 1\n")
    try:
        gw.start()
        gw.wait_ready()
        platform.inject("twice", "an unlucky question #slow 0.3")
        streaming_started(platform, "twice", gw)
        os.kill(gw.launcher_pid, signal.SIGKILL)
        gw.assert_no_process_left()
        gw.start()
        wait_for(lambda: "resuming the turn interrupted" in gw.log(), 30, 0.05, "the turn resumed")
        os.kill(gw.launcher_pid, signal.SIGKILL)   # the resumed turn is cut too
        gw.assert_no_process_left()
        gw.start()
        [notice] = settled_answers(platform, "twice", timeout=60, gw=gw)
        gw.wait_log("it was cut 2 times")
        assert "interrupted twice" in notice and "\u201can unlucky question #slow 0.3\u201d" in notice, notice
        assert "api_key_env" not in notice
        wait_all_done(gw)
        assert len(platform.messages("twice")) == 1
        # What recovery did, in the admin views: one resume, one notice (the sweeper reads them every sweep).
        status = wait_for(lambda: (s := json.loads(gw.cli("status", "--json").stdout)).get("recovery", {}).get(
            "notices") == 1 and s, 30, 0.2, "the resume and the notice in status --json")
        assert status["recovery"]["resumes"] == 1 and status["recovery"]["late"] == 0, status
        assert "1 turn(s) resumed after a restart, 1 message(s) given up on" in gw.cli("status").stdout, status
        [key] = [s["session_id"] for s in json.loads(gw.cli("sessions", "list", "--json").stdout)["sessions"]]
        assert "recovery: 1 turn(s) resumed after a restart, 1 message(s)" in gw.cli("sessions", "show", key).stdout
        metrics = urllib.request.urlopen(json.loads((gw.state / "run" / "runtime.json").read_text())["metrics"]
                                         ["url"], timeout=10).read().decode()
        assert "gateway_turn_resumes_total 1" in metrics and "gateway_resume_notices_total 1" in metrics
    finally:
        gw.cli("stop")
        gw.kill_everything()


def test_a_turn_cut_by_two_daemon_kills_in_a_row_is_still_answered_once(tmp_path, platform):
    """G8 (issue: a crash-looping deploy): kill -9 mid-turn, and again while the resumed turn runs; with the default
    max_resumes (3) the third start resumes it again and the chat gets the answer once, without a notice."""
    gw = pipeline_gateway(tmp_path, platform)
    try:
        gw.start()
        gw.wait_ready()
        platform.inject("again", "a question worth finishing #slow 0.3")
        for cut in (1, 2):
            streaming_started(platform, "again", gw)
            os.kill(gw.launcher_pid, signal.SIGKILL)
            gw.assert_no_process_left()
            gw.start()
            wait_for(lambda: f"resume {cut} of 3" in gw.log(), 30, 0.05, f"resume {cut} of the turn")
        [answer] = settled_answers(platform, "again", timeout=90, gw=gw)
        assert "a question worth finishing" in answer and "api_key_env" in answer, answer
        assert "interrupted" not in answer and "send it again" not in answer
        wait_all_done(gw)
        assert len(platform.messages("again")) == 1, "edited into place across both restarts"
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


# The agent text follows the [adapters.fake] keys: this pacing override lands there (the reply goes out once, whole).
PREVIEWS_OFF = "pacing = { supports_edit = false }\n"
AGENT = "[agent]\nchunk_delay_s = 0.0\n"


def deliveries(gw) -> dict:
    return json.loads(gw.cli("deliveries", "--json", check=True).stdout)


def complete_answers(platform, chat: str, question: str) -> list[dict]:
    return [m for m in visible(platform, chat)
            if question in m["text"] and "api_key_env" in m["text"] and CURSOR not in m["text"]]


@pytest.mark.parametrize("marker,previews", [(None, True), ("(sent again: the daemon restarted)", False)],
                         ids=["preview", "final-text-custom-marker"])
def test_kill_9_of_the_daemon_between_a_send_and_its_id_marks_the_answer_as_resent(tmp_path, platform, marker,
                                                                                      previews):
    """The daemon dies while the platform holds the answer to a send: that message exists and no id of it is
    anywhere in the gateway. Recovery sends the answer again, once, with the marker line, and the ledger says the
    delivery was ambiguous. With previews the held send is the first preview (the copy keeps its cursor); without
    them it is the complete final text (the copy is a whole unmarked answer), which the sweeper or the session's
    re-delivery finishes, whichever claims it first."""
    extra = f'[sessions]\nresent_marker = "{marker}"\n' if marker else ""
    expected = marker or DEFAULT_RESENT_MARKER
    gw = pipeline_gateway(tmp_path, platform, extra=extra, agent=("" if previews else PREVIEWS_OFF) + AGENT)
    try:
        gw.start()
        gw.wait_ready()
        platform.hold_chat = "amb"
        platform.inject("amb", "an ambiguous send #slow 0.1")
        wait_for(platform.holding.is_set, 30, 0.01, "the first send to be created and held")
        os.kill(gw.launcher_pid, signal.SIGKILL)
        gw.assert_no_process_left()
        platform.released.set()
        gw.start()
        wait_for(lambda: any(expected in m["text"] for m in complete_answers(platform, "amb", "an ambiguous send")),
                 60, 0.05, "the marked answer")
        wait_all_done(gw)
        [stale, resent] = platform.messages("amb")
        assert resent["text"].startswith(expected + "\n") and CURSOR not in resent["text"]
        assert expected not in stale["text"], "the unaddressable copy stays as it was"
        assert (CURSOR in stale["text"]) == previews
        assert len([m for m in complete_answers(platform, "amb", "an ambiguous send") if expected in m["text"]]) == 1
        found = deliveries(gw)
        [delivery] = found["deliveries"]
        assert delivery["state"] == "delivered" and delivery["ambiguous"] and delivery["send_intent"] is None
        assert list(delivery["parts"].values()) == [resent["message_id"]]
        assert found["ambiguous"] == 1
        assert "~ambiguous" in gw.cli("deliveries", check=True).stdout
    finally:
        platform.released.set()
        gw.cli("stop")
        gw.kill_everything()
