"""The fake Slack: Socket Mode (hello, envelopes, acknowledgements, redelivery, disconnects, pings) and the Web API
(chat methods and their errors, threads, limits, rate limits, faults), spoken to by a minimal client written here."""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import time
from typing import Callable, Optional

import aiohttp
import pytest
from aiohttp import web

from tests.fakes.harness import ControlClient, StandaloneFake
from tests.fakes.slack import DEFAULT_APP_TOKEN, DEFAULT_BOT_TOKEN, FakeSlack
from tests.fakes.slack.channels import next_ts

pytestmark = pytest.mark.timeout(30)

BOT = "U0FAKEBOT1"
TS = re.compile(r"^\d{10}\.\d{6}$")


@pytest.fixture
def slack():
    # Windows shrunk 10x (the ack deadline is 0.3 s), retries at once, bursts generous, no server pings:
    # tests that don't study a limit never meet it.
    with FakeSlack(time_scale=0.1, retry_delays=[0.0, 0.0, 0.0], post_burst=50, ping_interval=0) as fake:
        yield fake


def run(scenario):
    async def main():
        async with aiohttp.ClientSession() as session:
            return await scenario(session)
    return asyncio.run(main())


async def call(session, fake, method, token=DEFAULT_BOT_TOKEN, *, json_body=None, form=None, query=None,
               http_method="POST"):
    """One Web API call; returns (status, headers, body)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with session.request(http_method, f"{fake.base_url}/api/{method}", headers=headers, json=json_body, data=form,
                               params=query) as resp:
        return resp.status, resp.headers, await resp.json()


class SocketClient:
    """The least a Socket Mode client does: apps.connections.open, connect, read frames, acknowledge."""

    def __init__(self, session, fake):
        self.session, self.fake, self.ws, self.seen = session, fake, None, []

    async def connect(self, suffix: str = "") -> dict:
        status, _, body = await call(self.session, self.fake, "apps.connections.open", DEFAULT_APP_TOKEN)
        assert status == 200 and body["ok"], body
        self.ws = await self.session.ws_connect(body["url"] + suffix, autoping=False)
        return await self.next(lambda m: True)

    async def next(self, predicate: Callable[[dict], bool], timeout: float = 5.0) -> dict:
        """The next JSON message matching ``predicate`` (others are kept in ``seen``); fails with what it saw."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no matching message within {timeout} s; saw {self.seen}")
            try:
                frame = await self.ws.receive(timeout=remaining)
            except asyncio.TimeoutError:
                continue
            if frame.type != aiohttp.WSMsgType.TEXT:
                if frame.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING):
                    raise AssertionError(f"socket closed while waiting; saw {self.seen}")
                continue
            message = json.loads(frame.data)
            self.seen.append(message)
            if predicate(message):
                return message

    async def envelope(self, event_type: str = "message", retry_attempt: Optional[int] = None,
                       timeout: float = 5.0) -> dict:
        return await self.next(lambda m: m.get("type") == "events_api"
                               and m["payload"]["event"]["type"] == event_type
                               and (retry_attempt is None or m["retry_attempt"] == retry_attempt), timeout)

    async def ack(self, envelope: dict) -> None:
        await self.ws.send_str(json.dumps({"envelope_id": envelope["envelope_id"]}))

    async def closed(self, timeout: float = 5.0) -> int:
        """Wait for the server to close the socket; the close code."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            frame = await self.ws.receive(timeout=max(0.01, deadline - time.monotonic()))
            if frame.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING):
                return self.ws.close_code
            if frame.type == aiohttp.WSMsgType.TEXT:
                self.seen.append(json.loads(frame.data))
        raise AssertionError(f"socket still open after {timeout} s")


async def in_thread(fn, *args, **kwargs):
    """Run a blocking in-process call of the fake (it waits on the server loop) off this event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args, **kwargs))


# ------------------------------------------------------------------------------------------------ Socket Mode

