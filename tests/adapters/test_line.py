"""The LINE adapter: its pure parts (the webhook signature, events to MessageEvents, retry keys, error classes), its
client against the fake LINE, and what LINE does that other platforms do not, in the real daemon against the fake
(tests/fakes/line): a webhook without the channel's signature refused and nothing stored, a redelivered event one
turn, answers sent with the reply token while it is valid and pushed once it is not, the loading animation in 1:1
chats only, the monthly quota reported as the failure it is, and a kill -9 after a reply left (no retry key there):
the part pushed again under the re-sent mark. The conformance suite runs it too (tests/adapters/harnesses/line.py):
its delivery case is the kill -9 between a push leaving and its id being recorded, shown once under the retry key.
The doctor's probe of the channel access token is here as well, and files out in the daemon: audio and video sent
as their messages and fetched back from the webhook server, a PDF refused (their pure parts:
tests/adapters/test_line_files.py).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

from actors.adapters.errors import FloodError, PermanentError, RetryableError, TooLongError
from actors.adapters.line.adapter import retry_key
from actors.adapters.line.client import ContentTooLarge, LineAPI, QuotaExhausted, ReplyTokenRefused, classify
from actors.adapters.line.quick_replies import Press, press_of, quick_reply
from actors.adapters.line.inbound import (event_from_webhook, events_of, signature, signature_ok, skip_reason,
                                          WebhookRefused)
from actors.adapters.pacing import DEFAULT_RESENT_MARKER
from actors.adapters.payload_fields import MalformedPayload
from actors.media.sniff import sniff
from actors.messages import OutgoingFile, PlatformOp
from common import config as config_mod
from daemon.admin import AdminClient
from storage import MediaCache, Store, StorageError
from tests.actor_system import wait_for
from tests.adapters.harnesses.line import PUBLIC_URL, LineHarness
from tests.adapters.test_conformance import Rig, session_rows
from tests.adapters.test_line_files import mp4
from tests.fakes.line import DEFAULT_ACCESS_TOKEN, DEFAULT_CHANNEL_SECRET, FakeLine
from tests.fakes.line.webhooks import sign
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(120)
USER = FakeLine.user("alice")


# --------------------------------------------------------------------------------------------- pure parts

def test_the_signature_is_lines_and_anything_else_is_refused():
    body = b'{"destination":"U1","events":[]}'
    assert signature(DEFAULT_CHANNEL_SECRET, body) == sign(DEFAULT_CHANNEL_SECRET, body)
    assert signature_ok(DEFAULT_CHANNEL_SECRET, body, sign(DEFAULT_CHANNEL_SECRET, body))
    for header in (None, "", sign("another secret", body), sign(DEFAULT_CHANNEL_SECRET, body + b" ")):
        assert not signature_ok(DEFAULT_CHANNEL_SECRET, body, header)


@pytest.mark.parametrize("body, reason", [(b"not json", "no JSON"), (b"[]", "no events"),
                                          (b'{"events": {}}', "no events"),
                                          (json.dumps({"events": [{}] * 101}).encode(), "over 100")])
def test_a_signed_body_that_is_no_webhook_is_refused(body, reason):
    with pytest.raises(WebhookRefused, match=reason):
        events_of(body)


def event(source: dict, message: dict | None = None, **extra) -> dict:
    body = {"type": "message", "source": source, "timestamp": 1700000000123, "webhookEventId": "01HEVENT",
            "replyToken": "tok", "deliveryContext": {"isRedelivery": False}}
    if message is not None:
        body["message"] = {"id": "468789577898262530", **message}
    body.update(extra)
    return body


def test_user_group_and_room_sources_become_chats():
    dm = event_from_webhook(event({"type": "user", "userId": USER}, {"type": "text", "text": "hi"}), "ln", "p")
    assert (dm.source.chat_id, dm.source.chat_type, dm.source.user_id) == (USER, "dm", USER)
    assert dm.text == "hi" and dm.platform_message_id == "468789577898262530" and dm.sent_at == 1700000000.123
    group = FakeLine.group("team")
    mention = {"mentionees": [{"index": 0, "length": 4, "type": "user", "isSelf": True}]}
    in_group = event_from_webhook(event({"type": "group", "groupId": group, "userId": USER},
                                        {"type": "text", "text": "@bot hi", "mention": mention}), "ln", "p")
    assert (in_group.source.chat_id, in_group.source.chat_type, in_group.source.user_id) == (group, "group", USER)
    assert in_group.addressed is True
    room = event_from_webhook(event({"type": "room", "roomId": FakeLine.room("r")}, {"type": "text", "text": "x"}),
                              "ln", "p")
    assert room.source.chat_type == "group" and room.source.user_id is None and room.addressed is False


def test_media_stickers_and_postbacks_are_taken_and_other_events_skipped():
    source = {"type": "user", "userId": USER}
    image = event_from_webhook(event(source, {"type": "image", "contentProvider": {"type": "line"}}), "ln", "p")
    [attachment] = image.attachments
    assert (attachment.kind, attachment.ref, attachment.state) == ("photo", "468789577898262530", "pending")
    audio = event_from_webhook(event(source, {"type": "audio", "duration": 2000}), "ln", "p")
    assert audio.attachments[0].kind == "voice"
    document = event_from_webhook(event(source, {"type": "file", "fileName": "a.pdf", "fileSize": 9}), "ln", "p")
    assert (document.attachments[0].kind, document.attachments[0].name) == ("document", "a.pdf")
    sticker = event_from_webhook(event(source, {"type": "sticker", "keywords": ["cony", "happy"]}), "ln", "p")
    assert sticker.text == "[sent a sticker: cony, happy]"
    postback = event_from_webhook(event(source, None, type="postback", postback={"data": "action=buy"}), "ln", "p")
    assert postback.text == "[pressed: action=buy]" and postback.platform_message_id == "01HEVENT"
    assert skip_reason(event(source, None, type="follow")) == "event 'follow'"
    assert skip_reason(event(source, {"type": "location"})) == "message type 'location'"
    assert skip_reason(event(source, {"type": "text", "text": "x"})) is None


@pytest.mark.parametrize("change, reason", [
    ({"source": None}, "no user, group or room source"),
    ({"source": {"type": "user", "userId": "U1/../../x"}}, "source.userId must be an id"),
    ({"message": {"id": "not-a-number", "type": "text", "text": "x"}, "webhookEventId": None}, "no message id"),
    ({"message": {"id": "1", "type": "text"}}, "a text message without text"),
    ({"type": "postback", "message": None}, "a postback without data")])
def test_an_event_the_gateway_cannot_take_is_malformed(change, reason):
    raw = dict(event({"type": "user", "userId": USER}, {"type": "text", "text": "x"}), **change)
    with pytest.raises(MalformedPayload, match=reason):
        event_from_webhook(raw, "ln", "p")


QUESTION = ("The assistant wants to run calculator. Press Approve or Deny, or reply \u201capprove 7KQ2\u201d or "
            "\u201cdeny 7KQ2\u201d (within 10 minutes).")


def test_buttons_are_postback_quick_replies_whose_words_are_the_typed_answer():
    data = "ap:" + "a" * 16
    quick = quick_reply((("Approve", data + ":y"), ("Deny", data + ":n")), QUESTION)
    assert quick == {"items": [
        {"type": "action", "action": {"type": "postback", "label": "Approve", "data": data + ":y",
                                      "displayText": "approve 7KQ2"}},
        {"type": "action", "action": {"type": "postback", "label": "Deny", "data": data + ":n",
                                      "displayText": "deny 7KQ2"}}]}
    [model] = quick_reply((("large-model", "md:large-model"),), "listing")["items"]
    assert model["action"]["displayText"] == "/model large-model"
    assert quick_reply((), QUESTION) is None


def test_a_postback_of_our_buttons_is_a_press_known_by_its_webhook_event_id():
    group = {"type": "group", "groupId": FakeLine.group("g"), "userId": USER}
    raw = event(group, None, type="postback", postback={"data": "ap:" + "a" * 16 + ":y"})
    assert press_of(raw, "ln", "p") == Press("01HEVENT", FakeLine.group("g"), USER, "ap:" + "a" * 16 + ":y", "tok")
    again = dict(raw, deliveryContext={"isRedelivery": True})
    assert press_of(again, "ln", "p").reply_token is None, "a redelivery's token is as old as its first try"
    assert press_of(event(group, None, type="postback", postback={"data": "action=buy"}), "ln", "p") is None
    assert press_of(event(group, {"type": "text", "text": "ap:x"}), "ln", "p") is None
    answered = event_from_webhook(dict(raw, approval_answer="approve 7KQ2"), "ln", "p")
    assert answered.text == "approve 7KQ2" and answered.platform_message_id == "01HEVENT"
    with pytest.raises(MalformedPayload, match="webhookEventId"):
        press_of(dict(raw, webhookEventId=None), "ln", "p")


def op(op_id: str, text: str, key=None, chat: str = USER) -> PlatformOp:
    return PlatformOp(op_id, "send", chat, text, idempotency_key=key)


def test_a_retry_key_names_one_operation_with_one_content_in_every_life():
    assert uuid.UUID(retry_key(op("o:1.1", "hi"))).version == 5
    assert retry_key(op("o:1.1", "hi")) == retry_key(op("o:1.1", "hi")), "the same op again: the same key"
    assert retry_key(op("o:1.1", "hi")) != retry_key(op("o:1.1", "another text"))
    assert retry_key(op("o:1.1", "hi")) != retry_key(op("o:2.1", "hi")), "another claim's op: another key"
    keyed = retry_key(op("o:1.1", "hi", key="abc.0"))
    assert keyed == retry_key(op("o:7.3", "hi", key="abc.0")), "a keyed send's key names its part, in every life"
    assert keyed != retry_key(op("o:1.1", "hi", key="abc.0", chat=FakeLine.user("bob")))


def test_line_refusals_become_the_error_classes_the_base_acts_on():
    quota = classify("push", 429, {"message": "You have reached your monthly limit."})
    assert isinstance(quota, QuotaExhausted) and isinstance(quota, PermanentError) and "monthly" in str(quota)
    flood = classify("push", 429, {"message": "Too Many Requests"}, {}, rate_limit_wait_s=3.0)
    assert isinstance(flood, FloodError) and flood.retry_after == 3.0
    assert classify("push", 429, {"message": "x"}, {"Retry-After": "7"}).retry_after == 7.0
    assert isinstance(classify("reply", 400, {"message": "Invalid reply token"}), ReplyTokenRefused)
    assert type(classify("push", 400, {"message": "Invalid reply token"})) is PermanentError
    too_long = classify("push", 400, {"message": "The request body has 1 error(s)", "details": [
        {"message": "Length must be between 1 and 5000", "property": "messages[0].text"}]})
    assert isinstance(too_long, TooLongError)
    busy = classify("push", 500, {"message": "An error occurred in the server"})
    assert type(busy) is RetryableError and busy.maybe_done
    assert type(classify("info", 401, {"message": "Authentication failed"})) is PermanentError


# ------------------------------------------------------------------------------------ the client, vs the fake

@pytest.fixture(scope="module")
def fake():
    with FakeLine() as server:
        yield server


def client(fake: FakeLine, token: str = DEFAULT_ACCESS_TOKEN) -> LineAPI:
    return LineAPI(token, fake.base_url, fake.base_url, rate_limit_wait_s=2.0)


def test_a_push_repeated_under_its_key_returns_the_first_message_and_sends_nothing(fake):
    user, key = FakeLine.user("client-push"), str(uuid.uuid4())

    async def scenario():
        async with client(fake) as api:
            return (await api.push(user, [{"type": "text", "text": "once"}], key),
                    await api.push(user, [{"type": "text", "text": "once"}], key))
    first, again = asyncio.run(scenario())
    assert first == again and [m["text"] for m in fake.messages(user)] == ["once"]
    assert fake.stats()["retry_key_repeats"] == 1


def test_a_spent_reply_token_is_refused_the_quota_is_named_and_content_is_capped(fake):
    user = FakeLine.user("client-reply")
    token = fake.event(user, None)["replyToken"]
    image = fake.message_event(user, {"type": "image"})["message"]["id"]
    with fake.mutate() as state:
        state["content"][image] = "AAAAAAAAAAAA"   # 9 bytes

    async def scenario():
        async with client(fake) as api:
            [sent] = await api.reply(token, [{"type": "text", "text": "hi"}])
            with pytest.raises(ReplyTokenRefused):
                await api.reply(token, [{"type": "text", "text": "again"}])
            assert len(await api.content(image, 9)) == 9
            with pytest.raises(ContentTooLarge):
                await api.content(image, 8)
            with pytest.raises(PermanentError, match="404"):
                await api.content("1", 100)
            await api.show_loading(user, 20)
            fake.configure(push_quota=0)
            try:
                with pytest.raises(QuotaExhausted, match="monthly message quota is used up"):
                    await api.push(user, [{"type": "text", "text": "x"}], str(uuid.uuid4()))
            finally:
                fake.configure(push_quota=None)
        async with client(fake, token="revoked") as api:
            with pytest.raises(PermanentError, match="401"):
                await api.bot_info()
        return sent
    assert asyncio.run(scenario()) == fake.messages(user)[0]["id"]
    assert [e["loadingSeconds"] for e in fake.loading(user)] == [20]


def test_the_doctor_asks_for_the_bot_info_and_plans_the_webhook_port(fake):
    from actors.adapters import registry
    from daemon.doctor import planned_ports
    from daemon.doctor_probes import probe_line
    table = registry.validate_adapter("ln", {"type": "line", "channel_secret": DEFAULT_CHANNEL_SECRET,
                                             "channel_access_token": DEFAULT_ACCESS_TOKEN,
                                             "api_base_url": fake.base_url, "webhook_port": 8123})
    good = asyncio.run(probe_line("ln", table))
    assert good.status == "ok" and "Fake LINE bot" in good.detail
    wrong = asyncio.run(probe_line("ln", dict(table, channel_access_token="not-the-token")))
    assert wrong.status == "fail" and "refused" in wrong.detail and "not-the-token" not in wrong.detail
    away = asyncio.run(probe_line("ln", dict(table, api_base_url="http://127.0.0.1:9")))
    assert away.status == "fail" and "cannot reach" in away.detail and DEFAULT_ACCESS_TOKEN not in away.detail
    config = {"gateway": {"bind_host": "127.0.0.1", "admin_port": 1}}
    assert ("ln webhook", "127.0.0.1", 8123) in planned_ports(config, {"ln": table})


# ------------------------------------------------------------------------------------------ in the daemon

@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("line")
    harness = LineHarness(workdir)
    harness.start()
    gateway = Gateway(workdir, extra_toml=harness.adapter_toml("use_reply_tokens = true\n"), watchdog_interval=30.0)
    try:
        gateway.start()
        gateway.wait_ready()
        harness.webhook_ready()
        yield harness, gateway
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        harness.stop()


def rows(harness: LineHarness, gateway: Gateway, chat: str):
    """The inbox rows of the chat's session; None while the database is busy (callers poll)."""
    return session_rows(gateway, harness.source(chat))


