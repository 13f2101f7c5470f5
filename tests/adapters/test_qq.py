"""The QQ official bot API adapter: its pure parts (dispatches -> MessageEvent and the chat's send endpoint, what
is skipped, msg_seq from the send's key, the anchors and the reply book the offset keeps, the gateway's close
codes, the token cache against the fake), and in the real daemon against the fake QQ (one daemon for the module):
a group's @-message and a guild channel's answered as passive replies; a reply in more parts than a message takes
passive replies arriving whole (the rest as active messages); the active-message quota used up failing the send
and shown in `status` until one goes; a send repeated under the same key by another operation (a new life's) shows
once and is answered with the same id; a revoked token fetched again once, not per send; the gateway dropped and
away for a while resumed without a second Identify, what came meanwhile stored once; a frame that is no JSON
logged and nothing after it lost; a user's image and file fetched without the token and cached before the row, one
QQ says is over the cap never fetched; an image to a group as rich media (shown once when repeated under its key)
and to a guild channel in the send; a document to a user as a file, refused in a guild channel; markdown, and plain
text once QQ refuses it (a second bot table, markdown on, taking no events); a guild send repeated after its answer
was lost, or of an ambiguous reply, under the re-sent mark. The conformance suite runs the same adapter
(tests/adapters/harnesses/qq.py). One file for all of them, over the usual length, so that one daemon serves them.
"""
from __future__ import annotations

import asyncio
import json
import re
import uuid

import pytest

from actors.adapters.errors import PermanentError
from actors.adapters.pacing import DEFAULT_RESENT_MARKER as RESENT_MARKER
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.qq.client import QQClient
from actors.adapters.qq.gateway import QQGatewayLink
from actors.adapters.qq.inbound import attachments_of, event_from_dispatch, is_input, send_route
from actors.adapters.qq.replies import Anchors, ReplyBook, msg_seq, usable
from actors.adapters.qq.webhook import signature_ok, signing_key, validation_answer
from actors.messages import OpResult, OutgoingFile, PlatformOp, Source
from common import config as config_mod
from daemon.admin import AdminClient
from daemon.asking import ask_for
from storage import MediaCache, Store, StorageError, Target, session_key
from tests.actors.media.fixtures import png
from tests.actor_system import wait_for
from tests.fakes.qq import APP_ID, APP_SECRET, BOT_ID, FakeQQ, openid
from tests.fakes.qq.server import guild_number
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(120)


# ------------------------------------------------------------------------------------------------ pure parts

def test_each_message_dispatch_maps_to_its_chat_and_its_send_endpoint():
    c2c = event_from_dispatch("C2C_MESSAGE_CREATE", {"id": "ROBOT1.0_a", "author": {"user_openid": "U1"},
                                                     "content": "hi", "timestamp": "2026-12-06T22:00:00+08:00"},
                              "qq", "default")
    assert (c2c.source.chat_id, c2c.source.chat_type, c2c.source.user_id, c2c.platform_message_id) == \
        ("c2c:U1", "dm", "U1", "ROBOT1.0_a")
    assert c2c.sent_at == 1796565600.0
    group = event_from_dispatch("GROUP_AT_MESSAGE_CREATE", {"id": "m2", "author": {"member_openid": "M1"},
                                                            "group_openid": "G1", "content": " status?"},
                                "qq", "default")
    assert (group.source.chat_id, group.source.chat_type, group.text) == ("group:G1", "group", "status?")
    channel = event_from_dispatch("AT_MESSAGE_CREATE", {"id": "m3", "author": {"id": "42", "username": "bob"},
                                                        "channel_id": "7", "guild_id": "9",
                                                        "content": f"<@!{BOT_ID}> ping"}, "qq", "default", BOT_ID)
    assert (channel.source.chat_id, channel.source.community, channel.source.user_name, channel.text) == \
        ("channel:7", "9", "bob", "ping")
    dm = event_from_dispatch("DIRECT_MESSAGE_CREATE", {"id": "m4", "author": {"id": "42"}, "guild_id": "55",
                                                       "channel_id": "8", "content": "psst"}, "qq", "default")
    assert (dm.source.chat_id, dm.source.chat_type) == ("dms:55", "dm")
    assert session_key(c2c.source) != session_key(group.source)
    assert [send_route(c)[1:] for c in ("c2c:U1", "group:G1", "channel:7", "dms:55")] == [
        ("send_c2c", "/v2/users/U1/messages"), ("send_group", "/v2/groups/G1/messages"),
        ("send_channel", "/channels/7/messages"), ("send_dm", "/dms/55/messages")]
    for bad in ("c2c:", "telegram:5", "c2c:a/b", "group:x y"):
        with pytest.raises(ValueError):
            send_route(bad)


