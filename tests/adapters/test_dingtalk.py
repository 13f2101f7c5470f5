"""The DingTalk adapter: its pure parts (robot messages to MessageEvents, the group @mention taken off, what is
skipped, error classes), its client against the fake open platform (the access token cached and made again before
it ends or when refused), the doctor's probe, and what the platform does that others do not, in the real daemon
against the fake (tests/fakes/dingtalk): a Stream connection dropped or told to disconnect re-opened with a fresh
ticket and nothing taken twice, each message answered once and only after its row is committed; a session webhook
that refuses, or is too near its expiry, replaced by the robot API; a group message answered through its group; a
frame no app could answer logged and nothing lost. The conformance suite runs it too
(tests/adapters/harnesses/dingtalk.py).
"""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from hypothesis import given, strategies as st

from actors.adapters.dingtalk.client import DingTalkAPI, classify
from actors.adapters.dingtalk.inbound import event_from_callback, skip_reason, strip_mention
from actors.adapters.dingtalk.signing import refusal, sign
from actors.adapters.errors import FloodError, PermanentError, RetryableError
from actors.adapters.payload_fields import MalformedPayload
from actors.messages import Source
from tests.actor_system import wait_for
from tests.adapters.harnesses.dingtalk import DingTalkHarness
from tests.adapters.test_conformance import session_rows
from tests.fakes.dingtalk import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, FakeDingTalk
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def fake():
    with FakeDingTalk() as server:
        yield server


# --------------------------------------------------------------------------------------------- pure parts

def test_one_to_one_and_group_messages_become_events_with_the_mention_taken_off(fake):
    direct = event_from_callback(fake.message_data("alice", "hello"), "dt", "default")
    assert (direct.source.chat_id, direct.source.chat_type, direct.source.user_id, direct.text) == (
        fake.staff("alice"), "dm", fake.staff("alice"), "hello")
    group = event_from_callback(fake.message_data("bob", "what now?", group="team"), "dt", "default", "Gateway")
    assert (group.source.chat_id, group.source.chat_type, group.text, group.addressed) == (
        fake.conversation("team", True), "group", "what now?", True)
    assert strip_mention("  @Gateway  hi @Gateway", "Gateway") == "hi @Gateway"
    assert strip_mention("@alice hi", "Gateway") == "@alice hi"
    audio = dict(fake.message_data("carol", ""), msgtype="audio", content={"recognition": "spoken words"})
    assert event_from_callback(audio, "dt", "default").text == "spoken words"


def test_pictures_and_files_become_attachments_fetched_by_their_download_codes(fake):
    picture = event_from_callback(fake.message_data("a", {"downloadCode": "dc1"}, msgtype="picture"), "dt", "d")
    assert [(a.kind, a.ref) for a in picture.attachments] == [("photo", "dc1")] and picture.text == ""
    document = event_from_callback(fake.message_data("a", {"downloadCode": "dc2", "fileName": "a.pdf"},
                                                     msgtype="file"), "dt", "d")
    assert [(a.kind, a.ref, a.name) for a in document.attachments] == [("document", "dc2", "a.pdf")]
    rich = event_from_callback(fake.message_data("a", {"richText": [
        {"text": "look: "}, {"type": "picture", "downloadCode": "dc3"}, {"text": "this"}]}, msgtype="richText"),
        "dt", "d")
    assert rich.text == "look: this" and [a.ref for a in rich.attachments] == ["dc3"]
    with pytest.raises(MalformedPayload, match="downloadCode"):
        event_from_callback(fake.message_data("a", {"downloadCode": 7}, msgtype="picture"), "dt", "d")


def test_videos_and_silent_audio_are_skipped_with_their_reason(fake):
    assert skip_reason(fake.message_data("a", "x")) is None
    assert "video" in skip_reason(dict(fake.message_data("a", "x"), msgtype="video"))
    assert "recognition" in skip_reason(dict(fake.message_data("a", "x"), msgtype="audio", content={}))