def obligations(gateway: Gateway, chat_id: str):
    async def read():
        async with await Store.open(gateway.state / "gateway.db") as store:
            return [o for o in await store.ledger.list(limit=10_000) if o.target.chat_id == chat_id]
    try:
        return asyncio.run(read())
    except StorageError:
        return None


def answered(harness: LineHarness, chat: str, count: int = 1, timeout: float = 60) -> list[dict]:
    """The bot's messages in the chat once there are ``count``."""
    user = harness.server.user(chat)
    return wait_for(lambda: (shown := harness.server.messages(user)) and len(shown) >= count and shown, timeout,
                    0.1, f"{count} answer(s) in {chat}")


def test_a_webhook_without_the_channels_signature_is_refused_401_and_nothing_is_stored(rig):
    harness, gateway = rig
    line, chat = harness.server, f"forged-{uuid.uuid4().hex[:6]}"
    body = line.body_of([line.message_event(line.user(chat), {"type": "text", "text": "let me in"})])
    forged = [line.deliver([], body=body, signature=sign("not the channel secret", body)),
              line.deliver([], body=body, signature=None)]
    for handle in forged:
        wait_for(lambda: line.webhook(handle)["state"] != "pending", 30, 0.05, "the forged webhook's answer")
        assert [a["status"] for a in line.webhook(handle)["attempts"]] == [401]
    gateway.wait_log("webhook refused: bad or missing X-Line-Signature")
    signed = line.deliver([], body=body, signature=sign(DEFAULT_CHANNEL_SECRET, body))   # the same body, signed
    wait_for(lambda: line.webhook(signed)["state"] == "acked", 30, 0.05, "the signed webhook's answer")
    [row] = wait_for(lambda: rows(harness, gateway, chat), 30, 0.05, "the signed webhook's row")
    assert row.payload["text"] == "let me in"