def test_connections_open_hello_then_an_injected_message_arrives_as_an_envelope(slack):
    slack.configure(ack_timeout=20.0)  # 2 s: the ack must be in time even on a loaded machine

    async def scenario(session):
        client = SocketClient(session, slack)
        hello = await client.connect()
        injected = slack.inject_message("hello there", user="U0ALICE001", user_name="alice")
        envelope = await client.envelope()
        await client.ack(envelope)
        return hello, injected, envelope

    hello, injected, envelope = run(scenario)
    assert hello == {"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0FAKEAPP1"},
                     "debug_info": {"host": "applink-fake-1", "started": hello["debug_info"]["started"],
                                    "build_number": 1, "approximate_connection_time": 3600}}
    assert set(envelope) == {"envelope_id", "payload", "type", "accepts_response_payload", "retry_attempt",
                             "retry_reason"}
    assert (envelope["type"], envelope["accepts_response_payload"], envelope["retry_attempt"],
            envelope["retry_reason"]) == ("events_api", False, 0, "")
    payload = envelope["payload"]
    assert payload["type"] == "event_callback" and payload["event_id"] == injected["event_ids"][0]
    assert (payload["team_id"], payload["api_app_id"]) == ("T0FAKETEAM", "A0FAKEAPP1")
    assert payload["authorizations"][0]["user_id"] == BOT and isinstance(payload["event_time"], int)
    event = payload["event"]
    assert (event["type"], event["channel"], event["channel_type"], event["user"], event["text"]) == (
        "message", "D0ALICE001", "im", "U0ALICE001", "hello there")
    assert TS.match(event["ts"]) and event["event_ts"] == event["ts"] == injected["ts"]
    assert "bot_id" not in event and event["client_msg_id"]
    assert slack.wait_for(lambda: slack.events(status="acked"))[0]["acked"]["late"] is False


def test_connections_open_wants_the_app_token_and_a_ticket_opens_one_socket(slack):
    async def scenario(session):
        refusals = [(await call(session, slack, "apps.connections.open", token))[2]["error"]
                    for token in (None, "xapp-1-wrong", DEFAULT_BOT_TOKEN)]
        get = await call(session, slack, "apps.connections.open", DEFAULT_APP_TOKEN, http_method="GET")
        _, _, body = await call(session, slack, "apps.connections.open", DEFAULT_APP_TOKEN)
        first = await session.ws_connect(body["url"])
        with pytest.raises(aiohttp.WSServerHandshakeError) as again:
            await session.ws_connect(body["url"])
        await first.close()
        return refusals, get, body["url"], again.value.status

    refusals, get, url, reuse_status = run(scenario)
    assert refusals == ["not_authed", "invalid_auth", "not_allowed_token_type"]
    assert (get[0], get[2]) == (200, {"ok": False, "error": "insecure_request"})
    assert re.match(rf"^ws://127\.0\.0\.1:{slack.port}/link/\?ticket=[0-9a-f-]{{36}}&app_id=A0FAKEAPP1$", url)
    assert reuse_status == 401 and slack.stats()["connections_refused"] == 1


def test_an_unacknowledged_envelope_is_redelivered_with_retry_attempt_and_reason_then_dropped(slack):
    async def scenario(session):
        client = SocketClient(session, slack)
        await client.connect()
        slack.inject_message("nobody answers")
        return [await client.envelope(retry_attempt=n) for n in range(4)]

    deliveries = run(scenario)
    assert [(d["retry_attempt"], d["retry_reason"]) for d in deliveries] == [
        (0, ""), (1, "timeout"), (2, "timeout"), (3, "timeout")]
    assert len({d["envelope_id"] for d in deliveries}) == 4  # each delivery is a new envelope
    assert len({d["payload"]["event_id"] for d in deliveries}) == 1  # of the same event
    (event,) = slack.wait_for(lambda: slack.events(status="failed"))
    assert [a["retry_attempt"] for a in event["attempts"]] == [0, 1, 2, 3]
    assert slack.stats()["events_failed"] == 1 and slack.stats()["retries_sent"] == 3


def test_an_acknowledged_envelope_is_not_redelivered_and_a_late_ack_still_settles(slack):
    slack.configure(ack_timeout=20.0)  # 2 s: the first ack must be in time even on a loaded machine

    async def scenario(session):
        client = SocketClient(session, slack)
        await client.connect()
        acked = slack.inject_message("answered")["event_ids"][0]
        first = await client.envelope()
        await client.ack(first)
        await in_thread(slack.wait_for, lambda: slack.events(status="acked"))
        # a later event left unacknowledged: its retry comes after the first event's deadline has passed
        ignored = slack.inject_message("ignored once")["event_ids"][0]
        stale = await client.envelope(retry_attempt=0)
        await client.envelope(retry_attempt=1)
        await client.ack(stale)  # the first envelope, acknowledged after its deadline: still settles the event
        await in_thread(slack.wait_for, lambda: len(slack.events(status="acked")) == 2)
        return acked, ignored, client.seen

    acked, ignored, seen = run(scenario)
    deliveries_of_acked = [m for m in seen if m.get("type") == "events_api" and m["payload"]["event_id"] == acked]
    assert [m["retry_attempt"] for m in deliveries_of_acked] == [0]
    settled = next(e for e in slack.events() if e["event_id"] == ignored)
    assert settled["acked"]["late"] is True and settled["acked"]["envelope_id"] == settled["attempts"][0]["envelope_id"]
    stats = slack.stats()
    assert (stats["envelopes_acked"], stats["late_acks"], stats["retries_sent"]) == (2, 1, 1)


