"""The Feishu / Lark adapter: its pure parts (the callback crypto and checks, events to MessageEvents, hostile fields,
send uuids, emoji types, error classes), its client against the fake open platform (the tenant token cached and
remade, a uuid repeated, uploads), the doctor's probe, and what the platform does that others do not, in the real
daemon against the fake (tests/fakes/feishu): a callback without the app's signature refused 401 and nothing stored,
the URL check answered with its challenge, an event delivered twice one turn, a group message answered only when it
mentions the bot (as a reply to it; in its thread where it came in one), one that comes while the bot is not known
yet delivered again rather than skipped, and a streamed answer's edits within the platform's 20 a message. The
conformance suite runs it too (tests/adapters/harnesses/feishu.py): its delivery case is the kill -9 between a send
reaching the platform and its id being recorded, shown once under the send's uuid.

The same daemon runs a second app by the long connection (``WS_NAME``, on a fake of its own): an event answered only
after its commit and its redelivery one turn, pings at the platform's interval, an event in fragments, events sent
while the connection is down (cut, or closed by the platform) coming after the reconnect, a kill -9 before the commit
leaving the event unanswered so the next life stores it once, and an answer streaming across a drop ending complete.
The long connection's pure parts are in test_feishu_frames.py.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid

import aiohttp
import pytest
from hypothesis import given, strategies as st

from actors.adapters.errors import FloodError, MessageNotFoundError, PermanentError, RetryableError, TooLongError
from actors.adapters.feishu.adapter import send_uuid
from actors.adapters.feishu.client import FeishuAPI, classify, file_type
from actors.adapters.feishu.formatting import emoji_type
from actors.adapters.feishu.crypto import CallbackRefused, decrypt, encrypt, signature
from actors.adapters.feishu.inbound import event_from_callback, flatten_post, open_callback, skip_reason
from actors.adapters.payload_fields import MalformedPayload
from actors.messages import PlatformOp, Source
from storage import Store, StorageError
from tests.actor_system import wait_for
from tests.adapters.harnesses.feishu import FeishuHarness
from tests.adapters.test_conformance import session_rows
from tests.fakes.feishu import (DEFAULT_APP_ID, DEFAULT_APP_SECRET, DEFAULT_BOT_OPEN_ID, DEFAULT_ENCRYPT_KEY,
                                DEFAULT_VERIFICATION_TOKEN, FakeFeishu)
from tests.fakes.feishu.callbacks import sealed
from tests.gateway import Gateway, exited

pytestmark = pytest.mark.timeout(120)
KEY, TOKEN = DEFAULT_ENCRYPT_KEY, DEFAULT_VERIFICATION_TOKEN
USER, CHAT = FakeFeishu.user("alice"), FakeFeishu.p2p_chat("alice")


def opened(body: bytes, headers: dict, now: float | None = None, key: str = KEY, token: str = TOKEN) -> dict:
    return open_callback(body, headers, encrypt_key=key, verification_token=token,
                         now=time.time() if now is None else now, max_age_s=3600)


def receive(message_type: str = "text", content: dict | None = None, chat_type: str = "p2p", mentions=(),
            **header) -> dict:
    return {"schema": "2.0",
            "header": {"event_id": "5e3702a84e847582be8db7fb73283c02", "event_type": "im.message.receive_v1",
                       "create_time": "1700000000123", "token": TOKEN, "app_id": DEFAULT_APP_ID, **header},
            "event": {"sender": {"sender_id": {"open_id": USER}, "sender_type": "user"},
                      "message": {"message_id": "om_5ce6d572455d361153b7cb51da133945", "chat_id": CHAT,
                                  "chat_type": chat_type, "message_type": message_type, "create_time": "1700000000123",
                                  "content": json.dumps(content if content is not None else {"text": "hi"}),
                                  "mentions": list(mentions)}}}


BOT_MENTION = {"key": "@_user_1", "id": {"open_id": DEFAULT_BOT_OPEN_ID}, "name": "Bot"}


# --------------------------------------------------------------------------------------------- pure parts

def test_the_encrypt_key_decrypts_what_it_encrypted_and_nothing_else():
    sealed_text = encrypt(KEY, b'{"hello": "\xe4\xbd\xa0\xe5\xa5\xbd"}')
    assert decrypt(KEY, sealed_text) == b'{"hello": "\xe4\xbd\xa0\xe5\xa5\xbd"}'
    with pytest.raises(CallbackRefused) as refused:
        decrypt("another key", sealed_text)
    assert refused.value.status == 401 or "padding" in refused.value.reason or "JSON" in refused.value.reason
    for junk in ("not base64!", "AAAA"):
        with pytest.raises(CallbackRefused):
            decrypt(KEY, junk)


def test_a_signed_encrypted_callback_opens_and_every_forgery_is_refused():
    body, headers = sealed(KEY, receive())
    assert opened(body, headers)["header"]["event_type"] == "im.message.receive_v1"
    forged = dict(headers, **{"X-Lark-Signature": signature("not the key", headers["X-Lark-Request-Timestamp"],
                                                            headers["X-Lark-Request-Nonce"], body)})
    cases = {"bad or missing X-Lark-Signature": (body, forged),
             "bad or missing X-Lark-Signature ": (body, {k: v for k, v in headers.items() if k != "X-Lark-Signature"}),
             "a replay": sealed(KEY, receive(), timestamp=int(time.time()) - 7200),
             "a plain body": (json.dumps(receive()).encode(), {}),
             "token differs": sealed(KEY, receive(token="another token"))}
    for reason, (forged_body, forged_headers) in cases.items():
        with pytest.raises(CallbackRefused, match=reason.strip()) as refused:
            opened(forged_body, forged_headers)
        assert refused.value.status == 401, reason
    with pytest.raises(CallbackRefused, match="token differs"):   # plain text: the token is the only proof
        opened(json.dumps(receive(token="x")).encode(), {}, key="")


def test_the_url_check_proves_itself_by_decrypting_and_its_token():
    check = {"type": "url_verification", "challenge": "ajls384kdjx98XX", "token": TOKEN}
    body = json.dumps({"encrypt": encrypt(KEY, json.dumps(check).encode())}).encode()
    assert opened(body, {})["challenge"] == "ajls384kdjx98XX"
    with pytest.raises(CallbackRefused):
        opened(json.dumps({"encrypt": encrypt("another key", json.dumps(check).encode())}).encode(), {})


def test_text_post_and_files_become_messages_with_names_for_mentions():
    dm = event_from_callback(receive(content={"text": "@_user_1 hello"}, mentions=[BOT_MENTION]), "fs", "p",
                             DEFAULT_BOT_OPEN_ID)
    assert (dm.source.chat_id, dm.source.chat_type, dm.source.user_id) == (CHAT, "dm", USER)
    assert dm.text == "@Bot hello" and dm.platform_message_id == "om_5ce6d572455d361153b7cb51da133945"
    assert dm.sent_at == 1700000000.123 and dm.addressed is None
    group = event_from_callback(receive(chat_type="group", mentions=[BOT_MENTION]), "fs", "p", DEFAULT_BOT_OPEN_ID)
    assert group.source.chat_type == "group" and group.addressed is True
    post = {"title": "Plan", "content": [[{"tag": "text", "text": "step "}, {"tag": "a", "text": "one",
                                                                             "href": "https://x"}],
                                         [{"tag": "at", "user_id": "ou_x", "user_name": "Bob"},
                                          {"tag": "img", "image_key": "img_1"}]]}
    assert event_from_callback(receive("post", post), "fs", "p").text == "Plan\nstep one\n@Bob"
    assert flatten_post({"zh_cn": post}) == "Plan\nstep one\n@Bob"
    for kind, content, want, ref_tail in (("image", {"image_key": "img_v3_1"}, "photo", "img_v3_1/image"),
                                          ("file", {"file_key": "file_v3_1", "file_name": "a.pdf"}, "document",
                                           "file_v3_1/file"),
                                          ("audio", {"file_key": "file_v3_2", "duration": 2000}, "voice",
                                           "file_v3_2/file")):
        [attachment] = event_from_callback(receive(kind, content), "fs", "p").attachments
        assert attachment.kind == want and attachment.ref.endswith(ref_tail), attachment


def test_what_is_no_input_is_skipped_with_its_reason():
    assert skip_reason(receive(), DEFAULT_BOT_OPEN_ID, True) is None
    assert skip_reason(receive(event_type="im.chat.member.bot.added_v1"), "", True).startswith("event ")
    assert skip_reason(receive("sticker", {"file_key": "x"}), "", True) == "message type 'sticker'"
    assert skip_reason(receive(chat_type="group"), DEFAULT_BOT_OPEN_ID, True) == (
        "a group message not addressed to the bot")
    assert skip_reason(receive(chat_type="group"), DEFAULT_BOT_OPEN_ID, False) is None
    assert skip_reason(receive(chat_type="group", mentions=[BOT_MENTION]), DEFAULT_BOT_OPEN_ID, True) is None
    old = dict(receive(), schema=None)
    assert "1.0 schema" in skip_reason(old, "", True)
    from_app = receive()
    from_app["event"]["sender"]["sender_type"] = "app"
    assert skip_reason(from_app, "", True) == "a message from a 'app'"


@pytest.mark.parametrize("change, reason", [({"chat_id": "oc_1/../x"}, "chat_id must be an id"),
                                            ({"content": "{not json"}, "content is no JSON"),
                                            ({"content": '{"words": 1}'}, "a text message without text"),
                                            ({"message_id": None}, "message_id must be an id")])
def test_an_event_the_gateway_cannot_take_is_malformed(change, reason):
    raw = receive()
    raw["event"]["message"].update(change)
    with pytest.raises(MalformedPayload, match=reason):
        event_from_callback(raw, "fs", "p")


def test_status_reactions_become_the_platforms_emoji_types():
    assert [emoji_type(e) for e in ("👍", "👀", "✅", "❤", "❤️", ":OnIt:", "DONE")] == [
        "THUMBSUP", "GLANCE", "DONE", "HEART", "HEART", "OnIt", "DONE"]
    for unknown in ("🦄", "no spaces allowed", "../x"):
        with pytest.raises(ValueError, match="no Feishu emoji type"):
            emoji_type(unknown)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                 max_size=4), max_leaves=20)


@given(st.dictionaries(st.sampled_from(["message_id", "chat_id", "chat_type", "message_type", "content",
                                        "mentions", "thread_id", "create_time"]), JSON, max_size=8))
def test_any_message_is_an_event_or_malformed_never_a_crash(fields):
    raw = receive(chat_type="group")
    raw["event"]["message"].update(fields)
    assert skip_reason(raw, DEFAULT_BOT_OPEN_ID, True) in (None, "a group message not addressed to the bot") or (
        skip_reason(raw, DEFAULT_BOT_OPEN_ID, True).startswith("message type"))
    try:
        event = event_from_callback(raw, "fs", "p", DEFAULT_BOT_OPEN_ID)
    except MalformedPayload:
        return
    assert event.platform_message_id and event.source.chat_id


@given(st.binary(max_size=300), st.dictionaries(st.sampled_from(["X-Lark-Signature", "X-Lark-Request-Timestamp",
                                                                 "X-Lark-Request-Nonce"]), st.text(max_size=70)))
def test_any_request_opens_or_is_refused_never_a_crash(body, headers):
    for key in (KEY, ""):
        try:
            opened(body, headers, key=key)
        except CallbackRefused:
            pass


def op(op_id: str, text: str, key=None, chat: str = CHAT) -> PlatformOp:
    return PlatformOp(op_id, "send", chat, text, idempotency_key=key)


def test_a_send_uuid_names_one_operation_with_one_content_in_every_life():
    assert len(send_uuid(op("o:1.1", "hi"))) <= 50
    assert send_uuid(op("o:1.1", "hi")) == send_uuid(op("o:1.1", "hi")), "the same op again: the same uuid"
    assert send_uuid(op("o:1.1", "hi")) != send_uuid(op("o:1.1", "another text"))
    assert send_uuid(op("o:1.1", "hi")) != send_uuid(op("o:2.1", "hi")), "another claim's op: another uuid"
    keyed = send_uuid(op("o:1.1", "hi", key="abc.0"))
    assert keyed == send_uuid(op("o:7.3", "hi", key="abc.0")), "a keyed send's uuid names its part, in every life"
    assert keyed != send_uuid(op("o:1.1", "hi", key="abc.0", chat=FakeFeishu.p2p_chat("bob")))


def test_platform_refusals_become_the_error_classes_the_base_acts_on():
    limited = classify("create", 429, {"code": 99991400, "msg": "request trigger frequency limit"},
                       {"x-ogw-ratelimit-reset": "3"})
    assert isinstance(limited, FloodError) and limited.retry_after == 3.0
    old_style = classify("create", 400, {"code": 99991400, "msg": "limit"}, {}, rate_limit_wait_s=1.5)
    assert isinstance(old_style, FloodError) and old_style.retry_after == 1.5
    assert isinstance(classify("update", 400, {"code": 230011, "msg": "withdrawn"}), MessageNotFoundError)
    assert isinstance(classify("create", 400, {"code": 230025, "msg": "too long"}), TooLongError)
    busy = classify("create", 502, None)
    assert type(busy) is RetryableError and busy.maybe_done
    assert type(classify("create", 400, {"code": 230002, "msg": "The bot is not in the chat."})) is PermanentError


# ------------------------------------------------------------------------------------ the client, vs the fake

@pytest.fixture(scope="module")
def fake():
    with FakeFeishu() as server:
        yield server


def test_the_tenant_token_is_made_once_and_again_only_when_it_ends(fake):
    chat = FakeFeishu.p2p_chat("client-token")
    before = fake.stats()["tokens_issued"]

    async def scenario():
        async with FeishuAPI(fake.base_url, DEFAULT_APP_ID, DEFAULT_APP_SECRET) as api:
            for i in range(3):
                await api.create(chat, "text", {"text": f"n{i}"}, None)
            made_first = api.tokens_made
            fake.expire_tokens()   # the platform calls the token invalid: made again once, the call repeated
            await api.create(chat, "text", {"text": "after"}, None)
            return made_first, api.tokens_made
    assert asyncio.run(scenario()) == (1, 2)
    assert fake.stats()["tokens_issued"] - before == 2
    assert [m["text"] for m in fake.messages(chat)] == ["n0", "n1", "n2", "after"]


def test_a_token_near_its_expiry_is_made_again_before_it_is_refused(fake):
    now = [1000.0]

    async def scenario():
        async with FeishuAPI(fake.base_url, DEFAULT_APP_ID, DEFAULT_APP_SECRET, clock=lambda: now[0]) as api:
            first = await api.token()
            now[0] += 7200 - 301
            same = await api.token()
            now[0] += 2
            return first, same, await api.token()
    first, same, fresh = asyncio.run(scenario())
    assert first == same != fresh


def test_a_send_repeated_under_its_uuid_is_the_first_message_and_sends_nothing(fake):
    chat, key = FakeFeishu.p2p_chat("client-uuid"), str(uuid.uuid4())

    async def scenario():
        async with FeishuAPI(fake.base_url, DEFAULT_APP_ID, DEFAULT_APP_SECRET) as api:
            return (await api.create(chat, "text", {"text": "once"}, key),
                    await api.create(chat, "text", {"text": "once"}, key))
    first, again = asyncio.run(scenario())
    assert first == again and [m["text"] for m in fake.messages(chat)] == ["once"]


def test_a_document_goes_as_a_file_after_its_caption_and_a_photo_with_one_as_a_post(fake):
    chat = FakeFeishu.p2p_chat("client-files")

    async def scenario():
        async with FeishuAPI(fake.base_url, DEFAULT_APP_ID, DEFAULT_APP_SECRET) as api:
            image = await api.upload_image(b"\x89PNG fake", "dot.png", "image/png")
            document = await api.upload_file(b"%PDF-1.4 fake", "a.pdf", "application/pdf", file_type(
                "application/pdf", "a.pdf"))
            post = {"zh_cn": {"title": "", "content": [[{"tag": "img", "image_key": image}],
                                                       [{"tag": "text", "text": "a dot"}]]}}
            return (await api.create(chat, "post", post, None),
                    await api.create(chat, "file", {"file_key": document}, None))
    asyncio.run(scenario())
    shown = fake.messages(chat)
    assert [(m["msg_type"], m["text"]) for m in shown] == [("post", "a dot"), ("file", "")]
    uploads = fake.read(lambda s: s["uploads"])
    assert uploads[shown[1]["file"]]["name"] == "a.pdf" and uploads[shown[0]["file"]]["kind"] == "image"
    assert [file_type(*pair) for pair in (("application/msword", "x"), ("text/plain", "x.txt"),
                                          ("application/vnd.ms-excel", "x"))] == ["doc", "stream", "xls"]


def test_a_wrong_app_secret_is_refused_permanently(fake):
    async def scenario():
        async with FeishuAPI(fake.base_url, DEFAULT_APP_ID, "not-the-secret") as api:
            await api.bot_info()
    with pytest.raises(PermanentError, match="app secret invalid"):
        asyncio.run(scenario())


def test_the_doctor_makes_a_token_asks_for_the_bot_and_plans_the_callback_port(fake):
    from actors.adapters import registry
    from daemon.doctor import planned_ports
    from daemon.doctor_probes import probe_feishu
    table = registry.validate_adapter("fs", {"type": "feishu", "app_id": DEFAULT_APP_ID,
                                             "app_secret": DEFAULT_APP_SECRET, "encrypt_key": KEY,
                                             "base_url": fake.base_url, "callback_port": 8124})
    good = asyncio.run(probe_feishu("fs", table))
    assert good.status == "ok" and "Fake bot" in good.detail
    wrong = asyncio.run(probe_feishu("fs", dict(table, app_secret="not-the-secret")))
    assert wrong.status == "fail" and "refused" in wrong.detail and "not-the-secret" not in wrong.detail
    away = asyncio.run(probe_feishu("fs", dict(table, base_url="http://127.0.0.1:9")))
    assert away.status == "fail" and "cannot reach" in away.detail and DEFAULT_APP_SECRET not in away.detail
    config = {"gateway": {"bind_host": "127.0.0.1", "admin_port": 1}}
    assert ("fs callbacks", "127.0.0.1", 8124) in planned_ports(config, {"fs": table})


def test_a_table_without_any_callback_check_or_with_an_unknown_domain_is_refused():
    from actors.adapters import registry
    from common.config import ConfigError
    base = {"type": "feishu", "app_id": DEFAULT_APP_ID, "app_secret": DEFAULT_APP_SECRET}
    with pytest.raises(ConfigError, match="Encrypt Key"):
        registry.validate_adapter("fs", base)
    with pytest.raises(ConfigError, match="domain"):
        registry.validate_adapter("fs", dict(base, verification_token="t", domain="feishu.example"))
    assert registry.validate_adapter("fs", dict(base, verification_token="t", domain="lark"))["domain"] == "lark"


# ------------------------------------------------------------------------------------------ in the daemon

WS_NAME = "feishu_ws"   # the daemon's second app, on a fake of its own: events by the long connection


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("feishu")
    harness = FeishuHarness(workdir)
    harness.start()
    # The long connection's app has a fake of its own (its counts apart from the callback app's): pings every
    # second, an unanswered event sent again after 2 s, reconnections at once (no ReconnectNonce).
    harness.ws = FakeFeishu(ping_interval=1, reconnect_nonce=0, ack_timeout=2.0).start()
    ws_table = (f'\n[adapters.{WS_NAME}]\ntype = "feishu"\naccess = "open"\napp_id = "{DEFAULT_APP_ID}"\n'
                f'app_secret = "{DEFAULT_APP_SECRET}"\nbase_url = "{harness.ws.base_url}"\n'
                f'inbound = "long_connection"\nmax_ping_interval_s = 5\nrate_limit_wait_s = 0.5\n')
    # Edits paced far faster than the platform row, so one streamed answer asks for more edits than the platform's
    # 20 a message (the edit-cap case); the fake's 5 sends a second per chat still holds.
    fast_edits = ("pacing = { per_chat_ops_per_s = 20.0, per_chat_burst = 2, edit_interval_s = 0.05, "
                  "min_edit_delta_chars = 1 }\n")
    gateway = Gateway(workdir, extra_toml=harness.adapter_toml(fast_edits) + ws_table, watchdog_interval=30.0)
    try:
        gateway.start()
        gateway.wait_ready()
        harness.callback_ready()
        yield harness, gateway
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        harness.stop()
        harness.ws.stop()


def rows_of(gateway: Gateway, source):
    return session_rows(gateway, source)


def obligations(gateway: Gateway, chat_id: str):
    async def read():
        async with await Store.open(gateway.state / "gateway.db") as store:
            return [o for o in await store.ledger.list(limit=10_000) if o.target.chat_id == chat_id]
    try:
        return asyncio.run(read())
    except StorageError:
        return None


def test_a_callback_without_the_apps_signature_is_refused_401_and_nothing_is_stored(rig):
    harness, gateway = rig
    server, chat = harness.server, f"forged-{uuid.uuid4().hex[:6]}"
    event = server.message_event(server.p2p_chat(chat), server.user(chat), "text", {"text": "let me in"})
    body, headers = sealed(KEY, event)
    bad = dict(headers, **{"X-Lark-Signature": "0" * 64})
    forged = [server.deliver(event, body=body, headers=bad),
              server.deliver(event, body=body, headers={"Content-Type": "application/json"}),
              server.deliver(event, body=json.dumps(event).encode(), headers={"Content-Type": "application/json"})]
    for handle in forged:
        wait_for(lambda: server.callback(handle)["state"] != "pending", 30, 0.05, "the forged callback's answer")
        assert [a["status"] for a in server.callback(handle)["attempts"]] == [401]
    gateway.wait_log("callback refused: bad or missing X-Lark-Signature")
    assert not rows_of(gateway, harness.source(chat)), "nothing stored"
    signed = server.deliver(event, body=body, headers=headers)   # the same body, rightly signed
    wait_for(lambda: server.callback(signed)["state"] == "acked", 30, 0.05, "the signed callback's answer")
    [row] = wait_for(lambda: rows_of(gateway, harness.source(chat)), 30, 0.05, "the signed callback's row")
    assert row.payload["text"] == "let me in"


def test_the_url_check_is_answered_with_its_challenge(rig):
    harness, _ = rig
    check = {"type": "url_verification", "challenge": "c-" + uuid.uuid4().hex, "token": TOKEN}

    async def post(key: str):
        body = json.dumps({"encrypt": encrypt(key, json.dumps(check).encode())})
        async with aiohttp.ClientSession() as session:
            async with session.post(harness.server.callback_url, data=body,
                                    headers={"Content-Type": "application/json"}) as resp:
                return resp.status, await resp.text()
    status, text = asyncio.run(post(KEY))
    assert status == 200 and json.loads(text) == {"challenge": check["challenge"]}
    assert asyncio.run(post("another key"))[0] == 401


def test_an_event_delivered_twice_is_one_turn(rig):
    harness, gateway = rig
    chat = f"twice-{uuid.uuid4().hex[:6]}"
    first = harness.inject(chat, "only once")
    wait_for(lambda: rows_of(gateway, harness.source(chat)), 30, 0.05, "the row")
    again = harness.replay(first)
    wait_for(lambda: harness.acknowledged(again), 30, 0.05, "the redelivery acknowledged")
    assert harness.server.callback(again)["event"]["header"]["event_id"] == (
        harness.server.callback(first)["event"]["header"]["event_id"])
    chat_id = harness.source(chat).chat_id
    wait_for(lambda: (o := obligations(gateway, chat_id)) and all(x.state == "delivered" for x in o), 60, 0.1,
             "the answer delivered in the ledger")
    assert len(rows_of(gateway, harness.source(chat))) == 1
    assert len(obligations(gateway, chat_id)) == 1, "one turn, one answer"
    assert len(harness.server.messages(chat_id)) == 1


def test_a_group_message_is_answered_only_when_it_mentions_the_bot_and_as_a_reply_to_it(rig):
    harness, gateway = rig
    server, name = harness.server, f"group-{uuid.uuid4().hex[:6]}"
    group, member = server.group(name), server.user(f"{name}-member")
    quiet = server.inject_text(group, member, "people talking", chat_type="group")
    wait_for(lambda: server.callback(quiet)["state"] == "acked", 30, 0.05, "the unaddressed message answered 200")
    gateway.wait_log("skipped a group message not addressed to the bot")
    asked = server.message_event(group, member, "text", {"text": "@_user_1 hello"}, chat_type="group",
                                 mentions=(server.bot_mention(),))
    server.deliver(asked)
    [message] = wait_for(lambda: server.messages(group), 60, 0.1, "the answer in the group")
    assert message["via"] == "reply" and message["root_id"] == asked["event"]["message"]["message_id"]
    wait_for(lambda: (o := obligations(gateway, group)) and all(x.state == "delivered" for x in o), 30, 0.1,
             "the answer delivered in the ledger")
    assert len(server.messages(group)) == 1, "the unaddressed message got no answer"


def test_a_streamed_answer_keeps_edits_for_its_final_text_within_the_platforms_twenty(rig):
    harness, gateway = rig
    chat = f"stream-{uuid.uuid4().hex[:6]}"
    chat_id = harness.source(chat).chat_id
    refused_before = harness.server.stats()["edit_cap_refusals"]
    # ~13 s of streaming (65 pieces): far more edit chances than the 20 a message takes, even when a loaded machine
    # makes each edit slow (at 1.3 s a busy run made only 12 edits in all).
    harness.inject(chat, "#long 6000 #slow 0.2")
    wait_for(lambda: (o := obligations(gateway, chat_id)) and all(x.state == "delivered" for x in o), 90, 0.1,
             "the streamed answer delivered in the ledger")
    every = harness.server.messages(chat_id)
    assert len(every) == 1, f"one message, edited to its end: {[(m['edits'], m['deleted']) for m in every]}"
    [message] = every
    assert len(message["text"]) >= 6000 and "▍" not in message["text"], message["text"][-80:]
    assert 18 <= message["edits"] <= 20, f"previews stop at 18, the final text in one of the 2 kept: {message}"
    assert harness.server.stats()["edit_cap_refusals"] == refused_before, "no edit went past the platform's cap"
    assert harness.server.stats()["tokens_issued"] == 1, "one tenant token for every call of the adapter's life"


def test_a_message_in_a_thread_is_its_own_session_answered_in_that_thread(rig):
    harness, gateway = rig
    server, name = harness.server, f"thread-{uuid.uuid4().hex[:6]}"
    group, member, thread = server.group(name), server.user(f"{name}-member"), "omt_" + uuid.uuid4().hex[:16]
    asked = server.message_event(group, member, "text", {"text": "@_user_1 in the thread"}, chat_type="group",
                                 mentions=(server.bot_mention(),), thread_id=thread)
    server.deliver(asked)
    [message] = wait_for(lambda: server.messages(group), 60, 0.1, "the answer in the group")
    assert message["via"] == "reply" and message["in_thread"] is True
    assert message["root_id"] == asked["event"]["message"]["message_id"]
    source = Source(platform="feishu", chat_id=group, chat_type="group", thread_id=thread, user_id=member)
    [row] = wait_for(lambda: rows_of(gateway, source), 30, 0.1, "the thread's own session row")
    assert row.payload["source"]["thread_id"] == thread


def test_a_group_message_before_the_bot_is_known_is_delivered_again_not_skipped(tmp_path):
    harness = FeishuHarness(tmp_path)
    harness.start()
    server = harness.server
    server.bot_info_down = True   # the API is out: the adapter cannot learn its own open_id, callbacks still come
    server.configure(retries=60)
    gateway = Gateway(tmp_path, extra_toml=harness.adapter_toml(), watchdog_interval=30.0)
    try:
        gateway.start()
        gateway.wait_ready()
        harness.callback_ready()
        group, member = server.group("early"), server.user("early-member")
        asked = server.message_event(group, member, "text", {"text": "@_user_1 are you there"}, chat_type="group",
                                     mentions=(server.bot_mention(),))
        handle = server.deliver(asked)
        wait_for(lambda: any(a["status"] == 500 for a in server.callback(handle)["attempts"]), 30, 0.05,
                 "the callback answered 500 while the bot is unknown")
        server.bot_info_down = False
        wait_for(lambda: server.callback(handle)["state"] == "acked", 90, 0.1, "the redelivery stored")
        [message] = wait_for(lambda: server.messages(group), 60, 0.1, "the answer in the group")
        assert message["root_id"] == asked["event"]["message"]["message_id"]
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        harness.stop()


# -------------------------------------------------------------------------- the long connection, in the daemon

def ws_source(chat: str) -> Source:
    return Source(platform=WS_NAME, chat_id=FakeFeishu.p2p_chat(chat), chat_type="dm", user_id=FakeFeishu.user(chat))


def ws_text(ws: FakeFeishu, chat: str, text: str) -> dict:
    return ws.message_event(ws.p2p_chat(chat), ws.user(chat), "text", {"text": text})


def rows_now(gateway: Gateway, source) -> list:
    """The session's rows as they are now: polled only while the database is busy (None), never for a row to
    come, so a row committed after its event was answered is not waited for."""
    return wait_for(lambda: (rows := session_rows(gateway, source)) is not None and [rows], 10, 0.05,
                    "the database to be readable")[0]


def ws_acked(ws: FakeFeishu, handle: str, what: str, timeout: float = 60) -> dict:
    try:
        return wait_for(lambda: (e := ws.ws_event(handle))["status"] == "acked" and e, timeout, 0.05, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the event: {ws.ws_event(handle)['attempts']}, connections: "
                             f"{ws.ws_connections()}, stats: {ws.stats()}") from None


def test_a_long_connection_event_is_answered_after_its_commit_and_its_redelivery_is_one_turn(rig):
    harness, gateway = rig
    ws, chat = harness.ws, f"ws-once-{uuid.uuid4().hex[:6]}"
    event = ws_text(ws, chat, "over the long connection")
    first = ws.queue_ws_event(event)
    ws_acked(ws, first, "the event answered")
    # Answered only after its commit: the row is there the moment the answer is seen.
    assert len(rows_now(gateway, ws_source(chat))) == 1
    again = ws.queue_ws_event(event)   # the platform's redelivery: the same event_id, a new frame
    ws_acked(ws, again, "the redelivery answered")
    chat_id = ws_source(chat).chat_id
    wait_for(lambda: (o := obligations(gateway, chat_id)) and all(x.state == "delivered" for x in o), 60, 0.1,
             "the answer delivered in the ledger")
    assert len(rows_now(gateway, ws_source(chat))) == 1
    assert len(obligations(gateway, chat_id)) == 1, "one turn, one answer"
    assert len(ws.messages(chat_id)) == 1
    # Pings at the platform's PingInterval (1 s), on the connection open now.
    connection = ws.ws_connections()[-1]["id"]
    times = wait_for(lambda: len(t := [p["at"] for p in ws.pings() if p["connection"] == connection]) >= 3 and t,
                     30, 0.1, "three pings on the open connection")
    # On average: one ping delayed by a loaded machine makes the gap after it short, not the pace.
    pace = (times[-1] - times[0]) / (len(times) - 1)
    assert pace >= 0.8, f"pings 1 s apart, as the platform asked: {[b - a for a, b in zip(times, times[1:])]}"
    assert ws.stats()["bad_answers"] == ws.stats()["bad_frames"] == 0


def test_an_event_in_fragments_is_put_together_and_stored_once(rig):
    harness, gateway = rig
    ws, chat = harness.ws, f"ws-parts-{uuid.uuid4().hex[:6]}"
    text = "".join(f"part {i:04d} 你好; " for i in range(400))   # ~6 KB, split into 5 frames mid-character
    handle = ws.queue_ws_event(ws_text(ws, chat, text), fragments=5)
    ws_acked(ws, handle, "the event in fragments answered")
    [row] = rows_now(gateway, ws_source(chat))
    assert row.payload["text"] == text
    assert len(ws.ws_event(handle)["attempts"]) == 1, "put together from the first delivery's fragments"


@pytest.mark.parametrize("how", ["drop", "close"])
def test_an_event_sent_while_the_long_connection_is_down_comes_after_the_reconnect(rig, how):
    harness, gateway = rig
    ws, chat = harness.ws, f"ws-{how}-{uuid.uuid4().hex[:6]}"
    pid = gateway.node(WS_NAME)["pid"]
    opened = len(ws.ws_connections())
    ws.endpoint_down = True   # the platform answers "system busy": no new connection until it is back
    try:
        ws.run(ws.drop_ws() if how == "drop" else ws.close_ws())
        wait_for(lambda: all(c["closed_at"] for c in ws.ws_connections()), 30, 0.05, "the connection closed")
        calls = ws.stats()["endpoint_calls"]
        handle = ws.queue_ws_event(ws_text(ws, chat, "sent while the connection was down"))
        wait_for(lambda: ws.stats()["endpoint_calls"] > calls, 60, 0.05, "the adapter asking for a connection again")
        assert ws.ws_event(handle)["attempts"] == [] and not rows_now(gateway, ws_source(chat))
    finally:
        ws.endpoint_down = False
    ws_acked(ws, handle, "the event answered on a new connection")
    assert len(rows_now(gateway, ws_source(chat))) == 1
    connections = ws.ws_connections()
    assert len(connections) > opened and connections[-1]["closed_at"] is None
    assert gateway.node(WS_NAME)["pid"] == pid, "a lost connection is reconnected, not a crash"


def test_a_kill_9_before_the_commit_leaves_the_event_unanswered_and_it_is_stored_once_after(rig):
    harness, gateway = rig
    ws, chat = harness.ws, f"ws-kill-{uuid.uuid4().hex[:6]}"
    ws.hold_next_answer("resource", ws.p2p_chat(chat))   # the image's download waits: its row is not committed
    image = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    handle = ws.queue_ws_event(ws.image_event(ws.p2p_chat(chat), ws.user(chat), image))
    old = gateway.node(WS_NAME)
    try:
        wait_for(ws.answer_held.is_set, 60, 0.05, "the adapter fetching the image")
        assert ws.ws_event(handle)["status"] == "pending" and not rows_now(gateway, ws_source(chat))
        os.kill(old["pid"], signal.SIGKILL)
        wait_for(lambda: exited(old["pid"]), 15, 0.01, f"the killed adapter process {old['pid']} to exit")
    finally:
        ws.release_held()
    wait_for(lambda: (n := gateway.node(WS_NAME)) and n["pid"] != old["pid"] and n["state"] == "running", 30, 0.05,
             "the adapter back")
    event = ws_acked(ws, handle, "the event answered by the adapter's next life")
    assert len(event["attempts"]) >= 2, "delivered again: the killed life never answered it"
    [row] = rows_now(gateway, ws_source(chat))
    assert [a["kind"] for a in row.payload["attachments"]] == ["photo"]


def test_an_answer_streaming_when_the_long_connection_drops_ends_complete_and_the_next_event_comes(rig):
    harness, gateway = rig
    ws, chat = harness.ws, f"ws-midway-{uuid.uuid4().hex[:6]}"
    chat_id = ws_source(chat).chat_id
    asked = ws.queue_ws_event(ws_text(ws, chat, "a long answer across a drop #long 1500 #slow 0.08"))
    ws_acked(ws, asked, "the question answered")
    wait_for(lambda: ws.messages(chat_id), 60, 0.05, "the answer's first part on the platform")
    ws.run(ws.drop_ws())   # mid-answer: the intake reconnects, the answer's edits go on over HTTP
    after = ws.queue_ws_event(ws_text(ws, chat, "and after the drop"))
    ws_acked(ws, after, "the next event answered on a new connection")
    wait_for(lambda: (o := obligations(gateway, chat_id)) and len(o) == 2 and all(x.state == "delivered" for x in o),
             90, 0.1, "both answers delivered in the ledger")
    first, second = ws.messages(chat_id)
    assert len(first["text"]) >= 1500 and "\u258d" not in first["text"], first["text"][-80:]
    assert len(rows_now(gateway, ws_source(chat))) == 2


def test_twenty_chats_streaming_at_once_end_complete_with_no_rate_limit_violation(rig):
    """The platform's own pacing row (the long-connection app's table overrides none of it): twenty answers
    streaming at once each end as one message showing its whole text, and the fake saw no send past its 5 a second
    per chat (``pacing_violations``), no call inside a 99991400's wait and no edit past the 20 a message."""
    harness, gateway = rig
    ws, tag = harness.ws, uuid.uuid4().hex[:6]
    before = ws.stats()
    chats = [f"ws-twenty-{tag}-{n}" for n in range(20)]
    for chat in chats:   # about 3 s of streaming each
        ws.queue_ws_event(ws_text(ws, chat, f"stream this {chat} #long 700 #slow 0.1"))
    ids = [ws_source(chat).chat_id for chat in chats]
    try:
        wait_for(lambda: all((o := obligations(gateway, chat_id)) and all(x.state == "delivered" for x in o)
                             for chat_id in ids), 180, 0.5, "twenty answers delivered in the ledger")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; messages: {[len(ws.messages(i)) for i in ids]}; stats: {ws.stats()}") from None
    shown = {chat_id: ws.messages(chat_id) for chat_id in ids}
    assert all(len(m) == 1 and len(m[0]["text"]) >= 700 and "\u258d" not in m[0]["text"] for m in shown.values()), {
        i: [(len(x["text"]), x["edits"]) for x in m] for i, m in shown.items()}
    after = ws.stats()
    for count in ("pacing_violations", "retry_after_violations", "edit_cap_refusals"):
        assert after[count] == before[count], (count, after)