def test_what_is_skipped_and_what_is_malformed():
    person = {"id": "m", "author": {"id": "42"}, "content": "hi", "channel_id": "7", "guild_id": "9"}
    assert is_input("AT_MESSAGE_CREATE", person, BOT_ID, True)
    assert not is_input("MESSAGE_REACTION_ADD", person, BOT_ID, True)
    assert not is_input("AT_MESSAGE_CREATE", dict(person, author={"id": BOT_ID}), BOT_ID, True), "the bot's own"
    assert not is_input("AT_MESSAGE_CREATE", dict(person, author={"id": "5", "bot": True}), BOT_ID, True)
    assert not is_input("MESSAGE_CREATE", person, BOT_ID, True), "a private-domain channel message not mentioning"
    assert is_input("MESSAGE_CREATE", dict(person, mentions=[{"id": BOT_ID}]), BOT_ID, True)
    assert is_input("MESSAGE_CREATE", person, BOT_ID, False)
    assert is_input("C2C_MESSAGE_CREATE", "not an object", BOT_ID, True), "refused loudly by normalise"
    for data, reason in (("x", "not an object"), ({"author": {"user_openid": "U"}, "content": "a"}, "message id"),
                         ({"id": "m", "author": {"user_openid": "U"}, "content": 42}, "content must be a string"),
                         ({"id": "m", "author": {}, "content": "a"}, "the author has no id")):
        with pytest.raises(MalformedPayload, match=reason):
            event_from_dispatch("C2C_MESSAGE_CREATE", data, "qq", "default")
    with pytest.raises(MalformedPayload, match="group_openid"):
        event_from_dispatch("GROUP_AT_MESSAGE_CREATE", {"id": "m", "author": {"member_openid": "M"},
                                                        "content": "a"}, "qq", "default")


def test_a_messages_files_become_pending_attachments_named_by_their_urls():
    data = {"id": "m", "author": {"user_openid": "U"}, "content": "", "attachments": [
        {"content_type": "image/jpeg", "url": "https://multimedia.nt.qq.com.cn/x?rkey=1", "filename": "a.jpg",
         "size": 2048, "width": 640, "height": 480},
        {"content_type": "voice", "url": "gchat.qpic.cn/qmeetpic/v.silk", "filename": "v.silk", "size": 9},
        {"content_type": "file", "url": "https://example.qq.com/f", "filename": "notes.txt", "size": "12"},
        {"content_type": "video/mp4", "url": "ftp://somewhere/v.mp4"}, "junk"]}
    event = event_from_dispatch("C2C_MESSAGE_CREATE", data, "qq", "default")
    photo, voice, document = event.attachments
    assert (photo.kind, photo.ref, photo.name, photo.size, photo.width, photo.state) == \
        ("photo", "https://multimedia.nt.qq.com.cn/x?rkey=1", "a.jpg", 2048, 640, "pending")
    assert (voice.kind, voice.ref) == ("audio", "https://gchat.qpic.cn/qmeetpic/v.silk"), "no scheme: https"
    assert (document.kind, document.name, document.size) == ("document", "notes.txt", 0), "a size that is no number"
    assert event.text == "[a video that could not be taken]", "the reader learns something came"
    many, notes = attachments_of({"attachments": [{"content_type": "image/png", "url": f"https://q/{i}"}
                                                  for i in range(12)]})
    assert len(many) == 10 and len(notes) == 2, "bounded per message"


def test_msg_seq_is_the_keys_in_every_life_and_increases_over_a_replys_parts():
    parts = [msg_seq(f"0123456789abcdef.{i}") for i in range(4)]
    assert parts == [msg_seq(f"0123456789abcdef.{i}") for i in range(4)], "the same key, the same msg_seq"
    assert parts == sorted(parts) and len(set(parts)) == 4 and parts[1] == parts[0] + 1
    assert msg_seq("fedcba9876543210.0") != parts[0], "another reply, another msg_seq"
    for key in ("0123456789abcdef.0", "a" * 32, "x.999999", ""):
        assert 1 <= msg_seq(key) <= 2 ** 30


def test_anchors_survive_the_offset_bounded_and_a_window_ends():
    anchors = Anchors(kept=3)
    for i in range(5):
        anchors.note(f"c2c:U{i}", f"m{i}", 1000.0 + i)
    anchors.note("c2c:U2", "m2b", 2000.0)
    again = Anchors.from_offset({"session_id": "s", "seq": 4, "anchors": anchors.as_offset()}, kept=3)
    assert again.as_offset() == [["c2c:U3", "m3", 1003.0], ["c2c:U4", "m4", 1004.0], ["c2c:U2", "m2b", 2000.0]]
    assert Anchors.from_offset({"anchors": [["c", 5, 1.0], "junk"]}).as_offset() == []
    assert usable("c2c", 0.0, 3000.0) and not usable("c2c", 0.0, 3590.0)
    assert usable("group", 0.0, 200.0) and not usable("group", 0.0, 290.0)