def test_events_wait_while_no_socket_is_connected_or_are_spent_as_on_slack(slack):
    queued = slack.inject_message("while away")["event_ids"][0]

    async def connect_and_receive(session):
        client = SocketClient(session, slack)
        await client.connect()
        envelope = await client.envelope()
        await client.ack(envelope)
        return envelope

    envelope = run(connect_and_receive)
    assert (envelope["payload"]["event_id"], envelope["retry_attempt"]) == (queued, 0)

    slack.wait_for(lambda: slack.open_connections() == [])
    slack.configure(offline_delivery="spend")
    spent = slack.inject_message("while away again")["event_ids"][0]
    slack.wait_for(lambda: slack.stats()["deliveries_missed"] >= 2)  # the first delivery and a retry, missed
    envelope = run(connect_and_receive)
    assert envelope["payload"]["event_id"] == spent
    assert envelope["retry_attempt"] >= 2 and envelope["retry_reason"] == "timeout"
    missed = [e for e in slack.envelopes() if e["event_id"] == spent and e["connection"] is None]
    assert [m["retry_attempt"] for m in missed] == list(range(envelope["retry_attempt"]))


def test_disconnect_warning_stops_envelopes_to_that_socket_and_closes_it_later(slack):
    async def scenario(session):
        old, new = SocketClient(session, slack), SocketClient(session, slack)
        await old.connect()
        (old_id,) = slack.open_connections()
        hello = await new.connect()
        assert await in_thread(slack.disconnect, "warning", connection=old_id, close_after=1.0) == [old_id]
        warning = await old.next(lambda m: m.get("type") == "disconnect")
        slack.inject_message("after the warning")
        envelope = await new.envelope()
        code = await old.closed()
        return hello, warning, envelope, old.seen, code

    hello, warning, envelope, old_seen, code = run(scenario)
    assert hello["num_connections"] == 2
    assert warning == {"type": "disconnect", "reason": "warning", "debug_info": {"host": "applink-fake-1"}}
    assert envelope["payload"]["event"]["text"] == "after the warning"
    assert not [m for m in old_seen if m.get("type") == "events_api"] and code == 1000
    assert slack.stats()["disconnects_sent"] == 1


def test_disconnect_reasons_from_the_control_api_and_too_many_websockets():
    with FakeSlack(time_scale=0.1, max_connections=2, ping_interval=0) as fake:
        control = ControlClient(fake.base_url)

        async def scenario(session):
            clients = [SocketClient(session, fake) for _ in range(3)]
            await clients[0].connect()
            await clients[1].connect()
            refused = await clients[2].connect()  # the third of two allowed: told and closed
            await clients[2].closed()
            first, second = fake.open_connections()
            reasons = []
            for reason, client, conn_id in (("link_disabled", clients[0], first),
                                            ("refresh_requested", clients[1], second)):
                ids = (await in_thread(control.post, "/_control/disconnect",
                                       {"reason": reason, "connection": conn_id, "close_after": 0.1}))["connections"]
                reasons.append((ids, (await client.next(lambda m: m.get("type") == "disconnect"))["reason"]))
                await client.closed()
            return refused, reasons, first, second

        refused, reasons, first_id, second_id = run(scenario)
        assert refused["type"] == "disconnect" and refused["reason"] == "too_many_websockets"
        assert reasons == [([first_id], "link_disabled"), ([second_id], "refresh_requested")]
        with pytest.raises(Exception, match="400"):
            control.post("/_control/disconnect", {"reason": "bored"})
        fake.wait_for(lambda: fake.open_connections() == [])


