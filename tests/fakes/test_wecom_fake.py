"""The fake WeCom on its own: its cryptography, the server API's answers, and callbacks delivered and retried the way
WeCom's documentation describes, against a small receiver written here (no gateway)."""
from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import urllib.request
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from aiohttp import web

from tests.fakes.wecom import DEFAULT_AGENT_ID, DEFAULT_CORP_ID, DEFAULT_SECRET, NO_SUCH_MSGID, FakeWeCom
from tests.fakes.wecom import crypto
from tests.fakes.wecom.callbacks import message_xml

pytestmark = pytest.mark.timeout(60)


def call(fake: FakeWeCom, path: str, body=None, **query) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{fake.base_url}{path}?{urlencode(query)}", data=data,
                                     method="GET" if body is None else "POST")
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())


def token(fake: FakeWeCom) -> str:
    return call(fake, "/cgi-bin/gettoken", corpid=DEFAULT_CORP_ID, corpsecret=DEFAULT_SECRET)["access_token"]


def send(fake: FakeWeCom, access_token: str, user: str, text: str) -> dict:
    return call(fake, "/cgi-bin/message/send", {"touser": user, "msgtype": "text", "agentid": DEFAULT_AGENT_ID,
                                                 "text": {"content": text}}, access_token=access_token)


@pytest.fixture(scope="module")
def fake():
    with FakeWeCom(answer_timeout=0.5, retry_delays=[0.05]) as server:
        yield server


# ---------------------------------------------------------------------------------------------- cryptography

def test_the_ciphertext_is_padded_to_32_byte_blocks_and_decrypts_to_message_and_receive_id():
    key = crypto.new_encoding_aes_key()
    assert len(key) == 43 and len(crypto.key_of(key)) == 32
    for size in (0, 1, 11, 12, 44, 1000):   # 16 + 4 + size + len(corp id) lands on and off block edges
        message = b"m" * size
        plain = crypto.pkcs7(crypto.frame(message, DEFAULT_CORP_ID))
        assert len(plain) % 32 == 0 and 1 <= plain[-1] <= 32
        assert crypto.decrypt(key, crypto.encrypt(key, message, DEFAULT_CORP_ID)) == (message, DEFAULT_CORP_ID)
    assert crypto.pkcs7(b"x" * 32)[-32:] == bytes([32]) * 32, "aligned data gets a whole block of padding"


def test_the_signature_is_sha1_over_the_four_values_sorted():
    expected = hashlib.sha1("".join(sorted(["tok", "1700000000", "nonce1", "CIPHER"])).encode()).hexdigest()
    assert crypto.msg_signature("tok", "1700000000", "nonce1", "CIPHER") == expected
    assert crypto.msg_signature("tok", "1700000000", "nonce1", "CIPHER") != crypto.msg_signature(
        "tok", "1700000001", "nonce1", "CIPHER")


def test_cdata_keeps_a_closing_sequence_in_the_text():
    import xml.etree.ElementTree as ElementTree
    root = ElementTree.fromstring(message_xml({"Content": "a ]]> b", "CreateTime": 5}))
    assert root.find("Content").text == "a ]]> b" and root.find("CreateTime").text == "5"


# ----------------------------------------------------------------------------------------------- server API

def test_gettoken_checks_the_corp_id_and_secret(fake):
    assert call(fake, "/cgi-bin/gettoken", corpid="wrong", corpsecret=DEFAULT_SECRET)["errcode"] == 40013
    assert call(fake, "/cgi-bin/gettoken", corpid=DEFAULT_CORP_ID, corpsecret="wrong")["errcode"] == 40001
    answer = call(fake, "/cgi-bin/gettoken", corpid=DEFAULT_CORP_ID, corpsecret=DEFAULT_SECRET)
    assert answer["errcode"] == 0 and answer["access_token"] and answer["expires_in"] == 7200


