"""The Slack adapter's own parts, without an actor system: event -> MessageEvent, mrkdwn escaping, request signing,
Web API errors, and the adapter's coroutines (Socket Mode, the Events API, outbound) on a plain event loop against
the in-process fake Slack. The conformance suite (test_conformance.py) runs the same adapter in the real daemon."""
from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest
from hypothesis import given, settings, strategies as st

from actors.adapters import base, registry
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.errors import FloodError, MessageNotFoundError, PermanentError, RetryableError, TooLongError
from actors.adapters.pacing import escaped_len
from actors.adapters.slack.adapter import SlackAdapter
from actors.adapters.slack.client import classify_error
from actors.adapters.slack.inbound import event_from_callback, skip_reason, strip_mention
from actors.adapters.slack.formatting import escape, to_mrkdwn, unescape
from actors.adapters.slack.signing import refusal, signature
from actors.messages import PlatformOp
from storage import session_key
from common.config import ConfigError
from tests.fakes.slack import DEFAULT_APP_TOKEN, DEFAULT_BOT_TOKEN, FakeSlack
from tests.fakes.slack.formatting import render

pytestmark = pytest.mark.timeout(30)
BOT = "U0FAKEBOT1"
SECRET = "fake-signing-secret-0000"   # the fake's DEFAULT_IDENTITY signing_secret


class Posts:
    """Stands in for the bridge: what the loop side hands to the actor thread."""

    def __init__(self):
        self.items = []

    def post(self, item):
        self.items.append(item)

    def lines(self) -> list[str]:
        return [i.text for i in self.items if isinstance(i, base.LogLine)]


@pytest.fixture
def slack():
    # The ack deadline shrunk to 0.3 s and retries at once, so redelivery shows within a test; no server pings.
    with FakeSlack(time_scale=0.1, retry_delays=[0.0, 0.0, 0.0], post_burst=50, ping_interval=0) as fake:
        yield fake


def make_adapter(slack: FakeSlack, tmp_path, **settings) -> tuple[SlackAdapter, Posts]:
    adapter = SlackAdapter()
    adapter.name = "sl"
    adapter.settings = registry.validate_adapter("sl", {"type": "slack", "bot_token": DEFAULT_BOT_TOKEN,
                                                        "app_token": DEFAULT_APP_TOKEN, "base_url": slack.api_url,
                                                        **settings})
    adapter.profile = adapter.settings["profile"]
    adapter.pacing = registry.pacing_of(adapter.settings)
    adapter.secrets = registry.secret_values(adapter.settings)
    adapter.config = {"gateway": {"state_dir": str(tmp_path)}, "storage": {"durability": "normal"}}
    adapter._loop_bridge = posts = Posts()
    return adapter, posts