def test_pings_are_answered_the_fake_pings_too_and_a_silenced_socket_goes_quiet():
    with FakeSlack(time_scale=0.1, ping_interval=1.0) as fake:  # a server ping every 0.1 s
        async def scenario(session):
            client = SocketClient(session, fake)
            await client.connect()
            await client.ws.ping(b"sdk-ping-pong:1")
            kinds, pong, deadline = set(), None, time.monotonic() + 5
            while pong is None or aiohttp.WSMsgType.PING not in kinds:
                assert time.monotonic() < deadline, f"pong {pong!r} and a ping expected within 5 s; saw {kinds}"
                frame = await client.ws.receive(timeout=5)
                kinds.add(frame.type)
                if frame.type == aiohttp.WSMsgType.PONG:
                    pong = frame.data
            await in_thread(fake.silence)
            await client.ws.ping(b"anyone?")
            fake.inject_message("into the void")
            heard, deadline = [], time.monotonic() + 1.0  # a bounded watch for what must not come
            while time.monotonic() < deadline:
                try:
                    heard.append((await client.ws.receive(timeout=deadline - time.monotonic())).type)
                except asyncio.TimeoutError:
                    break
            return pong, heard

        pong, heard = run(scenario)
        assert pong == b"sdk-ping-pong:1"
        # a server ping already on its way may still land; no pong and no envelope do
        assert [kind for kind in heard if kind != aiohttp.WSMsgType.PING] == []
        assert fake.stats()["pings_received"] == 1 and fake.events(status="pending")


# ------------------------------------------------------------------------------------------------ Web API

def post(session, fake, **args):
    return call(session, fake, "chat.postMessage", json_body=args)


def test_post_update_delete_and_their_errors_all_answer_http_200(slack):
    incoming = slack.inject_message("hi", "C0GENERAL1")["ts"]
    slack.add_channel("C0ELSEWHERE", name="elsewhere", member=False)
    slack.add_channel("C0ARCHIVED", name="old", archived=True)

    async def scenario(session):
        sent = await post(session, slack, channel="C0GENERAL1", text="v1")
        ts = sent[2]["ts"]
        updated = await call(session, slack, "chat.update", json_body={"channel": "C0GENERAL1", "ts": ts,
                                                                       "text": "v2"})
        errors = [
            await post(session, slack, channel="C0NOWHERE", text="x"),
            await post(session, slack, channel="C0ELSEWHERE", text="x"),
            await post(session, slack, channel="old", text="x"),  # by name
            await post(session, slack, channel="C0GENERAL1", text=""),
            await post(session, slack, channel="C0GENERAL1", text="x" * 40001),
            await call(session, slack, "chat.update", json_body={"channel": "C0GENERAL1", "ts": "1.000001",
                                                                 "text": "x"}),
            await call(session, slack, "chat.update", json_body={"channel": "C0GENERAL1", "ts": incoming,
                                                                 "text": "not mine"}),
            await call(session, slack, "chat.delete", json_body={"channel": "C0GENERAL1", "ts": incoming}),
        ]
        longest = await post(session, slack, channel="C0GENERAL1", text="y" * 40000)
        deleted = await call(session, slack, "chat.delete", json_body={"channel": "C0GENERAL1", "ts": ts})
        after = [await call(session, slack, "chat.delete", json_body={"channel": "C0GENERAL1", "ts": ts}),
                 await call(session, slack, "chat.update", json_body={"channel": "C0GENERAL1", "ts": ts,
                                                                      "text": "v3"})]
        return sent, updated, errors, longest, deleted, after

    sent, updated, errors, longest, deleted, after = run(scenario)
    status, _, body = sent
    assert status == 200 and body["ok"] and body["channel"] == "C0GENERAL1" and TS.match(body["ts"])
    assert body["message"]["bot_id"] == "B0FAKEBOT1" and body["message"]["user"] == BOT
    assert body["message"]["text"] == "v1" and body["message"]["ts"] == body["ts"]
    assert updated[2]["text"] == "v2" and updated[2]["message"]["edited"]["user"] == BOT
    assert [(s, b) for s, _, b in errors] == [(200, {"ok": False, "error": e}) for e in (
        "channel_not_found", "not_in_channel", "is_archived", "no_text", "msg_too_long", "message_not_found",
        "cant_update_message", "cant_delete_message")]
    assert longest[2]["ok"] and deleted[2] == {"ok": True, "channel": "C0GENERAL1", "ts": body["ts"]}
    assert [b["error"] for _, _, b in after] == ["message_not_found", "message_not_found"]
    first, second = slack.messages("C0GENERAL1")
    assert [h["text"] for h in first["history"]] == ["v1", "v2"] and first["deleted"]
    assert slack.final_texts("C0GENERAL1") == ["y" * 40000]
    assert [(o["method"], o["error"]) for o in slack.ops("C0GENERAL1")][:3] == [
        ("chat.postMessage", None), ("chat.update", None), ("chat.postMessage", "no_text")]