def test_the_reply_book_counts_passive_replies_per_message_and_survives_the_offset():
    book = ReplyBook(per_message=3, kept=2)
    assert [book.take("m1", seq) for seq in (11, 12, 13)] == [(True, True)] * 3
    assert book.take("m1", 14) == (False, False), "the count is used up: the part goes active"
    assert book.take("m1", 12) == (True, False), "a repeat goes passive again, to be refused as a duplicate"
    again = ReplyBook.from_offset({"seq": 3, "replies": book.as_offset()}, per_message=3, kept=2)
    assert again.take("m1", 14) == (False, False) and again.count("m1") == 3
    assert again.take("m2", 1) == (True, True) and again.used_up("m2") and not again.used_up("m2")
    assert again.take("m2", 2) == (False, False) and again.take("m2", 1) == (True, False)
    again.take("m3", 1)
    assert [row[0] for row in again.as_offset()] == ["m2", "m3"], "bounded: the least recently answered goes"
    assert ReplyBook.from_offset({"replies": [["m", [1, "x", True]], "junk", [5, []]]}).as_offset() == [["m", [1]]]


def test_the_gateways_close_codes():
    dropped = []
    link = QQGatewayLink(None, lambda: dropped.append(True), 0, "ws://x", lambda *a: None)
    link.session_id, link.seq = "s", 5
    assert link._closed(4009) == "closed with 4009" and link.session_id == "s", "timed out: resumed"
    assert "token was refused" in link._closed(4004) and dropped == [True] and link.session_id == "s"
    link._closed(4006)
    assert link.session_id is None, "a session QQ no longer has is forgotten: Identify afresh"
    for code, words in ((4914, "offline or sandbox-only"), (4915, "banned"), (4014, "intents not granted")):
        with pytest.raises(PermanentError, match=words):
            link._closed(code)
    assert link.address("wss://api.sgroup.qq.com/websocket/") == "wss://api.sgroup.qq.com/websocket/"


def test_the_token_is_fetched_once_refreshed_before_it_expires_and_again_when_revoked():
    now = [0.0]
    with FakeQQ(token_lifetime_s=600.0) as fake:
        chat = f"c2c:{openid('tok')}"

        async def scenario():
            client = QQClient(APP_ID, APP_SECRET, fake.api_url, fake.token_url, clock=lambda: now[0])
            try:
                for i in range(5):
                    await client.send("send_c2c", f"/v2/users/{openid('tok')}/messages", {"content": f"m{i}"})
                first = fake.stats()["token_fetches"]
                now[0] = 600.0 - 61.0             # a minute and a second before it expires: still the same
                await client.gateway_url()
                same = fake.stats()["token_fetches"]
                now[0] = 600.0 - 59.0             # inside the last minute: a new one before it is used
                await client.gateway_url()
                refreshed = fake.stats()["token_fetches"]
                fake.expire_tokens()              # revoked early: the call is made once more with a new one
                await client.send("send_c2c", f"/v2/users/{openid('tok')}/messages", {"content": "after"})
                return first, same, refreshed, fake.stats()["token_fetches"]
            finally:
                await client.close()
        assert asyncio.run(scenario()) == (1, 1, 2, 3)
        assert [m["text"] for m in fake.sent(chat)] == ["m0", "m1", "m2", "m3", "m4", "after"]
        assert [o["status"] for o in fake.ops(chat)] == [200] * 5 + [401, 200]
        bad = QQClient(APP_ID, "not-the-secret", fake.api_url, fake.token_url)
        with pytest.raises(PermanentError, match="invalid appid or secret") as refused:
            asyncio.run(bad.token.get())
        assert "not-the-secret" not in str(refused.value)


def test_the_webhook_key_comes_from_the_secret_and_the_validation_signs_only_what_qq_sends():
    key = signing_key("abc")    # "abc" repeated: "abcabc...", its first 32 bytes the seed
    assert key.public_key().public_bytes_raw() == \
        signing_key("abcabcabcabcabcabcabcabcabcabcab").public_key().public_bytes_raw()
    body = b'{"op":0,"t":"C2C_MESSAGE_CREATE","d":{}}'
    good = key.sign(b"1733384468" + body).hex()
    assert signature_ok(key, "1733384468", body, good)
    assert not signature_ok(key, "1733384469", body, good), "another timestamp"
    assert not signature_ok(key, "1733384468", body + b" ", good), "another body"
    assert not signature_ok(signing_key("another secret"), "1733384468", body, good)
    assert not signature_ok(key, None, body, good) and not signature_ok(key, "1", body, "zz-not-hex")
    answer = validation_answer(key, {"plain_token": "Arq0D5A61EgUu4OxUvOp", "event_ts": "1725442341"})
    key.public_key().verify(bytes.fromhex(answer["signature"]), b"1725442341Arq0D5A61EgUu4OxUvOp")
    # What would let a caller have an event body signed is no validation
    forged = {"plain_token": body.decode(), "event_ts": "1733384468"}
    assert validation_answer(key, forged) is None
    assert validation_answer(key, {"plain_token": "abc", "event_ts": "17x"}) is None
    assert validation_answer(key, "nothing") is None