def test_calls_need_a_live_token_and_expired_ones_are_refused(fake):
    fake.add_member("tokens")
    body = {"touser": "tokens", "msgtype": "text", "agentid": DEFAULT_AGENT_ID, "text": {"content": "x"}}
    assert call(fake, "/cgi-bin/message/send", body)["errcode"] == 41001
    assert call(fake, "/cgi-bin/message/send", body, access_token="made-up")["errcode"] == 40014
    live = token(fake)
    assert send(fake, live, "tokens", "x")["errcode"] == 0
    fake.expire_tokens()
    assert send(fake, live, "tokens", "y")["errcode"] == 42001
    assert send(fake, token(fake), "tokens", "y")["errcode"] == 0
    assert [m["text"] for m in fake.messages("tokens")] == ["x", "y"]


def test_send_answers_a_msgid_and_recall_takes_it_once(fake):
    fake.add_member("recall")
    live = token(fake)
    sent = send(fake, live, "recall", "to be recalled")
    assert sent["errcode"] == 0 and sent["msgid"] and sent["invaliduser"] == ""
    assert call(fake, "/cgi-bin/message/recall", {"msgid": sent["msgid"]}, access_token=live)["errcode"] == 0
    again = call(fake, "/cgi-bin/message/recall", {"msgid": sent["msgid"]}, access_token=live)
    assert again["errcode"] == NO_SUCH_MSGID
    assert fake.messages("recall")[0]["recalled"] is True


def test_send_refuses_what_wecom_refuses(fake):
    live = token(fake)
    assert send(fake, live, "nobody-here", "x")["errcode"] == 81013
    fake.add_member("refusals")
    assert send(fake, live, "refusals", "")["errcode"] == 44004
    wrong_agent = {"touser": "refusals", "msgtype": "text", "agentid": 1, "text": {"content": "x"}}
    assert call(fake, "/cgi-bin/message/send", wrong_agent, access_token=live)["errcode"] == 40056


def test_long_texts_are_cut_at_2048_bytes_and_a_31st_message_a_minute_is_dropped(fake):
    fake.add_member("limits")
    live = token(fake)
    before = fake.stats()
    assert send(fake, live, "limits", "字" * 700)["errcode"] == 0        # 2,100 bytes: cut, not refused
    shown = fake.messages("limits")[0]
    assert shown["truncated"] and len(shown["text"].encode()) <= 2048 and shown["text"] == "字" * 682
    for number in range(30):
        assert send(fake, live, "limits", f"m{number}")["errcode"] == 0
    after = fake.stats()
    assert after["truncated"] == before["truncated"] + 1
    assert after["dropped_over_member_limit"] == before["dropped_over_member_limit"] + 1
    assert [m["text"] for m in fake.messages("limits")][-1] == "m28", "the 31st never reached the member"


def test_a_scripted_flood_bans_the_member_and_counts_calls_inside_the_ban(fake):
    fake.add_member("flood")
    live = token(fake)
    fake.set_faults(next=["flood"], flood_retry_after=30.0, methods=("message/send",))
    try:
        before = fake.stats()["retry_after_violations"]
        assert send(fake, live, "flood", "a")["errcode"] == 45009
        assert send(fake, live, "flood", "b")["errcode"] == 45009
        assert fake.stats()["retry_after_violations"] == before + 1
        fake.add_member("flood-other")
        assert send(fake, live, "flood-other", "c")["errcode"] == 0, "the ban is the member's"
    finally:
        fake.set_faults()
    assert [o["status"] for o in fake.ops("flood", "message/send")] == [429, 429]


def test_media_get_serves_an_injected_image(fake):
    receiver = Receiver(fake, answer="")
    with receiver:
        fake.callback_url = receiver.url
        handle = fake.inject_image("media", b"\x89PNG fake bytes")
        fake.wait_for(lambda: fake.callback(handle)["state"] == "acked", 20)
    media_id = receiver.messages[-1]["MediaId"]
    url = f"{fake.base_url}/cgi-bin/media/get?{urlencode({'access_token': token(fake), 'media_id': media_id})}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.read() == b"\x89PNG fake bytes" and resp.headers["Content-Type"] == "image/png"
    assert call(fake, "/cgi-bin/media/get", access_token=token(fake), media_id="nope")["errcode"] == 40007


# ------------------------------------------------------------------------------------------------ callbacks