def test_form_query_and_token_parameters_and_the_other_methods(slack):
    slack.inject_message("hi", user="U0BOB00001", user_name="bob")

    async def scenario(session):
        form = await call(session, slack, "chat.postMessage", None,
                          form={"token": DEFAULT_BOT_TOKEN, "channel": "U0BOB00001", "text": "to bob"})
        channel = await call(session, slack, "conversations.info", query={"channel": "D0BOB00001"},
                             http_method="GET")
        user = await call(session, slack, "users.info", query={"user": "U0BOB00001"}, http_method="GET")
        auth = await call(session, slack, "auth.test")
        refusals = [(await call(session, slack, "chat.postMessage", token, json_body={"channel": "D0BOB00001",
                                                                                     "text": "x"}))[2]["error"]
                    for token in ("xoxb-wrong", DEFAULT_APP_TOKEN)]
        unknown = await call(session, slack, "chat.sendPigeon")
        missing = [(await call(session, slack, method, query=q, http_method="GET"))[2]["error"]
                   for method, q in (("users.info", {"user": "U0NOBODY01"}), ("conversations.info", {"channel": "C9"}))]
        return form, channel, user, auth, refusals, unknown, missing

    form, channel, user, auth, refusals, unknown, missing = run(scenario)
    assert form[2]["ok"] and form[2]["channel"] == "D0BOB00001"  # a user id posts into the bot's DM with them
    assert channel[2]["channel"]["is_im"] is True and channel[2]["channel"]["user"] == "U0BOB00001"
    assert user[2]["user"]["name"] == "bob" and user[2]["user"]["is_bot"] is False
    assert {k: auth[2][k] for k in ("user_id", "bot_id", "team_id")} == {
        "user_id": BOT, "bot_id": "B0FAKEBOT1", "team_id": "T0FAKETEAM"}
    assert refusals == ["invalid_auth", "not_allowed_token_type"]
    assert (unknown[0], unknown[2]["error"]) == (200, "unknown_method")
    assert missing == ["user_not_found", "channel_not_found"]
    assert slack.final_texts("D0BOB00001") == ["to bob"]


def test_a_ts_is_never_reused_even_when_the_clock_gives_the_same_or_an_earlier_time():
    later = int(time.time()) + 100
    ahead = f"{later}.999999"  # the last ts handed out, ahead of the clock
    rec = {"last_ts": ahead}
    stamps = [next_ts(rec) for _ in range(3)]
    assert stamps == [f"{later + 1}.{n:06d}" for n in range(3)] and stamps[0] > ahead


def test_thread_replies_and_timestamps_increasing_per_channel(slack):
    parent = slack.inject_message("question", "C0GENERAL1")["ts"]

    async def scenario(session):
        replies = [(await post(session, slack, channel="C0GENERAL1", text=f"part {i}", thread_ts=parent))[2]
                   for i in range(5)]
        via_reply = (await post(session, slack, channel="C0GENERAL1", text="to a reply's ts",
                                thread_ts=replies[0]["ts"]))[2]
        return replies, via_reply

    replies, via_reply = run(scenario)
    stamps = [parent] + [r["ts"] for r in replies]
    assert all(TS.match(t) for t in stamps) and stamps == sorted(stamps) and len(set(stamps)) == 6
    assert {(r["message"]["thread_ts"], r["message"]["parent_user_id"]) for r in replies} == {(parent, "U0USER0001")}
    assert via_reply["message"]["thread_ts"] == parent and slack.stats()["thread_ts_of_reply"] == 1
    question = slack.messages("C0GENERAL1", incoming=True)[0]
    assert question["reply_count"] == 6 and question["thread_ts"] == parent
    user_reply = slack.inject_message("thanks", "C0GENERAL1", thread_ts=replies[1]["ts"])
    assert user_reply["message"]["thread_ts"] == parent and user_reply["message"]["parent_user_id"] == "U0USER0001"