def test_a_redelivered_event_is_one_turn_answered_with_its_reply_token(rig):
    harness, gateway = rig
    chat = f"redelivered-{uuid.uuid4().hex[:6]}"
    first = harness.inject(chat, "only once #slow 0.6")
    wait_for(lambda: rows(harness, gateway, chat), 30, 0.05, "the row")
    again = harness.replay(first)
    wait_for(lambda: harness.acknowledged(again), 30, 0.05, "the redelivery acknowledged")
    [event] = harness.server.webhook(first)["events"]
    assert harness.server.webhook(again)["events"][0]["webhookEventId"] == event["webhookEventId"]
    [message] = answered(harness, chat)
    assert message["via"] == "reply", "the reply token was fresh: the answer is a reply, free of the push quota"
    wait_for(lambda: (o := obligations(gateway, harness.server.user(chat))) and all(
        x.state == "delivered" for x in o), 30, 0.1, "the answer delivered in the ledger")
    assert len(rows(harness, gateway, chat)) == 1
    assert len(obligations(gateway, harness.server.user(chat))) == 1, "one turn, one answer"
    # The turn took over a second with nothing to show: the loading animation meanwhile (1:1 chats only).
    assert harness.server.loading(harness.server.user(chat)), "the typing indicator is the loading animation"
    assert len(harness.server.messages(harness.server.user(chat))) == 1