# ---------------------------------------------------------------------------------------------- the daemon

class Daemon:
    def __init__(self, fake: FakeQQ, gateway: Gateway, admin: AdminClient):
        self.fake, self.gateway, self.admin = fake, gateway, admin

    def ref(self, name: str = "qq"):
        def find():
            stack = [self.admin.tree()]
            while stack:
                node = stack.pop()
                if node.name == name and node.ref is not None:
                    return node.ref
                stack.extend(node.children)
            return None
        return wait_for(find, 30, 0.1, f"the {name} adapter's address")

    def op(self, op: PlatformOp, adapter: str = "qq") -> OpResult:
        result = ask_for(self.admin.asys, self.ref(adapter), op, OpResult, 30)
        assert result is not None and result.op_id == op.op_id, f"no OpResult for {op}"
        return result

    def rows(self, source: Source):
        async def read():
            async with await Store.open(self.gateway.state / "gateway.db") as store:
                return await store.inbox.rows_in_state(session_key(source), ("received", "taken", "done", "dropped"))
        try:
            return asyncio.run(read())
        except StorageError:
            return None


def c2c(user: str) -> Source:
    return Source(platform="qq", chat_id=f"c2c:{openid(user)}", chat_type="dm", user_id=openid(user))


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("qq")
    fake = FakeQQ(state_file=str(workdir / "qq.json"), heartbeat_interval_ms=2000).start()
    table = (f'[adapters.qq]\ntype = "qq"\naccess = "open"\napp_id = "{APP_ID}"\napp_secret = "{APP_SECRET}"\n'
             f'api_base_url = "{fake.api_url}"\nauth_url = "{fake.token_url}"\n'
             'pacing = { per_chat_ops_per_s = 10.0, per_chat_burst = 10 }\n'
             # A second bot table with markdown on, in webhook mode with no callback URL at the fake: it takes no
             # events (the first one answers them), it only sends what a test hands it.
             f'[adapters.qqmd]\ntype = "qq"\naccess = "open"\napp_id = "{APP_ID}"\napp_secret = "{APP_SECRET}"\n'
             f'api_base_url = "{fake.api_url}"\nauth_url = "{fake.token_url}"\nmode = "webhook"\nlisten_port = 0\n'
             'markdown = true\npacing = { per_chat_ops_per_s = 10.0, per_chat_burst = 10 }\n')
    gateway = Gateway(workdir, watchdog_interval=30.0, extra_toml=table)
    with pytest.MonkeyPatch.context() as env:
        try:
            gateway.start()
            gateway.wait_ready()
            env.setenv("GATEWAY_STATE_DIR", str(gateway.state))   # AdminClient finds the daemon through it
            wait_for(fake.established, 60, 0.1, "the adapter's gateway session")
            yield Daemon(fake, gateway, AdminClient(config_mod.load(str(gateway.config))))
        finally:
            gateway.cli("stop")
            gateway.kill_everything()
            fake.stop()


def test_a_group_at_message_and_a_guild_channel_message_are_answered_as_passive_replies(daemon):
    fake = daemon.fake
    asked = fake.inject_group("team", "dave", "are you there?")
    chat = f"group:{openid('team')}"
    answer = wait_for(lambda: fake.sent(chat), 60, 0.1, "the answer in the group")
    assert answer[0]["msg_id"] == asked["id"] and isinstance(answer[0]["msg_seq"], int), answer
    said = fake.inject_channel("general", "erin", "hello bot")
    channel = f"channel:{guild_number('general')}"
    answer = wait_for(lambda: fake.sent(channel), 60, 0.1, "the answer in the guild channel")
    assert answer[0]["msg_id"] == said["id"] and answer[0]["msg_seq"] is None, "guild channels take msg_id only"