def test_mentions_edits_deletions_and_the_bots_own_messages_as_events(slack):
    in_dm = slack.inject_message(f"hey <@{BOT}>")  # a DM: message only, never app_mention
    in_channel = slack.inject_message(f"hey <@{BOT}> look", "C0GENERAL1")
    slack.inject_edit("C0GENERAL1", in_channel["ts"], "edited")
    slack.inject_delete("C0GENERAL1", in_channel["ts"])

    async def scenario(session):
        ts = (await post(session, slack, channel="C0GENERAL1", text="mine"))[2]["ts"]
        await call(session, slack, "chat.update", json_body={"channel": "C0GENERAL1", "ts": ts, "text": "mine2"})

    run(scenario)
    events = [e["payload"]["event"] for e in slack.events()]
    assert [(e["type"], e.get("subtype"), e["channel"]) for e in events] == [
        ("message", None, "D0USER0001"), ("message", None, "C0GENERAL1"), ("app_mention", None, "C0GENERAL1"),
        ("message", "message_changed", "C0GENERAL1"), ("message", "message_deleted", "C0GENERAL1"),
        ("message", None, "C0GENERAL1"), ("message", "message_changed", "C0GENERAL1")]
    assert len(in_dm["event_ids"]) == 1 and len(in_channel["event_ids"]) == 2
    changed, deleted = events[3], events[4]
    assert changed["message"]["text"] == "edited" and changed["previous_message"]["text"] == f"hey <@{BOT}> look"
    assert changed["hidden"] is True and changed["message"]["edited"]["user"] == "U0USER0001"
    assert deleted["deleted_ts"] == in_channel["ts"]
    assert events[5]["bot_id"] == "B0FAKEBOT1" and events[6]["message"]["bot_id"] == "B0FAKEBOT1"
    assert "bot_id" not in events[1]

    slack.reset()
    slack.configure(subscriptions=["app_mention"], echo_bot_events=False)
    assert slack.inject_message("no mention", "C0GENERAL1")["event_ids"] == []
    assert len(slack.inject_message(f"<@{BOT}> yes", "C0GENERAL1")["event_ids"]) == 1
    assert slack.stats()["events_filtered"] == 2


def test_text_length_blocks_and_mrkdwn_escaping(slack):
    slack.inject_message("hi", "C0GENERAL1")
    section = {"type": "section", "text": {"type": "mrkdwn", "text": "s" * 3001}}

    async def scenario(session):
        refused = [(await post(session, slack, channel="C0GENERAL1", **args))[2]["error"] for args in (
            {"blocks": [section]}, {"blocks": [{"type": "divider"}] * 51}, {"blocks": "[not json"})]
        blocks_only = (await post(session, slack, channel="C0GENERAL1", blocks=json.dumps(
            [{"type": "section", "text": {"type": "mrkdwn", "text": "in a block"}}])))[2]
        escaped = (await post(session, slack, channel="C0GENERAL1", text="a &lt; b &amp; <@U0USER0001>"))[2]
        raw = (await post(session, slack, channel="C0GENERAL1", text="if a < b && c", mrkdwn=False))[2]
        slack.configure(over_limit="truncate")
        truncated = (await post(session, slack, channel="C0GENERAL1", text="z" * 40005))[2]
        return refused, blocks_only, escaped, raw, truncated

    refused, blocks_only, escaped, raw, truncated = run(scenario)
    assert refused == ["invalid_blocks", "invalid_blocks", "invalid_blocks_format"]
    assert blocks_only["ok"] and blocks_only["message"]["blocks"][0]["text"]["text"] == "in a block"
    shown = {m["ts"]: (m["displayed"], m["markup_problems"]) for m in slack.messages("C0GENERAL1")}
    assert shown[blocks_only["ts"]] == ("in a block", [])
    assert shown[escaped["ts"]] == ("a < b & @U0USER0001", [])
    assert shown[raw["ts"]] == ("if a < b && c", ["unescaped &", "unescaped < or >"])
    assert [m["mrkdwn"] for m in slack.messages("C0GENERAL1") if m["ts"] in (raw["ts"], escaped["ts"])] == [True, False]
    assert truncated["ok"] and slack.final_texts("C0GENERAL1")[-1] == "z" * 40000
    assert slack.stats()["truncated"] == 1