def test_a_group_message_that_mentions_the_bot_is_answered_in_the_group_without_a_loading_animation(rig):
    harness, gateway = rig
    line, name = harness.server, f"group-{uuid.uuid4().hex[:6]}"
    group, member = line.group(name), line.user(f"{name}-member")
    mention = {"mentionees": [{"index": 0, "length": 4, "type": "user", "isSelf": True}]}
    refused_before = line.stats()["loading_refused"]
    line.deliver([line.message_event(group, {"type": "text", "text": "@bot hello #slow 0.6", "mention": mention},
                                     member)])
    [message] = wait_for(lambda: line.messages(group), 60, 0.1, "the answer in the group")
    assert message["via"] == "reply"
    wait_for(lambda: (o := obligations(gateway, group)) and all(x.state == "delivered" for x in o), 30, 0.1,
             "the answer delivered in the ledger")
    assert line.loading(group) == [] and line.stats()["loading_refused"] == refused_before, (
        "LINE shows the loading animation in 1:1 chats only: none is asked for a group")


def test_an_expired_reply_token_falls_back_to_a_push(rig):
    harness, gateway = rig
    chat, line = f"expired-{uuid.uuid4().hex[:6]}", harness.server
    line.configure(reply_token_ttl=0.0)   # LINE finds every token expired; the adapter still thinks it fresh
    try:
        harness.inject(chat, "answer me late")
        [message] = answered(harness, chat)
    finally:
        line.configure(reply_token_ttl=60.0)
    assert message["via"] == "push"
    calls = sorted(line.ops(line.user(chat), "reply") + line.ops(line.user(chat), "push"), key=lambda o: o["at"])
    assert [(o["method"], o["status"]) for o in calls] == [("reply", 400), ("push", 200)]
    gateway.wait_log("was refused (reply: [400] Invalid reply token); pushing instead")