def test_a_send_repeated_under_its_key_by_another_operation_shows_once_with_the_same_id(daemon):
    """What a new life of the daemon does with a reply's part whose answer was lost: another op id, the same key.
    QQ refuses the msg_id + msg_seq pair as a duplicate; the adapter answers with the id of the message the first
    send made."""
    fake, user = daemon.fake, f"again-{uuid.uuid4().hex[:6]}"
    asked = fake.inject_c2c(user, "a question")
    wait_for(lambda: fake.sent(c2c(user).chat_id), 60, 0.1, "the agent's own answer first")
    key = f"{uuid.uuid4().hex[:16]}.0"
    ops = [PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=c2c(user).chat_id, text="the reply",
                      reply_to=asked["id"], idempotency_key=key) for _ in range(2)]
    first, second = daemon.op(ops[0]), daemon.op(ops[1])
    assert first.ok and second.ok, (first, second)
    assert first.message_id == second.message_id == f"{asked['id']}#{msg_seq(key)}"
    assert [m["text"] for m in fake.sent(c2c(user).chat_id)].count("the reply") == 1
    # (the agent's own answer may still be going out in parts meanwhile: each of its sends is a 200)
    assert [o["status"] for o in fake.ops(c2c(user).chat_id)].count(400) == 1, "the repeat refused by QQ"


def test_a_reply_in_more_parts_than_a_message_takes_passive_replies_arrives_whole(daemon):
    """QQ takes 5 passive replies per user message (the fake refuses a 6th with 40034128): the parts past the count
    go as active messages, and none is refused."""
    fake, user = daemon.fake, f"long-{uuid.uuid4().hex[:6]}"
    chat = c2c(user).chat_id
    asked = fake.inject_c2c(user, "tell me everything")
    wait_for(lambda: fake.sent(chat), 60, 0.1, "the agent's own answer first")
    reply = uuid.uuid4().hex[:16]
    texts = [f"part {i} of the long answer" for i in range(7)]
    for i, text in enumerate(texts):
        result = daemon.op(PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=chat, text=text,
                                      reply_to=asked["id"] if i == 0 else None, idempotency_key=f"{reply}.{i}"))
        assert result.ok, (i, result)
    sent = [m for m in fake.sent(chat) if m["text"] in texts]
    assert [m["text"] for m in sent] == texts, sent
    passive = [m for m in fake.sent(chat) if m["msg_id"] == asked["id"]]
    assert len(passive) == 5 and [m["msg_id"] for m in sent[-2:]] == [None, None], fake.sent(chat)
    assert 400 not in [o["status"] for o in fake.ops(chat)], fake.ops(chat)


def test_the_active_message_quota_used_up_fails_the_send_and_shows_in_status_until_one_goes(daemon):
    fake, chat = daemon.fake, c2c(f"quota-{uuid.uuid4().hex[:6]}").chat_id   # no message to answer: active
    fake.active_quota_used_up = True
    try:
        refused = daemon.op(PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=chat, text="news"))
        assert not refused.ok and "active-message quota is used up" in refused.error, refused
        shown = daemon.gateway.cli("status").stdout
        assert "active-message quota used up" in shown, shown
    finally:
        fake.active_quota_used_up = False
    assert daemon.op(PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=chat, text="news again")).ok
    shown = daemon.gateway.cli("status").stdout
    assert "active-message quota used up" not in shown, shown


def test_a_revoked_token_is_fetched_again_once_and_not_per_send(daemon):
    fake, user = daemon.fake, f"tok-{uuid.uuid4().hex[:6]}"
    before = fake.stats()["token_fetches"]
    fake.expire_tokens()
    for i in range(8):
        assert daemon.op(PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=c2c(user).chat_id,
                                    text=f"message {i}")).ok
    # One fetch for the sends; a second only if the gateway reconnected meanwhile (its Resume refused with the
    # revoked token, 4004), never one per send.
    assert 1 <= fake.stats()["token_fetches"] - before <= 2, fake.stats()
    assert [m["text"] for m in fake.sent(c2c(user).chat_id)] == [f"message {i}" for i in range(8)]


def test_a_dropped_gateway_away_for_a_while_is_resumed_and_what_came_meanwhile_is_stored_once(daemon):
    fake, user = daemon.fake, f"resume-{uuid.uuid4().hex[:6]}"
    before = fake.stats()
    fake.refusing = True
    try:
        fake.close_sessions(4009)
        wait_for(lambda: fake.refused >= 1 and not fake.established(), 60, 0.1, "the adapter's reconnection refused")
        meanwhile = [fake.inject_c2c(user, f"while away {i}") for i in range(3)]
    finally:
        fake.refusing = False
    wait_for(fake.established, 60, 0.1, "the adapter back on the gateway")
    wait_for(lambda: (r := daemon.rows(c2c(user))) and len(r) >= 3 and r, 60, 0.1, "the 3 messages stored")
    after = fake.stats()
    assert after["identifies"] == before["identifies"], "resumed: no second Identify"
    assert after["resumes"] > before["resumes"]
    fake.replay(meanwhile[0]["id"])      # and one of them dispatched again: still one row
    marker = fake.inject_c2c(user, "after the replay")
    wait_for(lambda: (r := daemon.rows(c2c(user))) and len(r) >= 4, 60, 0.1, "the message after the replay")
    ids = [r.platform_message_id for r in daemon.rows(c2c(user))]
    assert ids == [m["id"] for m in meanwhile] + [marker["id"]], ids
    shown = daemon.gateway.cli("status").stdout
    assert re.search(r"gateway: \d+ identify, [1-9]\d* resume\(s\) by this life", shown), shown