def test_rate_limits_per_channel_and_per_tier_with_retry_after_and_violations():
    with FakeSlack(time_scale=0.1, post_burst=2, tier3_per_minute=10, ping_interval=0) as fake:
        fake.inject_message("hi", "C0GENERAL1", name="general")
        fake.inject_message("hi", "C0RANDOM01")

        async def scenario(session):
            posts = [await post(session, fake, channel="C0GENERAL1", text=str(i)) for i in range(3)]
            again = await post(session, fake, channel="general", text="too soon, by another name")
            other = await post(session, fake, channel="C0RANDOM01", text="another channel has its own budget")
            ts = posts[0][2]["ts"]
            updates = [await call(session, fake, "chat.update", json_body={"channel": "C0RANDOM01" if i % 2
                                                                           else "C0GENERAL1", "ts": ts,
                                                                           "text": f"u{i}"}) for i in range(3)]
            return posts, again, other, updates

        posts, again, other, updates = run(scenario)
        assert [s for s, _, _ in posts] == [200, 200, 429]
        status, headers, body = posts[2]
        assert (headers["Retry-After"], body) == ("1", {"ok": False, "error": "ratelimited"})
        assert again[0] == 429 and other[0] == 200
        # chat.update is Tier 3, per method across channels: 10 a minute, 2 at once
        assert [s for s, _, _ in updates] == [200, 200, 429]
        stats = fake.stats()
        assert stats["ratelimited_served"] == 3 and stats["retry_after_violations"] == 1


def test_scripted_faults_on_web_api_methods(slack):
    slack.inject_message("hi", "C0GENERAL1")
    slack.set_faults(next=["error", "internal_error", "drop", "drop_after", "flood"], methods=["chat.postMessage"],
                     flood_retry_after=2)

    async def scenario(session):
        answers = []
        for i in range(5):
            try:
                status, headers, body = await post(session, slack, channel="C0GENERAL1", text=f"try {i}")
                answers.append((status, body.get("error"), headers.get("Retry-After")))
            except aiohttp.ClientError as exc:
                answers.append(type(exc).__name__)
        answers.append((await call(session, slack, "auth.test"))[0])  # not a scripted method
        return answers

    answers = run(scenario)
    assert answers[:2] == [(500, "internal_error", None), (200, "internal_error", None)]
    assert answers[2] == answers[3] == "ServerDisconnectedError"
    assert answers[4:] == [(429, "ratelimited", "2"), 200]
    assert slack.final_texts("C0GENERAL1") == ["try 3"]  # drop_after: it took effect, the answer was lost
    assert [o["status"] for o in slack.ops("C0GENERAL1")] == [500, 200, 599, 200, 429]


def test_control_api_over_http(slack):
    control = ControlClient(slack.base_url)
    made = control.post("/_control/inject", [{"text": "a", "channel": "C0GENERAL1", "name": "general"},
                                             {"text": "b", "user": "U0CAROL001"}])["messages"]
    assert [m["channel"] for m in made] == ["C0GENERAL1", "D0CAROL001"]
    control.post("/_control/inject_edit", {"channel": "C0GENERAL1", "ts": made[0]["ts"], "text": "a2"})
    control.post("/_control/channels", {"channel": "G0PRIVATE1", "name": "secret", "member": False})
    control.post("/_control/config", {"text_limit": 5})
    assert sorted(control.get("/_control/channels")["channels"]) == ["C0GENERAL1", "D0CAROL001", "G0PRIVATE1"]
    timeline = control.get("/_control/channels/C0GENERAL1")
    assert timeline["channel"]["name"] == "general" and timeline["messages"][0]["text"] == "a2"
    assert [e["payload"]["event"].get("subtype") for e in control.get("/_control/events")["events"]] == [
        None, None, "message_changed"]
    assert control.get("/_control/envelopes") == {"envelopes": []}
    assert control.post("/_control/disconnect", {"reason": "warning"}) == {"ok": True, "connections": []}
    assert control.get("/_control/stats")["events_filtered"] == 0
    with pytest.raises(Exception, match="400"):
        control.post("/_control/config", {"over_limit": "shout"})
    control.post("/_control/reset")
    assert control.get("/_control/channels") == {"channels": []}


def test_standalone_process_keeps_messages_and_undelivered_events_across_kill(tmp_path):
    config = json.dumps({"time_scale": 0.1, "ping_interval": 0, "ack_timeout": 30.0})
    with StandaloneFake("tests.fakes.slack", tmp_path / "slack.json", args=("--config", config)) as fake:
        queued = fake.control.post("/_control/inject", {"text": "before the crash"})["messages"][0]
        fake.kill()
        fake.start()
        fake.control.post("/_control/inject", {"text": "after the restart"})

        async def scenario(session):
            client = SocketClient(session, fake)
            await client.connect()
            received = [await client.envelope(), await client.envelope()]
            for envelope in received:
                await client.ack(envelope)
            return received

        received = run(scenario)
        assert [e["payload"]["event"]["text"] for e in received] == ["before the crash", "after the restart"]
        assert received[0]["payload"]["event_id"] == queued["event_ids"][0]
        texts = [m["text"] for m in fake.control.get("/_control/channels/D0USER0001")["messages"]]
        assert texts == ["before the crash", "after the restart"]