async def until(predicate, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"{what} not met within {timeout} s"
        await asyncio.sleep(0.01)
    return value


def callback(event: dict, event_id: str = "Ev1") -> dict:
    return {"type": "event_callback", "event_id": event_id, "event": event}


def message(text="hi", channel="D0USER0001", ts="1700000000.000100", **extra) -> dict:
    return {"type": "message", "channel": channel, "user": "U0USER0001", "text": text, "ts": ts,
            "channel_type": {"D": "im", "C": "channel", "G": "group"}[channel[0]], **extra}


# ------------------------------------------------------------------------------------- event -> MessageEvent

def test_dms_channels_and_threads_map_to_their_chat_types():
    dm = event_from_callback(callback(message("a &lt;b&gt; &amp;amp;")), "sl", "work", BOT)
    assert (dm.source.chat_id, dm.source.chat_type, dm.source.thread_id) == ("D0USER0001", "dm", None)
    assert dm.text == "a <b> &amp;" and dm.platform_message_id == "D0USER0001:1700000000.000100"
    assert dm.source.user_id == "U0USER0001" and dm.source.profile == "work" and dm.sent_at == 1700000000.0001
    top = event_from_callback(callback(message(f"<@{BOT}> help", "C0GENERAL1")), "sl", "p", BOT)
    assert (top.source.chat_type, top.source.thread_id, top.text) == ("group", None, "help")
    reply = event_from_callback(callback(message(f"more <@{BOT}|gw>", "C0GENERAL1", ts="1700000001.000200",
                                                 thread_ts="1700000000.000100")), "sl", "p", BOT)
    assert (reply.source.chat_type, reply.source.thread_id, reply.text) == ("thread", "1700000000.000100", "more")
    assert session_key(reply.source) != session_key(top.source)
    in_dm_thread = event_from_callback(callback(message(thread_ts="1600000000.000001")), "sl", "p", BOT)
    assert (in_dm_thread.source.chat_type, in_dm_thread.source.thread_id) == ("dm", "1600000000.000001")
    mention = event_from_callback(callback({"type": "app_mention", "channel": "C0GENERAL1", "user": "U1",
                                            "text": f"<@{BOT}> hi", "ts": "1700000000.000100"}), "sl", "p", BOT)
    assert mention.platform_message_id == top.platform_message_id, "one message, one row: message + app_mention"


def test_what_is_skipped_and_what_is_input():
    assert skip_reason(callback(message()), BOT, True) is None
    assert skip_reason(callback(message("no mention", "C0GENERAL1")), BOT, True) == \
        "a channel message that does not mention the bot"
    assert skip_reason(callback(message("no mention", "C0GENERAL1")), BOT, False) is None
    assert skip_reason(callback(message(f"<@{BOT}>", "G0PRIVATE1")), BOT, True) is None
    assert skip_reason(callback(message(bot_id="B0FAKEBOT1")), BOT, True) == "the bot's own message"
    assert skip_reason(callback(message(user=BOT)), BOT, True) == "the bot's own message"
    assert skip_reason(callback(message(subtype="message_changed")), BOT, True) == \
        "message subtype 'message_changed'"
    assert skip_reason(callback({"type": "reaction_added"}), BOT, True) == "event type 'reaction_added'"
    assert skip_reason(callback(message(subtype="thread_broadcast")), BOT, True) is None
    assert skip_reason("garbage", BOT, True) is None, "left to normalise, which rejects it loudly"
    assert skip_reason({"type": "event_callback", "event": 3}, BOT, True) is None
    assert strip_mention(f"<@{BOT}>  what <@U2> said", BOT) == "what <@U2> said"


@pytest.mark.parametrize("raw, reason", [
    ("garbage", "not an object"),
    ({"type": "event_callback", "event": "x"}, "event is str"),
    (callback(message(channel="D0X", text=None)), "text must be a string"),
    (callback(dict(message(), channel="")), "channel must be a non-empty string"),
    (callback(message(ts="yesterday")), "ts must be a Slack timestamp"),
])
def test_malformed_events_are_refused_with_a_reason(raw, reason):
    with pytest.raises(MalformedPayload, match=reason):
        event_from_callback(raw, "sl", "default", BOT)


# -------------------------------------------------------------------------------------------------- mrkdwn

@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab <>&;!@#|*`\n")), max_size=60))
def test_escaped_text_always_shows_as_written_and_never_makes_a_control_sequence(text):
    shown, problems = render(escape(text))
    assert shown == text and problems == []
    assert unescape(escape(text)) == text
    assert escaped_len(text) == len(escape(text)), "the chunker's length is the length Slack sees"
    shown, problems = render(to_mrkdwn(text))
    assert problems == [] and len(to_mrkdwn(text)) <= escaped_len(text)


def test_bold_becomes_mrkdwn_outside_code_and_a_broadcast_stays_text():
    assert to_mrkdwn("**bold** `**x** <y>`\n```\na && **b**\n```") == \
        "*bold* `**x** &lt;y&gt;`\n```\na &amp;&amp; **b**\n```"
    assert to_mrkdwn("<!channel> hi") == "&lt;!channel&gt; hi"


# ------------------------------------------------------------------------------------------------- signing

def test_a_request_is_accepted_only_signed_with_the_secret_and_within_five_minutes():
    body, now = b'{"type":"event_callback"}', 1_700_000_000.0
    good = signature(SECRET, "1700000000", body)
    assert refusal(SECRET, "1700000000", good, body, now) is None
    assert refusal(SECRET, "1700000000", good, body, now + 299) is None
    assert "over 300 s" in refusal(SECRET, "1700000000", good, body, now + 301)
    assert "over 300 s" in refusal(SECRET, "1700000000", good, body, now - 301)
    assert refusal(SECRET, "1700000000", good, body + b" ", now) == "the signature does not match"
    assert refusal("other-secret", "1700000000", good, body, now) == "the signature does not match"
    assert refusal(SECRET, "1700000001", good, body, now) == "the signature does not match"
    assert "no X-Slack" in refusal(SECRET, None, good, body, now)
    assert "no number" in refusal(SECRET, "soon", good, body, now)
    assert refusal(SECRET, "1700000000", "v0=\udcff", body, now) == "the signature does not match"


# -------------------------------------------------------------------------------------------- Web API errors

def test_web_api_failures_are_classified_by_what_to_do():
    assert isinstance(flood := classify_error("chat.update", 429, {"ok": False, "error": "ratelimited"}, "7"),
                      FloodError) and flood.retry_after == 7.0
    assert isinstance(classify_error("chat.postMessage", 200, {"ok": False, "error": "msg_too_long"}), TooLongError)
    assert isinstance(classify_error("chat.update", 200, {"ok": False, "error": "message_not_found"}),
                      MessageNotFoundError)
    lost = classify_error("chat.postMessage", 200, {"ok": False, "error": "internal_error"})
    assert isinstance(lost, RetryableError) and lost.maybe_done, "Slack's own failure may have posted it"
    assert isinstance(classify_error("chat.postMessage", 503, None), RetryableError)
    refused = classify_error("chat.postMessage", 200, {"ok": False, "error": "not_in_channel"})
    assert type(refused) is PermanentError and "not_in_channel" in str(refused)


@pytest.mark.parametrize("table, problem", [
    ({}, "app_token: required"),
    ({"inbound": "events_api"}, "signing_secret: required"),
    ({"inbound": "rtm", "app_token": "xapp-1"}, "must be one of"),
])
def test_each_inbound_mode_needs_its_secret(table, problem):
    with pytest.raises(ConfigError, match=problem):
        registry.validate_adapter("sl", {"type": "slack", "bot_token": "xoxb-1", **table})


def test_the_ping_interval_sets_the_silence_bound_and_has_a_floor():
    with pytest.raises(ConfigError, match="ping_interval_s: must be at least 1 second"):
        registry.validate_adapter("sl", {"type": "slack", "bot_token": "xoxb-1", "app_token": "xapp-1",
                                         "ping_interval_s": 0.2})
    adapter = SlackAdapter()
    adapter.settings = registry.validate_adapter("sl", {"type": "slack", "bot_token": "xoxb-1", "app_token": "xapp-1",
                                                        "ping_interval_s": 5.0})
    assert adapter.normal_silence_s() == 2 * 5.0 + 15.0
    adapter.settings = registry.validate_adapter("sl", {"type": "slack", "bot_token": "xoxb-1", "app_token": "xapp-1"})
    assert adapter.normal_silence_s() == 2 * 20.0 + 15.0, "Slack's own default: a ping every 20 s"


# ------------------------------------------------------------------------------------------- Socket Mode

def gate_emit(adapter: SlackAdapter):
    """Make the adapter's commits wait for ``gate``; ``holding`` is set when one is waiting."""
    real_emit, gate, holding = adapter.intake.emit, asyncio.Event(), asyncio.Event()

    async def gated_emit(raws, offset=None, **kwargs):
        holding.set()
        await gate.wait()
        return await real_emit(raws, offset, **kwargs)
    adapter.intake.emit = gated_emit
    return gate, holding


async def stop_intake(adapter: SlackAdapter, intake: asyncio.Task) -> None:
    intake.cancel()
    await asyncio.gather(intake, return_exceptions=True)
    await adapter.close()
    if adapter.store is not None:
        await adapter.store.close()


def test_an_envelope_is_acknowledged_only_once_its_row_is_committed(slack, tmp_path):
    adapter, posts = make_adapter(slack, tmp_path)

    async def main():
        gate, holding = gate_emit(adapter)
        intake = asyncio.get_running_loop().create_task(adapter.intake.run_forever())
        await until(lambda: slack.open_connections(), what="a socket")
        injected = slack.inject_message("hello <@U0FAKEBOT1>", "D0USER0001")
        await asyncio.wait_for(holding.wait(), 10)
        [event] = [e for e in slack.events() if e["event_id"] == injected["event_ids"][0]]
        assert event["status"] == "pending", "not committed yet: not acknowledged"
        # Slack's deadline passes meanwhile: it delivers again (retry_attempt 1), and that one waits its turn too.
        await until(lambda: len([a for a in slack.envelopes() if a["event_id"] == event["event_id"]]) >= 2,
                    what="a redelivery")
        gate.set()
        await until(lambda: slack.events()[0]["status"] == "acked", what="the event acked")
        await until(lambda: adapter.retries_skipped, what="the redelivery acknowledged")
        rows = await adapter.store.inbox.rows_in_state(session_key(adapter.normalise(event["payload"]).source))
        await stop_intake(adapter, intake)
        return rows

    rows = asyncio.run(main())
    assert [r.payload["text"] for r in rows] == ["hello"], "the redelivery was no second row"
    assert adapter.bot_user_id == BOT
    attempts = slack.envelopes()
    assert attempts[1]["retry_attempt"] == 1 and attempts[1]["retry_reason"] == "timeout"


def test_an_envelope_cut_off_before_its_commit_is_delivered_again_and_stored_once(slack, tmp_path):
    slack.configure(ack_timeout=20.0)   # 2 s: the first life dies well inside the deadline, even on a loaded box
    first, _ = make_adapter(slack, tmp_path)
    second, _ = make_adapter(slack, tmp_path)

    async def main():
        _gate, holding = gate_emit(first)
        intake = asyncio.get_running_loop().create_task(first.intake.run_forever())
        await until(lambda: slack.open_connections(), what="a socket")
        slack.inject_message("asked just before the end", "D0USER0001")
        await asyncio.wait_for(holding.wait(), 10)
        await stop_intake(first, intake)           # the process dies mid-commit: no row, no acknowledgement
        assert slack.events()[0]["status"] == "pending" and slack.open_connections() == []
        intake = asyncio.get_running_loop().create_task(second.intake.run_forever())
        await until(lambda: slack.events()[0]["status"] == "acked", what="the event acked by the next life")
        event = slack.events()[0]
        rows = await second.store.inbox.rows_in_state(session_key(second.normalise(event["payload"]).source))
        await stop_intake(second, intake)
        return event, rows

    event, rows = asyncio.run(main())
    assert [r.payload["text"] for r in rows] == ["asked just before the end"]
    assert [a["retry_attempt"] for a in event["attempts"]] == [0, 1]
    assert event["acked"]["connection"] != event["attempts"][0]["connection"]


def test_a_disconnect_warning_moves_to_a_new_connection_before_the_old_one_closes(slack, tmp_path):
    adapter, posts = make_adapter(slack, tmp_path)

    async def main():
        intake = asyncio.get_running_loop().create_task(adapter.intake.run_forever())
        [first] = await until(lambda: slack.open_connections(), what="a socket")
        await asyncio.get_running_loop().run_in_executor(None, lambda: slack.disconnect("warning", close_after=5))
        await until(lambda: len(slack.connections()) == 2 and slack.connections()[0]["closed_at"], what="a move")
        injected = slack.inject_message("after the move", "D0USER0002", user="U0USER0002")
        await until(lambda: slack.events()[-1]["status"] == "acked", what="the event acked")
        rows = await adapter.store.inbox.rows_in_state(session_key(
            adapter.normalise(slack.events()[-1]["payload"]).source))
        await stop_intake(adapter, intake)
        return first, injected, rows

    first, injected, rows = asyncio.run(main())
    old, new = slack.connections()
    assert new["opened_at"] < old["closed_at"], "the new connection was open before the old one closed"
    assert old["closed_at"] - old["opened_at"] < 5, "the adapter closed the old one itself, without waiting"
    assert [r.payload["text"] for r in rows] == ["after the move"]
    assert slack.envelopes()[-1]["connection"] == new["id"]
    assert any("moved to a new connection" in line for line in posts.lines())


def test_link_disabled_is_permanent(slack, tmp_path):
    adapter, posts = make_adapter(slack, tmp_path)

    async def main():
        await adapter.connect()
        serving = asyncio.get_running_loop().create_task(adapter.run_intake(adapter.intake.emit))
        await until(lambda: slack.open_connections(), what="a socket")
        await asyncio.get_running_loop().run_in_executor(None, lambda: slack.disconnect("link_disabled"))
        try:
            return await asyncio.wait_for(serving, 10)
        finally:
            await adapter.disconnect()

    with pytest.raises(PermanentError, match="link_disabled"):
        asyncio.run(main())


# -------------------------------------------------------------------------------------- Events API over HTTP

def test_events_api_refuses_unsigned_or_old_requests_and_answers_only_once_stored(slack, tmp_path):
    adapter, posts = make_adapter(slack, tmp_path, inbound="events_api", events_port=0, signing_secret=SECRET)

    async def main():
        gate, holding = gate_emit(adapter)
        intake = asyncio.get_running_loop().create_task(adapter.intake.run_forever())
        url = await until(adapter.served_url, what="the server")
        body = json.dumps(callback(message("forged"), "EvFORGED")).encode()
        async with aiohttp.ClientSession() as http:
            for headers in (slack.signature_headers(body, secret="wrong-secret"),
                            slack.signature_headers(body, timestamp=time.time() - 301), {}):
                async with http.post(url, data=body, headers=headers) as response:
                    assert response.status == 401
        assert not holding.is_set(), "a refused request never reaches the inbox"
        verified = await asyncio.get_running_loop().run_in_executor(None, lambda: slack.set_request_url(url))
        assert verified["verified"], verified
        injected = slack.inject_message("pushed", "D0USER0001")
        await asyncio.wait_for(holding.wait(), 10)
        assert slack.events()[0]["status"] == "pending", "not stored yet: no answer yet"
        gate.set()
        await until(lambda: slack.events()[0]["status"] == "acked", what="the event acked")
        rows = await adapter.store.inbox.rows_in_state(session_key(adapter.normalise(
            slack.events()[0]["payload"]).source))
        await stop_intake(adapter, intake)
        return injected, rows

    injected, rows = asyncio.run(main())
    assert [r.payload["text"] for r in rows] == ["pushed"]
    assert adapter.intake.malformed == 3 and sum("invalid signature" in line or "refused" in line
                                          for line in posts.lines()) == 3


def test_events_api_retries_after_a_slow_first_answer_make_one_row(slack, tmp_path):
    # Slack gives up waiting after 3 s (0.3 s here) and retries; the first answer, slowed, comes after both retries.
    slack.configure(retry_delays=[0.0, 0.0])
    adapter, posts = make_adapter(slack, tmp_path, inbound="events_api", events_port=0, signing_secret=SECRET)

    async def main():
        gate, holding = gate_emit(adapter)
        intake = asyncio.get_running_loop().create_task(adapter.intake.run_forever())
        url = await until(adapter.served_url, what="the server")
        await asyncio.get_running_loop().run_in_executor(None, lambda: slack.set_request_url(url))
        slack.inject_message("once, please", "D0USER0001")
        await until(lambda: adapter._server.retries_seen == 2, what="retries 1 and 2")
        gate.set()
        await until(lambda: len(slack.events()[0]["attempts"]) == 3 and
                    slack.events()[0]["attempts"][-1].get("answered_at"), what="the last attempt to end")
        rows = await adapter.store.inbox.rows_in_state(session_key(adapter.normalise(
            slack.events()[0]["payload"]).source))
        await stop_intake(adapter, intake)
        return rows

    rows = asyncio.run(main())
    event = slack.events()[0]
    assert [a["retry_attempt"] for a in event["attempts"]] == [0, 1, 2]
    assert [r.payload["text"] for r in rows] == ["once, please"]


# ------------------------------------------------------------------------------------------------ outbound

def perform(adapter: SlackAdapter, *ops: PlatformOp) -> list:
    async def main():
        results = []
        try:
            for op in ops:
                results.append(await adapter._perform(op))
            return results
        finally:
            await adapter.close()
    return asyncio.run(main())


def test_sends_go_escaped_into_their_thread_and_edits_and_deletes_follow(slack, tmp_path):
    adapter, _ = make_adapter(slack, tmp_path, pacing={"per_chat_ops_per_s": 50.0, "per_chat_burst": 50})
    parent = slack.inject_message(f"<@{BOT}> question", "C0GENERAL1")
    sent, threaded = perform(adapter, PlatformOp("1", "send", "C0GENERAL1", "a < b && **c**"),
                             PlatformOp("2", "send", "C0GENERAL1", "in the thread", thread_id=parent["ts"],
                                        chat_type="thread"))
    edited, deleted = perform(adapter, PlatformOp("3", "edit", "C0GENERAL1", "a > b", message_id=sent.message_id),
                              PlatformOp("4", "delete", "C0GENERAL1", message_id=threaded.message_id))
    [gone] = perform(adapter, PlatformOp("5", "edit", "C0GENERAL1", "too late", message_id=threaded.message_id))
    assert sent.ok and threaded.ok and edited.ok and deleted.ok
    first, second = slack.messages("C0GENERAL1")
    assert first["history"][0]["text"] == "a &lt; b &amp;&amp; *c*" and first["markup_problems"] == []
    assert first["displayed"] == "a > b" and first["thread_ts"] is None
    assert second["thread_ts"] == parent["ts"] and second["deleted"]
    assert not gone.ok and gone.error_kind == "not_found"


def test_a_429_is_waited_out_for_its_retry_after_and_a_lost_answer_is_ambiguous(slack, tmp_path):
    adapter, _ = make_adapter(slack, tmp_path)
    slack.add_channel("D0USER0001", user="U0USER0001")
    slack.set_faults(next=["flood"], flood_retry_after=1)
    [flooded] = perform(adapter, PlatformOp("1", "send", "D0USER0001", "after the 429"))
    ops = slack.ops("D0USER0001", "chat.postMessage")
    assert flooded.ok and [o["status"] for o in ops] == [429, 200]
    assert ops[1]["at"] - ops[0]["at"] >= 1.0 - 0.06 and slack.stats()["retry_after_violations"] == 0
    slack.set_faults(next=["internal_error"])
    [lost] = perform(adapter, PlatformOp("2", "send", "D0USER0001", "did it land?"))
    assert not lost.ok and lost.error_kind == "ambiguous", "no idempotency key: never repeated blind"
    [refused] = perform(adapter, PlatformOp("3", "send", "C0NOTMEMBR", "hi"))
    assert not refused.ok and refused.error_kind == "permanent" and "channel_not_found" in refused.error


def test_doctor_asks_slack_whether_the_bot_token_works(slack):
    from daemon.doctor_probes import probe_slack
    table = {"type": "slack", "app_token": DEFAULT_APP_TOKEN, "base_url": slack.api_url}
    ok = asyncio.run(probe_slack("sl", registry.validate_adapter("sl", dict(table, bot_token=DEFAULT_BOT_TOKEN))))
    assert ok.status == "ok" and "gateway in Fake Workspace" in ok.detail
    bad = asyncio.run(probe_slack("sl", registry.validate_adapter("sl", dict(table, bot_token="xoxb-revoked-1"))))
    assert bad.status == "fail" and "invalid_auth" in bad.detail and "xoxb-revoked-1" not in bad.detail


def test_buttons_go_over_socket_mode_only(slack, tmp_path):
    """With the Events API Slack posts presses to an Interactivity URL the gateway does not serve: a question sent
    there carries no buttons (its words say how to answer), where Socket Mode's carries one per model."""
    listing = PlatformOp(op_id="o1", action="send", chat_id="D0USER0001",
                         text="Models:\n- test-model (current)\n- large-model\nSend /model NAME to switch.")
    socket_mode, _ = make_adapter(slack, tmp_path)
    assert asyncio.run(socket_mode._buttons(listing)) == (("large-model", "md:large-model"),)
    events_api, _ = make_adapter(slack, tmp_path, inbound="events_api", events_port=0, signing_secret=SECRET)
    assert asyncio.run(events_api._buttons(listing)) == ()
