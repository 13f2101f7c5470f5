"""Scheduled jobs through the real daemon (docs/cron.md): a job fires on its schedule and its answer reaches its chat
once; a kill -9 of the daemon right after a run was claimed still answers that run once; the times that fell while
the daemon was down follow each job's catch-up rule; the admin CLI lists, runs, pauses and resumes jobs.

One daemon for the module (killed and started again by the first test). Schedules have a seconds field
("*/2 * * * * *": every two seconds), so nothing waits for a minute to turn."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import time

import pytest

from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.gateway import Gateway
from tests.integration.test_metrics import value, wait_metric
from tests.pipeline.harness import CURSOR, pipeline_gateway, visible

pytestmark = pytest.mark.timeout(180)

JOBS = """
[cron.often]
schedule = "*/2 * * * * *"
prompt = "cron often #think 0.8"
adapter = "fake"
chat = "c-often"
catch_up = "latest"

[cron.skipper]
schedule = "*/2 * * * * *"
prompt = "cron skipper #think 0.8"
adapter = "fake"
chat = "c-skip"
catch_up = "skip"

[cron.by-hand]
schedule = "0 0 1 1 *"
prompt = "cron by hand"
adapter = "fake"
chat = "c-hand"
"""
DOWN_S = 4.0   # the daemon stays down this long after the kill: at least two times of each job fall in it


@pytest.fixture(scope="module")
def platform():
    with FakePlatform() as fake:
        yield fake


@pytest.fixture(scope="module")
def gw(tmp_path_factory, platform):
    gateway = pipeline_gateway(tmp_path_factory.mktemp("cron"), platform, extra=JOBS)
    try:
        gateway.start()
        yield gateway
    finally:
        gateway.cli("stop")
        gateway.kill_everything()


def runs(gw, job: str) -> list[dict]:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute(
            "SELECT r.*, i.state AS inbox_state FROM cron_runs r LEFT JOIN inbox i ON i.seq = r.inbox_seq "
            "WHERE r.job = ? ORDER BY r.scheduled_at", (job,))]


def inbox_states(gw) -> list[str]:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        return [s for (s,) in db.execute("SELECT state FROM inbox ORDER BY seq")]


def settled(platform, chat: str) -> list[dict]:
    return [m for m in visible(platform, chat) if CURSOR not in m["text"]]


def explain(gw, platform) -> str:
    chats = {c: [(m["message_id"], m["text"][:30]) for m in platform.messages(c)] for c in ("c-often", "c-skip")}
    tail = [line for line in gw.log().splitlines() if " INFO root" not in line][-30:]
    return f"runs: {runs(gw, 'often')}\n{runs(gw, 'skipper')}\nchats: {chats}\n" + "\n".join(tail)


def test_jobs_fire_are_answered_once_across_a_kill_and_missed_times_follow_catch_up(gw, platform):
    # Fires on schedule: each job's prompt is answered in its chat, as a plain message (no reply to a platform id).
    wait_for(lambda: settled(platform, "c-often") and settled(platform, "c-skip"), 60, 0.05,
             "the first answers of both jobs")
    first = settled(platform, "c-often")[0]
    assert "cron often" in first["text"] and first["reply_to"] is None, first
    # kill -9 of the whole daemon right after a run was claimed (its turn thinks 0.8 s: the answer is not out yet),
    # every earlier run answered (a reply cut mid-send has its own tests: tests/pipeline/test_crashes.py).
    wait_for(lambda: all(s == "done" for s in inbox_states(gw)), 30, 0.02, "the runs so far to be answered")
    claimed = len(runs(gw, "often"))
    wait_for(lambda: len(runs(gw, "often")) > claimed, 30, 0.005, "the next run of often to be claimed")
    os.kill(gw.launcher_pid, signal.SIGKILL)
    killed_at = time.time()
    gw.assert_no_process_left()
    killed_run = runs(gw, "often")[-1]
    assert killed_run["inbox_state"] in ("received", "taken"), f"the kill came before the answer: {killed_run}"
    # The schedule's times pass while the daemon is down (waiting for the clock, not synchronising with anything).
    time.sleep(max(0.0, killed_at + DOWN_S - time.time()))
    restarted_at = time.time()
    gw.start()
    wait_for(lambda: any(r["claimed_at"] > restarted_at for r in runs(gw, "often"))
             and any(r["claimed_at"] > restarted_at for r in runs(gw, "skipper")), 60, 0.05,
             "both jobs to be decided after the restart")
    for job in ("often", "skipper"):
        gw.cli("cron", "pause", job, check=True)
    paused_at = time.time()
    # Quiet: every stored run answered (twice checked, a tick's length apart, past any tick that read the pause late).
    try:
        wait_for(lambda: time.time() > paused_at + 1.5 and all(s == "done" for s in inbox_states(gw)), 60, 0.05,
                 "every run to be answered")
        wait_for(lambda: all(s == "done" for s in inbox_states(gw)), 60, 0.05, "every run to be answered")
        often = runs(gw, "often")
        injected = [r for r in often if r["outcome"] == "injected"]
        wait_for(lambda: len(settled(platform, "c-often")) >= len(injected), 60, 0.05, "every answer settled")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{explain(gw, platform)}") from None
    assert all(r["claimed_at"] < paused_at for r in often), "no run after the pause"
    # Delivered once: one message per run, the run cut by the kill included (it was answered after the restart).
    assert len(visible(platform, "c-often")) == len(injected), explain(gw, platform)
    assert all("cron often" in m["text"] for m in visible(platform, "c-often"))
    assert runs(gw, "often")[[r["run_id"] for r in often].index(killed_run["run_id"])]["inbox_state"] == "done"
    # catch_up = "latest": of the times that fell while down, only the most recent ran, once, marked caught up.
    [caught] = [r for r in often if r["caught_up"]]
    before = [r for r in often if r["scheduled_at"] <= killed_at]
    assert killed_at < caught["scheduled_at"] and caught["claimed_at"] > restarted_at and caught["missed"] >= 2, caught
    assert not [r for r in often if before[-1]["scheduled_at"] < r["scheduled_at"] < caught["scheduled_at"]], \
        "the earlier missed times never run"
    # catch_up = "skip": none of them ran; the latest is recorded as skipped, with how many were missed.
    skipper = runs(gw, "skipper")
    [skipped] = [r for r in skipper if r["outcome"] == "skipped"]
    last_before = max(r["scheduled_at"] for r in skipper if r["scheduled_at"] <= killed_at)
    assert killed_at < skipped["scheduled_at"] and skipped["missed"] >= 2 and skipped["inbox_seq"] is None
    assert not [r for r in skipper if last_before < r["scheduled_at"] <= skipped["scheduled_at"]
                and r["outcome"] == "injected"], "a missed time ran under catch_up = skip"
    answered = sum(r["outcome"] == "injected" for r in skipper)
    wait_for(lambda: len(settled(platform, "c-skip")) >= answered, 30, 0.05, "an answer per skipper run")
    assert len(visible(platform, "c-skip")) == answered, explain(gw, platform)
    log = gw.wait_log("running the latest")
    assert "skipped: missed while the gateway was down" in log


def test_the_admin_cli_lists_runs_pauses_and_resumes_jobs(gw, platform):
    listing = json.loads(gw.cli("cron", "list", "--json", check=True).stdout)
    by_name = {j["job"]: j for j in listing["jobs"]}
    assert set(by_name) == {"often", "skipper", "by-hand"}
    hand = by_name["by-hand"]
    assert (hand["schedule"], hand["catch_up"], hand["paused"], hand["runs"]) == ("0 0 1 1 *", "latest", False, [])
    assert hand["next_in_s"] > 0 and hand["session_key"].startswith("default.fake.dm.chat-")
    ran = json.loads(gw.cli("cron", "run", "by-hand", "--json", check=True).stdout)
    assert ran["ok"] and ran["run_id"].startswith("by-hand:manual:") and not ran["queued"]
    wait_for(lambda: settled(platform, "c-hand"), 30, 0.05, "the manual run's answer")
    assert "cron by hand" in settled(platform, "c-hand")[0]["text"]
    missing = gw.cli("cron", "run", "nope", "--json")
    assert missing.returncode == 1 and "no job 'nope'" in json.loads(missing.stdout)["error"]
    assert json.loads(gw.cli("cron", "pause", "by-hand", "--json", check=True).stdout)["paused"]
    listing = json.loads(gw.cli("cron", "list", "--json", check=True).stdout)
    [hand] = [j for j in listing["jobs"] if j["job"] == "by-hand"]
    assert hand["paused"] and hand["runs"][0]["origin"] == "manual"
    assert not json.loads(gw.cli("cron", "resume", "by-hand", "--json", check=True).stdout)["paused"]
    status = json.loads(gw.cli("status", "--json").stdout)
    assert status["cron"]["jobs"] == 3 and status["cron"]["runs"] >= 2, status.get("cron")
    # Not user traffic: the runs' turns are counted apart, none among the users' turns.
    samples = wait_metric(gw, lambda s: (value(s, "gateway_internal_turns_total", profile="default", platform="fake",
                                               outcome="done") or 0) >= 1, "the runs' turns in /metrics")
    assert not [k for k in samples if k[0] in ("gateway_turns_total", "gateway_turn_seconds_count")], samples


def test_a_bad_job_stops_the_start_with_exit_78_naming_the_key(tmp_path):
    bad = Gateway(tmp_path, extra_toml='[adapters.fake]\ntype = "fake"\nbase_url = "http://127.0.0.1:9"\n'
                                       '[cron.x]\nschedule = "0 25 * * *"\nprompt = "p"\nadapter = "fake"\nchat = 1\n')
    result = bad.cli("start", "--json")
    assert result.returncode == 78, result
    error = json.loads(result.stdout)
    assert error["key"] == "[cron.x] schedule" and "not a cron expression" in error["reason"]
