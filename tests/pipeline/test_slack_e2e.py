"""The Slack adapter in the real daemon against the fake Slack: the Events API (signatures, url_verification,
retries of one event make one turn, mentions and threads in channels) and Socket Mode (an envelope whose commit a
kill -9 cut short is delivered again and answered once)."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.actor_system import wait_for
from tests.gateway import Gateway, nodes
from tests.fakes.slack import DEFAULT_APP_TOKEN, DEFAULT_BOT_TOKEN, FakeSlack
from tests.pipeline.harness import CURSOR

pytestmark = pytest.mark.timeout(120)
BOT = "U0FAKEBOT1"


def slack_gateway(tmp_path: Path, slack: FakeSlack, adapter: str = "", chunk_delay_s: float = 0.0) -> Gateway:
    return Gateway(tmp_path, extra_toml=f"""
[adapters.slack]
type = "slack"
access = "open"
bot_token = "{DEFAULT_BOT_TOKEN}"
app_token = "{DEFAULT_APP_TOKEN}"
base_url = "{slack.api_url}"
{adapter}
[agent]
chunk_delay_s = {chunk_delay_s}
""")


def inbox(gw: Gateway) -> list[str]:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        return [r[0] for r in db.execute("SELECT platform_message_id FROM inbox ORDER BY seq")]


def answers(slack: FakeSlack, channel: str, count: int = 1) -> list[dict]:
    """The bot's settled messages in a channel, once there are ``count`` of them (None before, for wait_for)."""
    shown = [m for m in slack.messages(channel) if not m["deleted"]]
    return shown if len(shown) >= count and not any(CURSOR in m["text"] for m in shown) else None


def post(url: str, body: bytes, headers: dict) -> int:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


# ------------------------------------------------------------------------------------------------ Events API