def test_the_monthly_quota_used_up_fails_the_reply_and_says_why(rig):
    harness, gateway = rig
    chat, line = f"quota-{uuid.uuid4().hex[:6]}", harness.server
    renewed = f"renewed-{uuid.uuid4().hex[:6]}"
    line.configure(reply_token_ttl=0.0, push_quota=0)   # every reply token refused: each answer is a push
    try:
        harness.inject(chat, "no quota left")
        ledger = wait_for(lambda: (o := obligations(gateway, line.user(chat))) and o[0].state != "attempting"
                          and o[0].last_error and o, 60, 0.1, "the reply to fail")
        pushes = line.ops(line.user(chat), "push")
        noted = wait_for(lambda: "monthly push quota used up" in (n := status_note(gateway)) and n, 30, 0.2,
                         f"the quota in status (last seen: {status_note(gateway)!r})")
        line.configure(push_quota=None)   # the month turned
        harness.inject(renewed, "the quota renewed")
        assert [m["via"] for m in answered(harness, renewed)] == ["push"]
        wait_for(lambda: status_note(gateway) == "", 30, 0.2,
                 f"the quota gone from status after a push went (last seen: {status_note(gateway)!r})")
    finally:
        line.configure(reply_token_ttl=60.0, push_quota=None)
    assert "monthly message quota is used up" in ledger[0].last_error, ledger[0]
    assert [o["status"] for o in pushes] == [429], "a used-up quota is not retried into a ban"
    assert line.messages(line.user(chat)) == []
    gateway.wait_log("monthly message quota is used up")
    assert "until it renews" in noted