class Receiver:
    """An application's callback URL, checking what it gets as an application must: the signature over the
    Encrypt element, then the ciphertext and its ReceiveId. ``delays``: seconds to hold each answer, in order."""

    def __init__(self, fake: FakeWeCom, answer: str = "", delays=(), status: int = 200):
        self.fake, self.answer, self.delays, self.status = fake, answer, list(delays), status
        self.messages: list[dict] = []
        self.requests = 0
        self.problems: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        import xml.etree.ElementTree as ElementTree
        self.requests += 1
        query = request.query
        if request.method == "GET":
            echostr = query["echostr"]
            if crypto.msg_signature(self.fake.callback_token, query["timestamp"], query["nonce"],
                                    echostr) != query["msg_signature"]:
                self.problems.append("bad signature on the URL check")
            plain, receive_id = crypto.decrypt(self.fake.encoding_aes_key, echostr)
            return web.Response(text=plain.decode() if self.answer == "" else self.answer)
        envelope = ElementTree.fromstring(await request.read())
        encrypted = envelope.find("Encrypt").text
        if crypto.msg_signature(self.fake.callback_token, query["timestamp"], query["nonce"],
                                encrypted) != query["msg_signature"]:
            self.problems.append("bad signature")
        xml, receive_id = crypto.decrypt(self.fake.encoding_aes_key, encrypted)
        if receive_id != DEFAULT_CORP_ID:
            self.problems.append(f"receive id {receive_id}")
        self.messages.append({child.tag: child.text for child in ElementTree.fromstring(xml)})
        if self.delays:
            await asyncio.sleep(self.delays.pop(0))
        return web.Response(status=self.status, text=self.answer)

    def __enter__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def start():
            app = web.Application()
            app.router.add_route("*", "/cb", self.handle)
            self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
            await self.runner.setup()
            await web.TCPSite(self.runner, "127.0.0.1", 0).start()
            return self.runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)}/cb"
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def test_a_callback_is_signed_and_encrypted_for_the_corp(fake):
    with Receiver(fake) as receiver:
        fake.callback_url = receiver.url
        handle = fake.inject_text("zhangsan", "你好 <b>&amp;")
        fake.wait_for(lambda: fake.callback(handle)["state"] == "acked", 20)
    assert receiver.problems == []
    message = receiver.messages[-1]
    assert message["MsgType"] == "text" and message["Content"] == "你好 <b>&amp;"
    assert message["FromUserName"] == "zhangsan" and message["ToUserName"] == DEFAULT_CORP_ID
    assert message["MsgId"].isdigit() and message["AgentID"] == str(DEFAULT_AGENT_ID)
    query = parse_qs(urlsplit("?" + urlencode(fake.callback(handle)["query"])).query)
    assert set(query) == {"msg_signature", "timestamp", "nonce"}


def test_a_callback_unanswered_within_the_window_is_sent_again_until_answered(fake):
    with Receiver(fake, delays=[1.0, 1.0]) as receiver:    # over the fake's 0.5 s window twice
        fake.callback_url = receiver.url
        handle = fake.inject_text("slow", "are you there")
        fake.wait_for(lambda: fake.callback(handle)["state"] == "acked", 20)
    attempts = fake.callback(handle)["attempts"]
    assert [a["failure"] for a in attempts] == ["timeout", "timeout", None]
    assert len({m["MsgId"] for m in receiver.messages}) == 1 and len(receiver.messages) == 3


def test_a_callback_refused_every_time_is_given_up_after_three_retries(fake):
    with Receiver(fake, status=500) as receiver:
        fake.callback_url = receiver.url
        handle = fake.inject_text("refused", "x")
        fake.wait_for(lambda: fake.callback(handle)["state"] == "given_up", 20)
    assert [a["status"] for a in fake.callback(handle)["attempts"]] == [500] * 4


def test_a_passive_reply_is_recorded(fake):
    with Receiver(fake, answer="<xml>a passive reply</xml>") as receiver:
        fake.callback_url = receiver.url
        handle = fake.inject_text("passive", "x")
        fake.wait_for(lambda: fake.callback(handle)["state"] == "acked", 20)
    assert fake.read(lambda s: s["passive_replies"])[-1]["callback"] == handle


def test_the_url_check_needs_the_decrypted_echostr_back(fake):
    with Receiver(fake) as good:
        assert fake.verify_url(good.url)["verified"] and good.problems == []
    with Receiver(fake, answer="something else") as wrong:
        assert not fake.verify_url(wrong.url)["verified"]