@pytest.mark.parametrize("change, reason", [
    ({"msgId": None}, "msgId"), ({"conversationType": "3"}, "conversationType"),
    ({"text": {"content": 42}}, "text.content must be a string"), ({"senderStaffId": "", "senderId": None},
                                                                    "senderStaffId or senderId")])
def test_a_message_the_gateway_cannot_take_is_malformed(fake, change, reason):
    with pytest.raises(MalformedPayload, match=reason):
        event_from_callback(dict(fake.message_data("m", "x"), **change), "dt", "default")


@given(st.dictionaries(st.sampled_from(["msgId", "conversationType", "conversationId", "senderStaffId", "senderId",
                                        "msgtype", "text", "content", "createAt", "senderNick"]),
                       st.one_of(st.none(), st.integers(), st.text(max_size=30), st.booleans(),
                                 st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3))))
def test_any_message_is_an_event_or_malformed_never_a_crash(fields):
    try:
        event_from_callback(fields, "dt", "default", "Gateway")
    except MalformedPayload:
        pass
    skip_reason(fields)


def test_platform_refusals_become_the_error_classes_the_base_acts_on():
    assert isinstance(classify("batch_send", 403, {"code": "Forbidden.AccessDenied.QpsLimitForApi"}), FloodError)
    assert isinstance(classify("batch_send", 429, None), FloodError)
    lost = classify("group_send", 502, None)
    assert isinstance(lost, RetryableError) and lost.maybe_done
    assert not classify("token", 503, None).maybe_done
    assert isinstance(classify("batch_send", 400, {"code": "param.invalid", "message": "x"}), PermanentError)


def test_a_callback_sign_is_the_apps_within_the_hour_or_refused():
    now = 1_700_000_000.0
    stamp = str(int(now * 1000))
    good = sign("the-secret", stamp)
    assert refusal("the-secret", stamp, good, now) is None
    assert refusal("the-secret", stamp, good, now + 3599) is None
    assert "over 3600" in refusal("the-secret", stamp, good, now + 3601)
    assert "does not match" in refusal("the-secret", stamp, sign("another", stamp), now)
    assert "does not match" in refusal("the-secret", str(int(stamp) + 1), good, now)
    assert "no timestamp" in refusal("the-secret", None, good, now)
    assert "no number" in refusal("the-secret", "soon", good, now)
    assert "does not match" in refusal("the-secret", stamp, "\udcff" + good, now)


# ----------------------------------------------------------------------------------- client against the fake

def test_the_access_token_is_made_once_and_again_only_when_it_ends_or_is_refused(fake):
    now = [1000.0]
    user = fake.staff("token-user")
    before = fake.stats()["tokens_issued"]

    async def scenario():
        async with DingTalkAPI(fake.base_url, DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET,
                               clock=lambda: now[0]) as api:
            for i in range(3):
                await api.send_to_user(user, f"n{i}")
            made = [api.tokens_made]
            now[0] += 7200 - 300 + 1     # within five minutes of its end: made again before the platform refuses
            await api.send_to_user(user, "near the end")
            made.append(api.tokens_made)
            fake.expire_tokens()         # the platform calls it invalid early: made again once, the send repeated
            await api.send_to_user(user, "after")
            made.append(api.tokens_made)
            return made
    assert asyncio.run(scenario()) == [1, 2, 3]
    assert fake.stats()["tokens_issued"] - before == 3
    assert [m["text"] for m in fake.messages(user)] == ["n0", "n1", "n2", "near the end", "after"]


def test_a_wrong_secret_is_refused_permanently_and_never_shown(fake):
    async def scenario():
        async with DingTalkAPI(fake.base_url, DEFAULT_CLIENT_ID, "not-the-secret") as api:
            await api.open_connection()
    with pytest.raises(PermanentError) as refused:
        asyncio.run(scenario())
    assert "not-the-secret" not in str(refused.value)