def test_audio_and_video_go_as_messages_line_fetches_from_the_webhook_server_and_a_pdf_is_refused(rig, monkeypatch):
    """An m4a goes as an audio message stating its length, its caption a text after it; an mp4 as a video with a
    preview; each URL under the table's public_url, fetched back (the fake's ``view``) as the bytes the cache
    holds, once. A PDF has no message type on LINE: refused for good, saying so, and nothing is sent. The server
    answers nothing but a known token with its name, and only to a GET."""
    harness, gateway = rig
    monkeypatch.setenv("GATEWAY_STATE_DIR", str(gateway.state))   # the admin client finds the daemon through it
    ops = Rig(harness, gateway, AdminClient(config_mod.load(str(gateway.config))))
    chat, cache = f"files-{uuid.uuid4().hex[:6]}", MediaCache(gateway.state / "media")
    user = harness.server.user(chat)
    sound, clip, report = mp4(b"M4A ", duration=3200), mp4(b"isom"), b"%PDF-1.7\n" + os.urandom(64)

    def outgoing(data: bytes, name: str, caption: str = "") -> OutgoingFile:
        return OutgoingFile(cache.put(data), sniff(data), "document", name, caption, len(data))
    audio = ops.op(chat, "send", file=outgoing(sound, "hello.m4a", "a short hello"))
    video = ops.op(chat, "send", file=outgoing(clip, "clip.mp4"))
    pdf = ops.op(chat, "send", file=outgoing(report, "report.pdf"))
    assert audio.ok and video.ok, (audio, video)
    assert not pdf.ok and pdf.error_kind == "permanent" and "no message a bot can send" in pdf.error, pdf
    assert [(m["type"], m["text"]) for m in harness.server.messages(user)] == [
        ("audio", None), ("text", "a short hello"), ("video", None)]
    shown_audio, shown_video = harness.server.view(user)
    assert (shown_audio["id"], shown_audio["duration"]) == (audio.message_id, 3200)
    assert shown_audio["fetched"] == {"originalContentUrl": {
        "status": 200, "sha256": hashlib.sha256(sound).hexdigest(), "size": len(sound), "type": "audio/mp4"}}
    assert shown_video["id"] == video.message_id
    assert shown_video["fetched"]["originalContentUrl"]["sha256"] == hashlib.sha256(clip).hexdigest()
    assert shown_video["fetched"]["previewImageUrl"]["status"] == 200
    assert shown_video["fetched"]["previewImageUrl"]["type"] == "image/png"
    assert harness.server.view(user) == [shown_audio, shown_video] and harness.server.stats()["media_fetches"] >= 3
    url = shown_audio["urls"]["originalContentUrl"]
    assert url.startswith(PUBLIC_URL + "/line/media/") and url.endswith("/hello.m4a")
    token = url.split("/")[-2]
    assert harness.server.fetch(url)["status"] == 200, "fetched again while it has not expired"
    for wrong in (url.replace(token, token[:-1] + ("A" if token[-1] != "A" else "B")),
                  url.replace("hello.m4a", "other.m4a"), url.replace(token, "..")):
        assert harness.server.fetch(wrong)["status"] == 404, wrong
    served = urllib.parse.urlsplit(harness.url)
    for method in ("POST", "HEAD"):
        asked = urllib.request.Request(f"{served.scheme}://{served.netloc}{urllib.parse.urlsplit(url).path}",
                                       data=b"" if method == "POST" else None, method=method)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(asked, timeout=30)
        assert refused.value.code == 405, method