def test_a_frame_that_is_no_json_is_logged_and_nothing_after_it_is_lost(daemon):
    fake, user = daemon.fake, f"garbled-{uuid.uuid4().hex[:6]}"
    fake.send_garbled("{this is not json")
    sent = fake.inject_c2c(user, "after the garbage")
    rows = wait_for(lambda: daemon.rows(c2c(user)), 60, 0.1, "the message after the garbled frame")
    assert [r.platform_message_id for r in rows] == [sent["id"]]
    wait_for(lambda: "no JSON object" in daemon.gateway.log(), 30, 0.1, "the garbled frame logged")


def test_doctor_asks_for_a_token_and_the_gateway():
    from actors.adapters import registry
    from daemon.doctor_probes import probe_qq
    with FakeQQ() as fake:
        table = {"type": "qq", "app_id": APP_ID, "api_base_url": fake.api_url, "auth_url": fake.token_url}
        ok = asyncio.run(probe_qq("qq", registry.validate_adapter("qq", dict(table, app_secret=APP_SECRET))))
        assert ok.status == "ok" and fake.gateway_url in ok.detail, ok
        bad = asyncio.run(probe_qq("qq", registry.validate_adapter("qq", dict(table, app_secret="wrong-secret-9"))))
        assert bad.status == "fail" and "QQ refused the app id and secret" in bad.detail, bad
        assert "wrong-secret-9" not in bad.detail


def served_url(gateway: Gateway):
    """The adapter's callback URL as ``status --json`` shows it (None until it listens)."""
    shown = gateway.cli("status", "--json").stdout
    rows = json.loads(shown).get("adapters", []) if shown.startswith("{") else []
    return next((r["url"] for r in rows if r.get("name") == "qq" and r.get("url")), None)


def test_webhook_mode_answers_the_validation_refuses_a_bad_signature_and_stores_a_signed_event_once(tmp_path):
    fake = FakeQQ(state_file=str(tmp_path / "qq.json")).start()
    table = (f'[adapters.qq]\ntype = "qq"\naccess = "open"\napp_id = "{APP_ID}"\napp_secret = "{APP_SECRET}"\n'
             f'api_base_url = "{fake.api_url}"\nauth_url = "{fake.token_url}"\nmode = "webhook"\n'
             'listen_port = 0\n')
    gateway = Gateway(tmp_path, watchdog_interval=30.0, extra_toml=table)
    try:
        gateway.start()
        gateway.wait_ready()
        fake.callback_url = wait_for(lambda: served_url(gateway), 60, 0.2, "the callback server's URL in status")
        status, answer = fake.validate_callback("Arq0D5A61EgUu4OxUvOp", "1725442341")
        assert status == 200 and answer["plain_token"] == "Arq0D5A61EgUu4OxUvOp", (status, answer, fake.callback_url)
        fake.signing_key().public_key().verify(bytes.fromhex(answer["signature"]), b"1725442341Arq0D5A61EgUu4OxUvOp")
        user = "hooked"
        forged = {"op": 0, "id": "C2C_MESSAGE_CREATE:x", "s": 1, "t": "C2C_MESSAGE_CREATE",
                  "d": {"id": "ROBOT1.0_forged", "author": {"user_openid": openid(user)}, "content": "forged"}}
        body = json.dumps(forged).encode()
        assert fake.post_callback(body, signature=signing_key("not the secret").sign(b"1" + body).hex(),
                                  timestamp="1")[0] == 401
        assert fake.post_callback(body, signed=False)[0] == 401
        sent = fake.inject_c2c(user, "over the webhook")
        assert fake.callback_answers[-1] == (200, {"op": 12, "d": 0}), fake.callback_answers
        fake.replay(sent["id"])
        assert fake.callback_answers[-1][0] == 200
        wait_for(lambda: fake.sent(c2c(user).chat_id), 60, 0.1, "the answer to the signed event")
        rows = Daemon(fake, gateway, None).rows(c2c(user))
        assert [r.platform_message_id for r in rows] == [sent["id"]], "the signed event once; the forged one never"
        assert [m["msg_id"] for m in fake.sent(c2c(user).chat_id)] == [sent["id"]]
        said = fake.inject_channel("hooks", "erin", "and in a guild")   # the bot's id from /users/@me: mention gone
        channel = Source(platform="qq", chat_id=f"channel:{guild_number('hooks')}", chat_type="group",
                         user_id=guild_number("erin"), user_name="erin", community=guild_number("guild"))
        [row] = wait_for(lambda: Daemon(fake, gateway, None).rows(channel), 30, 0.1, "the guild message stored")
        assert row.platform_message_id == said["id"] and row.payload["text"] == "and in a guild", row.payload
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        fake.stop()