def test_the_doctor_makes_a_token_and_a_stream_ticket_and_plans_an_http_robots_port(fake):
    from actors.adapters import registry
    from daemon.doctor import planned_ports
    from daemon.doctor_probes import probe_dingtalk
    table = registry.validate_adapter("dt", {"type": "dingtalk", "client_id": DEFAULT_CLIENT_ID,
                                             "client_secret": DEFAULT_CLIENT_SECRET, "base_url": fake.base_url})
    good = asyncio.run(probe_dingtalk("dt", table))
    assert good.status == "ok" and "ticket" in good.detail
    wrong = asyncio.run(probe_dingtalk("dt", dict(table, client_secret="not-the-secret")))
    assert wrong.status == "fail" and "refused" in wrong.detail and "not-the-secret" not in wrong.detail
    away = asyncio.run(probe_dingtalk("dt", dict(table, base_url="http://127.0.0.1:9")))
    assert away.status == "fail" and "cannot reach" in away.detail and DEFAULT_CLIENT_SECRET not in away.detail
    config = {"gateway": {"bind_host": "127.0.0.1", "admin_port": 1}}
    http = dict(table, inbound="http", callback_port=8125)
    assert planned_ports(config, {"dt": table, "dh": http}) == [("admin", "127.0.0.1", 1),
                                                               ("dh callbacks", "127.0.0.1", 8125)]


# ---------------------------------------------------------------------------------------------- in the daemon

@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("dingtalk")
    harness = DingTalkHarness(workdir)
    harness.start()
    # The same daemon runs a second robot of the app in HTTP mode (its own table): no second daemon for it.
    http_table = harness.adapter_toml().replace(f"[adapters.{harness.adapter_name}]", f"[adapters.{HTTP_NAME}]")
    gateway = Gateway(workdir, extra_toml=harness.adapter_toml(extra='bot_name = "Gateway"\n') + "\n" + http_table +
                      'inbound = "http"\ncallback_port = 0\n', watchdog_interval=30.0)
    try:
        gateway.start()
        gateway.wait_ready()
        yield harness, gateway
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        harness.stop()


HTTP_NAME = "dingtalk_http"


def name(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:6]}"


def replies(server: FakeDingTalk, chat_id: str, count: int = 1) -> list:
    try:
        return wait_for(lambda: len(m := server.messages(chat_id)) >= count and m, 60, 0.1,
                        f"{count} answer(s) in {chat_id}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the chat shows {server.messages(chat_id)}, the fake's stats: "
                             f"{server.stats()}") from None


def rows_now(gateway: Gateway, source) -> list:
    """The session's rows as they are now: polled only while the database is busy (None), never for a row to
    come, so a row committed after its message was answered is not waited for."""
    return wait_for(lambda: (rows := session_rows(gateway, source)) is not None and [rows], 10, 0.05,
                    "the database to be readable")[0]


@pytest.mark.parametrize("how", ["disconnect", "drop"])
def test_a_dropped_stream_reopens_with_a_fresh_ticket_and_takes_nothing_twice(rig, how):
    harness, gateway = rig
    server = harness.server
    first = harness.inject(name("before"), "before the drop")
    wait_for(lambda: harness.acknowledged(first), 60, 0.05, "the first message answered")
    opened = len(server.connections())
    answers_before = server.stats()["duplicate_answers"]
    server.run(server.disconnect_sockets(close_after=0.5) if how == "disconnect" else server.drop_sockets())
    chat = name(how)
    during = harness.inject(chat, "sent across the drop")
    again = harness.replay(first)   # the platform redelivers the first message too: answered, nothing stored
    wait_for(lambda: harness.acknowledged(during), 60, 0.05,
             f"the message answered on a new connection; connections: {server.connections()}")
    # Answered only after its commit: the row is there the moment the answer is seen.
    assert len(rows_now(gateway, harness.source(chat))) == 1
    wait_for(lambda: harness.acknowledged(again), 60, 0.05, "the redelivery answered")
    connections = server.connections()
    assert len(connections) > opened and connections[-1]["closed_at"] is None
    tickets = [c["ticket"] for c in connections]
    assert len(set(tickets)) == len(tickets), "every connection opened with a fresh ticket"
    first_chat = server.callback(first)["data"]["senderStaffId"]
    assert len(rows_now(gateway, harness.source_of(first_chat))) == 1, "the redelivery stored nothing"
    assert server.stats()["duplicate_answers"] == answers_before, "no callback answered twice"
    assert len(rows_now(gateway, harness.source(chat))) == 1