def status_note(gateway: Gateway) -> str:
    """The LINE adapter's note in ``status --json`` ("" without one)."""
    shown = json.loads(gateway.cli("status", "--json", check=True).stdout)
    [row] = [r for r in shown["adapters"] if r.get("name") == "line"]
    return row.get("note") or ""


# Last in the file: it kills the daemon with -9 and starts it again.
def test_kill_9_after_a_reply_left_shows_the_part_again_only_under_the_re_sent_mark(rig):
    """A reply token carries no retry key: the reply's copy is in the chat, its id never recorded, and the next life
    (which has no reply token) can only push. It pushes the part with the re-sent mark before it: the part shows
    twice, never twice unmarked, and the ledger names the marked copy."""
    harness, gateway = rig
    chat, line = f"lost-reply-{uuid.uuid4().hex[:6]}", harness.server
    user = line.user(chat)
    line.hold_next_answer("reply", user)
    try:
        harness.inject(chat, f"answer me once {uuid.uuid4().hex[:6]}")
        wait_for(line.answer_held.is_set, 60, 0.02, "the reply on the platform, its answer held")
        os.kill(gateway.launcher_pid, signal.SIGKILL)
        gateway.assert_no_process_left()
    finally:
        line.release_held()
    [copy] = line.messages(user)
    assert copy["via"] == "reply"
    gateway.start()
    gateway.wait_ready(timeout=30)
    [obligation] = wait_for(lambda: (o := obligations(gateway, user)) and all(x.state == "delivered" for x in o)
                            and o, 60, 0.1, "the answer finished after the restart")
    shown = [(m["via"], m["text"]) for m in line.messages(user)]
    assert shown == [("reply", copy["text"]), ("push", DEFAULT_RESENT_MARKER), ("push", copy["text"])], shown
    assert list(obligation.parts.values()) == [line.messages(user)[-1]["id"]], "the part is the marked copy"


def test_twenty_chats_at_once_get_their_whole_answers_as_final_messages_within_the_limits(rig):
    """An answer longer than a message (5,000 characters) goes as final parts, no edits (LINE has none), each within
    the limit; twenty chats answered at once make no call inside a 429's wait."""
    harness, gateway = rig
    chats = [f"crowd{i}-{uuid.uuid4().hex[:6]}" for i in range(20)]
    before = harness.server.stats()
    for chat in chats:
        harness.inject(chat, "#long 7000 a long answer, please")
    for chat in chats:
        user = harness.server.user(chat)
        wait_for(lambda: (o := obligations(gateway, user)) and all(x.state == "delivered" for x in o), 120, 0.2,
                 f"the answer in {chat} delivered")
        texts = [m["text"] for m in harness.server.messages(user)]
        assert len(texts) == 2 and all(0 < len(t) <= 5000 for t in texts), (chat, [len(t) for t in texts])
        assert "".join(texts).count("def step_") >= 10, "the answer's code block, whole across the parts"
    assert harness.server.stats()["retry_after_violations"] == before["retry_after_violations"]