# ------------------------------------------------------------------------------------------ files, markdown

def outgoing(daemon, data: bytes, mime: str, kind: str, name: str, caption: str = "") -> OutgoingFile:
    return OutgoingFile(MediaCache(daemon.gateway.state / "media").put(data), mime, kind, name, caption, len(data))


def test_a_users_image_and_file_are_fetched_without_the_token_and_cached_before_the_row(daemon):
    fake, group = daemon.fake, f"pics-{uuid.uuid4().hex[:6]}"
    image, notes = png(40, 30), b"the minutes of the meeting\n"
    fake.inject_group(group, "frank", "look at these", attachments=[
        fake.attachment(image, "image/png", "shot.png"), fake.attachment(notes, "file", "minutes.txt")])
    source = Source(platform="qq", chat_id=f"group:{openid(group)}", chat_type="group",
                    user_id=openid(f"{group}/frank"))
    [row] = wait_for(lambda: daemon.rows(source), 60, 0.1, "the group message with its files stored")
    photo, document = row.payload["attachments"]
    assert (photo["state"], photo["kind"], photo["mime"], photo["width"]) == ("cached", "photo", "image/png", 40), \
        photo
    assert (document["state"], document["kind"], document["name"]) == ("cached", "document", "minutes.txt"), document
    cache = MediaCache(daemon.gateway.state / "media")
    assert cache.read(photo["cache_key"]) == image and cache.read(document["cache_key"]) == notes
    assert row.payload["text"] == "look at these"


def test_a_file_qq_says_is_over_the_cap_is_never_fetched_and_its_sender_is_told(daemon):
    fake, user = daemon.fake, f"big-{uuid.uuid4().hex[:6]}"
    before = fake.media_fetches
    fake.inject_c2c(user, "a big one", attachments=[fake.attachment(b"x" * 64, "video/mp4", "film.mp4",
                                                                    size=21 * 1024 * 1024)])
    told = wait_for(lambda: fake.sent(c2c(user).chat_id), 60, 0.1, "the sender told the file is too large")
    assert "film.mp4" in told[0]["text"] and "20 MB" in told[0]["text"], told
    assert fake.media_fetches == before and not daemon.rows(c2c(user)), "nothing fetched, no row stored"


def test_an_image_goes_to_a_group_as_a_passive_rich_media_reply_once_and_to_a_guild_channel_in_the_send(daemon):
    fake, group = daemon.fake, f"out-{uuid.uuid4().hex[:6]}"
    chat = f"group:{openid(group)}"
    asked = fake.inject_group(group, "gina", "draw me something")
    wait_for(lambda: fake.sent(chat), 60, 0.1, "the agent's own answer first")
    file, key = outgoing(daemon, png(48, 32), "image/png", "photo", "dot.png", "a dot"), f"{uuid.uuid4().hex[:16]}.1"
    results = [daemon.op(PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=chat, file=file,
                                    idempotency_key=key)) for _ in range(2)]   # a new life's repeat: another op id
    assert all(r.ok for r in results) and results[0].message_id == results[1].message_id == \
        f"{asked['id']}#{msg_seq(key)}", results
    [shown] = [m for m in fake.sent(chat) if m.get("file")]
    assert (shown["file"]["file_type"], shown["file"]["sha256"], shown["file"]["srv_send_msg"]) == \
        ("image", file.cache_key, False), shown
    assert (shown["msg_id"], shown["msg_seq"], shown["text"]) == (asked["id"], msg_seq(key), "a dot"), shown
    said = fake.inject_channel(f"art-{group}", "gina", "and here?")
    channel = f"channel:{guild_number(f'art-{group}')}"
    wait_for(lambda: fake.sent(channel), 60, 0.1, "the agent's own answer in the channel first")
    sent = daemon.op(PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=channel, file=file))
    assert sent.ok, sent
    [shown] = [m for m in fake.sent(channel) if m.get("file")]
    assert (shown["file"]["sha256"], shown["msg_id"], shown["text"], shown["id"]) == \
        (file.cache_key, said["id"], "a dot", sent.message_id), shown