def test_a_session_webhook_that_refuses_or_is_near_its_end_is_replaced_by_the_robot_api(rig):
    harness, gateway = rig
    server = harness.server
    live, refused, ending = name("live"), name("refused"), name("ending")
    refusals = server.stats()["session_refusals"]
    server.queue(server.message_data(live, "hello"))
    server.queue(server.message_data(refused, "hello", session_dead=True))
    server.queue(server.message_data(ending, "hello", session_ttl=30))    # under webhook_margin_s (60)
    assert [m["via"] for m in replies(server, server.staff(live))] == ["session"]
    assert [m["via"] for m in replies(server, server.staff(refused))] == ["batch_send"]
    assert [m["via"] for m in replies(server, server.staff(ending))] == ["batch_send"]
    assert server.stats()["session_refusals"] - refusals == 1, "the webhook near its end was never called"
    gateway.wait_log("refused a send (session webhook is expired or unknown (errcode 300001))")


def test_a_group_message_is_answered_in_its_group_without_the_mention(rig):
    harness, gateway = rig
    server, group, member = harness.server, name("group"), name("member")
    cid = server.conversation(group, True)
    server.queue(server.message_data(member, "what is new?", group=group))
    replies(server, cid, 1)
    # The chat's latest message names the webhook its answers take: this one's refuses, so the group send API.
    server.queue(server.message_data(member, "and now?", group=group, session_dead=True))
    assert [m["via"] for m in replies(server, cid, 2)] == ["session", "group_send"]
    rows = wait_for(lambda: len(r := session_rows(gateway, harness.source_of(cid, "group")) or []) == 2 and r, 30,
                    0.05, "the group's rows")
    assert sorted(r.payload["text"] for r in rows) == ["and now?", "what is new?"]


def test_a_frame_no_app_could_answer_is_logged_and_nothing_is_lost(rig):
    harness, gateway = rig
    server = harness.server
    pid = gateway.node(harness.adapter_name)["pid"]
    server.run(server.send_raw("this is no JSON {"))
    server.run(server.send_raw('{"type": "CALLBACK", "headers": {"topic": "/v1.0/im/bot/messages/get"}}'))
    chat = name("after-junk")
    handle = harness.inject(chat, "still listening")
    wait_for(lambda: harness.acknowledged(handle), 60, 0.05, "the next message answered")
    line = gateway.wait_log("a stream frame that cannot be answered was skipped")
    assert "WARNING" in line and "this is no JSON" in line
    assert len(rows_now(gateway, harness.source(chat))) == 1
    assert gateway.node(harness.adapter_name)["pid"] == pid


def test_an_http_callback_with_a_bad_or_stale_sign_is_refused_and_a_signed_one_stored_once(rig):
    harness, gateway = rig
    server, chat = harness.server, name("http")
    view = DingTalkHarness(harness.workdir)
    view.adapter_name = HTTP_NAME
    url = wait_for(view.served_url, 60, 0.2, "the HTTP-mode adapter's callback URL in status")
    staff = server.staff(chat)
    source = Source(platform=HTTP_NAME, chat_id=staff, chat_type="dm", user_id=staff)
    data = server.message_data(chat, "signed hello")
    two_hours_ago = int((time.time() - 7200) * 1000)
    assert server.post_callback(url, data, secret="not-the-secret") == 401
    assert server.post_callback(url, data, timestamp=two_hours_ago) == 401
    assert server.post_callback(url, data, sign="") == 401
    gateway.wait_log("callback refused: the sign does not match")
    gateway.wait_log("callback refused: signed 7200 s from now")
    assert not rows_now(gateway, source), "nothing stored"
    assert server.post_callback(url, data) == 200
    assert [r.payload["text"] for r in rows_now(gateway, source)] == ["signed hello"], "stored before the 200"
    assert server.post_callback(url, data) == 200      # the platform's retry: answered, no second row
    assert len(rows_now(gateway, source)) == 1
    assert [m["via"] for m in replies(server, staff)] == ["session"]