@pytest.fixture(scope="module")
def events_rig(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("slack-events")
    with FakeSlack(post_burst=20, ping_interval=0) as slack:
        # Port 0, read back from `status`: a port picked free here could be taken by another test's daemon before
        # the adapter binds it (the suite runs on several workers).
        gw = slack_gateway(tmp_path, slack, f"""inbound = "events_api"
signing_secret = "{slack.identity['signing_secret']}"
events_port = 0
events_path = "/slack/events"
""")
        try:
            gw.start()
            gw.wait_ready()
            seen: list = []

            def served_url():
                rows = json.loads(gw.cli("status", "--json").stdout or "{}").get("adapters", [])
                seen[:] = [r for r in rows if r.get("name") == "slack"]
                return next((r.get("url") for r in seen if r.get("url")), None)
            try:
                url = wait_for(served_url, 60, 0.2, "the Events API server's URL in status")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; the adapter's row: {seen}") from None
            answers: list = []

            def verified_answer():
                answers.append(slack.set_request_url(url))
                return answers[-1] and answers[-1]["verified"] and answers[-1]
            try:
                verified = wait_for(verified_answer, 60, 0.2, "the Request URL to pass url_verification")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; the last answers: {answers[-3:]}") from None
            assert verified["status"] == 200
            yield slack, gw, url
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_a_bad_signature_or_an_old_timestamp_is_refused_and_nothing_is_stored(events_rig):
    slack, gw, url = events_rig
    before = inbox(gw)
    forged = {"type": "event_callback", "event_id": "EvFORGED01", "team_id": slack.identity["team_id"],
              "event": {"type": "message", "channel": "D0FORGED01", "channel_type": "im", "user": "U0FORGED01",
                        "text": "let me in", "ts": f"{time.time():.6f}"}}
    body = json.dumps(forged).encode()
    assert post(url, body, slack.signature_headers(body, secret="not-the-secret")) == 401
    assert post(url, body, slack.signature_headers(body, timestamp=time.time() - 6 * 60)) == 401
    assert post(url, body, slack.signature_headers(body, timestamp=time.time() + 6 * 60)) == 401
    assert post(url, body, {}) == 401
    tampered = body.replace(b"let me in", b"let me in!")
    assert post(url, tampered, slack.signature_headers(body)) == 401
    gw.wait_log("Events API request refused")
    assert inbox(gw) == before
    assert slack.messages("D0FORGED01") == []


def test_one_event_delivered_three_times_is_one_turn(events_rig):
    """The first delivery slow to be answered, Slack retries it (X-Slack-Retry-Num 1 and 2) while the first is
    still in flight: all three are the same event, and the chat gets one answer."""
    slack, gw, url = events_rig
    slack.set_request_url(None)
    try:
        injected = slack.inject_message("answer me once", "D0RETRY001", user="U0RETRY001")
        body = json.dumps(slack.events()[-1]["payload"]).encode()
        statuses = {}

        def deliver(retry: int) -> None:
            extra = {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"} if retry else {}
            statuses[retry] = post(url, body, {**slack.signature_headers(body), **extra})
        threads = [threading.Thread(target=deliver, args=(n,)) for n in (0, 1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        assert slack.set_request_url(url)["verified"]
    assert statuses == {0: 200, 1: 200, 2: 200}
    [answer] = wait_for(lambda: answers(slack, "D0RETRY001"), 60, 0.1, "the answer")
    assert "answer me once" in answer["text"]
    assert inbox(gw).count(f"D0RETRY001:{injected['ts']}") == 1
    assert len(slack.messages("D0RETRY001")) == 1


def test_in_a_channel_only_a_mention_is_answered_and_a_thread_reply_goes_in_its_thread(events_rig):
    slack, gw, _url = events_rig
    quiet = slack.inject_message("chatting among ourselves", "C0TEAM0001")
    asked = slack.inject_message(f"<@{BOT}> what is 2 & 3?", "C0TEAM0001")
    [answer] = wait_for(lambda: answers(slack, "C0TEAM0001"), 60, 0.1, "the answer to the mention")
    assert answer["thread_ts"] is None and "what is 2 &amp; 3?" in answer["text"]
    assert answer["markup_problems"] == [], "the model's text is escaped for mrkdwn"
    followup = slack.inject_message(f"<@{BOT}> and in here?", "C0TEAM0001", thread_ts=asked["ts"])
    _, in_thread = wait_for(lambda: answers(slack, "C0TEAM0001", 2), 60, 0.1, "the answer in the thread")
    assert in_thread["thread_ts"] == asked["ts"] and "and in here?" in in_thread["text"]
    rows = inbox(gw)
    assert f"C0TEAM0001:{quiet['ts']}" not in rows, "a channel message without a mention is not input"
    assert rows.count(f"C0TEAM0001:{asked['ts']}") == 1, "message + app_mention of one message: one row"
    assert f"C0TEAM0001:{followup['ts']}" in rows
    wait_for(lambda: all(e["status"] == "acked" for e in slack.events()), 20, 0.1, "every event acknowledged")


def test_no_secret_reaches_the_log_or_the_admin_output(events_rig):
    slack, gw, _url = events_rig
    shown = gw.log() + gw.cli("status").stdout + gw.cli("tree").stdout
    assert "SlackAdapter" in shown and "Events API listening" in shown, "the outputs checked hold the adapter"
    for secret in (DEFAULT_BOT_TOKEN, DEFAULT_APP_TOKEN, slack.identity["signing_secret"]):
        assert secret not in shown


# ----------------------------------------------------------------------------------------------- Socket Mode

def test_an_envelope_cut_off_by_a_kill_9_before_its_commit_is_delivered_again_and_answered_once(tmp_path):
    with FakeSlack(ping_interval=0, retry_delays=[0.0, 60.0, 300.0]) as slack:
        gw = slack_gateway(tmp_path, slack)
        try:
            gw.start()
            gw.wait_ready()
            wait_for(lambda: slack.open_connections(), 20, 0.05, "the adapter's socket")
            adapter = next(n for n in nodes(gw.tree()) if n["name"] == "slack")
            # Hold the database's write lock: the adapter gets the envelope but cannot commit its row.
            lock = sqlite3.connect(gw.state / "gateway.db", timeout=30, isolation_level=None)
            lock.execute("BEGIN IMMEDIATE")
            try:
                injected = slack.inject_message("asked just before the crash", "D0CRASH001", user="U0CRASH001")
                wait_for(lambda: slack.envelopes() and slack.envelopes()[-1]["connection"], 20, 0.02,
                         "the envelope on the adapter's socket")
                assert slack.events()[-1]["status"] == "pending", "no commit, so no acknowledgement"
                os.kill(adapter["pid"], signal.SIGKILL)
            finally:
                lock.execute("ROLLBACK")
                lock.close()
            wait_for(lambda: (n := gw.node("slack")) and n["pid"] != adapter["pid"] and n["state"] == "running",
                     30, 0.05, "the adapter back")
            [answer] = wait_for(lambda: answers(slack, "D0CRASH001"), 60, 0.1, "the answer")
            assert "asked just before the crash" in answer["text"]
            [event] = [e for e in slack.events() if e["event_id"] == injected["event_ids"][0]]
            assert event["status"] == "acked" and len(event["attempts"]) >= 2, "delivered again after the kill"
            assert event["acked"]["connection"] != event["attempts"][0]["connection"]
            assert inbox(gw).count(f"D0CRASH001:{injected['ts']}") == 1
            assert len(slack.messages("D0CRASH001")) == 1
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_streaming_to_twenty_channels_at_once_stays_within_slacks_limits(tmp_path):
    """Every window of the fake shrunk tenfold and the adapter's pacing scaled with it (the ratios are the
    registry's): 20 replies streamed at once, and the fake serves no 429 and sees no call during a ban."""
    scaled = ("per_chat_ops_per_s = 10.0, per_chat_burst = 2, edit_interval_s = 0.15, "
              "app_edit_ops_per_s = 7.5, app_edit_burst = 5")
    with FakeSlack(time_scale=0.1, ack_timeout=30.0, ping_interval=0) as slack:   # ack deadline still 3 s
        gw = slack_gateway(tmp_path, slack, f"pacing = {{ {scaled} }}\n", chunk_delay_s=0.1)
        channels = [f"D0STREAM{n:03d}" for n in range(20)]
        try:
            gw.start()
            gw.wait_ready()
            wait_for(lambda: slack.open_connections(), 20, 0.05, "the adapter's socket")
            for n, channel in enumerate(channels):
                slack.inject_message(f"tell me a long story, number {n}", channel, user=f"U0STREAM{n:03d}")
            for channel in channels:
                wait_for(lambda: answers(slack, channel), 90, 0.1, f"the answer in {channel}")
            stats = slack.stats()
            assert stats["ratelimited_served"] == 0 and stats["retry_after_violations"] == 0, stats
            assert stats["requests"].get("chat.update", 0) >= len(channels), "the replies were streamed"
            assert all(len(slack.messages(c)) >= 1 for c in channels)
        finally:
            gw.cli("stop")
            gw.kill_everything()