# ------------------------------------------------------------------------------------------------ Events API over HTTP

class Receiver:
    """A Request URL in this process: checks Slack's signature itself and answers as ``answers`` says."""

    def __init__(self, secret: str, answers: list):
        self.secret, self.answers, self.requests, self.runner = secret, answers, [], None

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/slack/events", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        return f"http://127.0.0.1:{self.runner.addresses[0][1]}/slack/events"

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        stamp = request.headers["X-Slack-Request-Timestamp"]
        expected = "v0=" + hmac.new(self.secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
        payload = json.loads(body)
        self.requests.append({"payload": payload, "signed": hmac.compare_digest(
            expected, request.headers["X-Slack-Signature"]), "age": time.time() - int(stamp),
            "retry": (request.headers.get("X-Slack-Retry-Num"), request.headers.get("X-Slack-Retry-Reason"))})
        if payload["type"] == "url_verification":
            return web.Response(text=payload["challenge"])
        answer = self.answers.pop(0) if self.answers else 200
        if answer == "slow":
            await asyncio.sleep(2.5)  # an app slower than the deadline: not a synchronisation point
            answer = 200
        headers = {"X-Slack-No-Retry": "1"} if answer == "no-retry" else {}
        return web.Response(status=500 if answer == "no-retry" else answer, headers=headers)


def test_url_verification_then_signed_events_posted_to_the_request_url(slack):
    slack.configure(ack_timeout=20.0)

    async def scenario(session):
        receiver = Receiver(slack.identity["signing_secret"], answers=[200])
        url = await receiver.start()
        try:
            refused = await in_thread(slack.set_request_url, url.replace("/slack/events", "/nowhere"))
            verified = await in_thread(slack.set_request_url, url)
            slack.inject_message("over http")
            await in_thread(slack.wait_for, lambda: slack.events(status="acked"))
        finally:
            await receiver.runner.cleanup()
        return refused, verified, receiver.requests

    refused, verified, requests = run(scenario)
    assert refused["verified"] is False and refused["status"] == 404
    assert verified == {"verified": True, "status": 200, "answer": requests[0]["payload"]["challenge"]}
    challenge, event = requests
    assert challenge["payload"]["type"] == "url_verification" and challenge["payload"]["token"]
    assert event["payload"]["type"] == "event_callback" and event["payload"]["event"]["text"] == "over http"
    assert challenge["signed"] and event["signed"] and 0 <= event["age"] < 300
    assert event["retry"] == (None, None)
    forged = slack.signature_headers(b"{}", timestamp=time.time() - 600, secret="not the secret")
    assert forged["X-Slack-Signature"].startswith("v0=")
    assert int(forged["X-Slack-Request-Timestamp"]) < time.time() - 599


def test_http_deliveries_are_retried_with_retry_num_and_reason(slack):
    slack.configure(ack_timeout=10.0)  # 1 s: a prompt answer always beats it, the slow one never does

    async def scenario(session):
        receiver = Receiver(slack.identity["signing_secret"], answers=[500, "slow", 200, "no-retry"])
        url = await receiver.start()
        try:
            assert (await in_thread(slack.set_request_url, url))["verified"]
            retried = slack.inject_message("retried")["event_ids"][0]
            await in_thread(slack.wait_for, lambda: slack.events(status="acked"), timeout=10)
            refused = slack.inject_message("refused for good")["event_ids"][0]
            await in_thread(slack.wait_for, lambda: slack.events(status="failed"), timeout=10)
        finally:
            await receiver.runner.cleanup()
        return retried, refused, receiver.requests[1:]

    retried, refused, requests = run(scenario)
    by_event = {}
    for request in requests:
        by_event.setdefault(request["payload"]["event_id"], []).append(request["retry"])
    assert by_event[retried][0] == (None, None) and by_event[retried][1] == ("1", "http_error")
    assert by_event[retried][2] == ("2", "http_timeout")  # the slow answer did not count
    assert by_event[refused] == [(None, None)]  # X-Slack-No-Retry: given up at once
    assert all(r["signed"] for r in requests)
    (acked,) = slack.events(status="acked")
    assert [(a["status"], a["failure"]) for a in acked["attempts"]] == [
        (500, "http_error"), (None, "http_timeout"), (200, None)]
    stats = slack.stats()
    assert stats["http_failures"] == 3 and stats["events_failed"] == 1