def test_a_document_goes_to_a_user_as_a_file_and_a_guild_channel_refuses_it_before_sending(daemon):
    fake, user = daemon.fake, f"doc-{uuid.uuid4().hex[:6]}"
    report = outgoing(daemon, b"%PDF-1.4\n% the report\n", "application/pdf", "document", "report.pdf")
    sent = daemon.op(PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=c2c(user).chat_id, file=report))
    assert sent.ok, sent
    [shown] = fake.sent(c2c(user).chat_id)
    assert (shown["file"]["file_type"], shown["file"]["name"], shown["file"]["sha256"], shown["text"]) == \
        ("file", "report.pdf", report.cache_key, ""), shown
    channel = f"channel:{guild_number('docs-' + user)}"
    refused = daemon.op(PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=channel, file=report))
    assert not refused.ok and refused.error_kind == "permanent" and "images only" in refused.error, refused
    assert fake.ops(channel) == [], "nothing was sent"


def test_markdown_goes_where_qq_allows_it_and_plain_text_once_qq_refuses_it(daemon):
    fake, user = daemon.fake, f"md-{uuid.uuid4().hex[:6]}"
    chat = c2c(user).chat_id
    first = daemon.op(PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=chat, text="**bold** news"), "qqmd")
    assert first.ok and fake.sent(chat)[-1]["markdown"] is True and fake.sent(chat)[-1]["text"] == "**bold** news"
    asked = fake.inject_c2c(user, "a question")   # answered passively by the first bot; the markdown bot too, below
    fake.markdown_allowed = False
    try:
        key = f"{uuid.uuid4().hex[:16]}.0"
        refused = daemon.op(PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=chat, text="**plain** now",
                                       reply_to=asked["id"], idempotency_key=key), "qqmd")
        assert refused.ok and refused.message_id == f"{asked['id']}#{msg_seq(key)}", refused
        shown = [m for m in fake.sent(chat) if m["text"] == "**plain** now"]
        assert len(shown) == 1 and "markdown" not in shown[0] and shown[0]["msg_seq"] == msg_seq(key), shown
        assert [o["status"] for o in fake.ops(chat)].count(400) == 1, "QQ refused the markdown once"
        later = daemon.op(PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=chat, text="later"), "qqmd")
        assert later.ok and "markdown" not in fake.sent(chat)[-1], fake.sent(chat)[-1]
        assert [o["status"] for o in fake.ops(chat)].count(400) == 1, "later sends go plain without asking again"
    finally:
        fake.markdown_allowed = True
    shown = daemon.gateway.cli("status").stdout
    assert "markdown refused in c2c chats" in shown, shown


# ------------------------------------------------------------------------------- guild channels: no key to repeat

def test_a_guild_send_whose_answer_was_lost_goes_again_under_the_resent_mark(daemon):
    """Guild channels deduplicate nothing: the kit repeats a keyed send whose answer was lost, and that copy says
    it is re-sent rather than showing twice unmarked."""
    fake, name = daemon.fake, f"lost-{uuid.uuid4().hex[:6]}"
    said = fake.inject_channel(name, "hana", "hello?")
    channel = f"channel:{guild_number(name)}"
    wait_for(lambda: fake.sent(channel), 60, 0.1, "the agent's own answer first")
    fake.lose_answer_in.add(channel)
    sent = daemon.op(PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=channel, text="the answer",
                                reply_to=said["id"], idempotency_key=f"{uuid.uuid4().hex[:16]}.0"))
    assert sent.ok, sent
    copies = [m["text"] for m in fake.sent(channel) if m["text"].endswith("the answer")]
    assert copies == ["the answer", f"{RESENT_MARKER}\nthe answer"], copies


def test_an_ambiguous_reply_marks_its_first_guild_part_sent_by_this_life_and_no_other(daemon):
    fake, name = daemon.fake, f"amb-{uuid.uuid4().hex[:6]}"
    channel = f"channel:{guild_number(name)}"
    source = Source(platform="qq", chat_id=channel, chat_type="group", user_id=guild_number("ivy"))

    async def ambiguous_reply():   # what a claim does on finding an earlier owner's send unresolved
        async with await Store.open(daemon.gateway.state / "gateway.db") as store:
            ob = await store.ledger.record_obligation(session_key(source), f"m-{name}", Target("qq", channel),
                                                      "two parts", chunks=["first", "second"], claim=True)
            await store.ledger.mark_ambiguous(ob.obligation_id, ob.fence)
            return ob.obligation_id, ob.fence
    oid, fence = asyncio.run(ambiguous_reply())
    for index, text in enumerate(("first", "second")):
        result = daemon.op(PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=channel, text=text,
                                      idempotency_key=f"{oid[:16]}.{index}", ledger=(oid, fence, index)))
        assert result.ok, result
    assert [m["text"] for m in fake.sent(channel)] == [f"{RESENT_MARKER}\nfirst", "second"], fake.sent(channel)
