"""The WeCom adapter's parts without a daemon: the callback cryptography and XML (against payloads the fake WeCom
builds with its own implementation), the API client's token cache and error classes against the fake, and the
doctor probe. The daemon-level scenarios are in tests/pipeline/test_wecom_e2e.py; the conformance suite runs it
too (tests/adapters/harnesses/wecom.py)."""
from __future__ import annotations

import asyncio

import pytest

from actors.adapters.errors import FloodError, PermanentError, RetryableError, TooLongError
from actors.adapters.intake import MalformedPayload
from actors.adapters.wecom import crypto as product
from actors.adapters.wecom.client import WeComAPI, classify
from actors.adapters.wecom.inbound import encrypted_of, event_from_message, parse_fields, skip_reason
from tests.fakes.wecom import DEFAULT_AGENT_ID, DEFAULT_CORP_ID, DEFAULT_SECRET, FakeWeCom
from tests.fakes.wecom import crypto as platform
from tests.fakes.wecom.callbacks import message_xml

pytestmark = pytest.mark.timeout(60)
AES = platform.new_encoding_aes_key()
KEY = product.aes_key(AES)

BOMB = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + b"".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i > 1 else "&lol;" * 10}">'.encode()
                   for i in range(1, 10))
        + b"]><xml><Encrypt>&lol9;</Encrypt></xml>")
EXTERNAL = (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
            b"<xml><Encrypt>&e;</Encrypt></xml>")


def refused(call) -> str:
    with pytest.raises(product.CallbackRefused) as info:
        call()
    return info.value.reason


# ---------------------------------------------------------------------------------------------- cryptography

def test_what_the_platform_encrypts_decrypts_to_the_same_message():
    for message in (b"", b"x", "<xml>你好</xml>".encode(), b"y" * 5000):
        encrypted = platform.encrypt(AES, message, DEFAULT_CORP_ID)
        assert product.decrypt(KEY, encrypted, DEFAULT_CORP_ID) == message


def test_the_signature_is_the_platforms():
    args = ("tok", "1700000000", "n0nce", "CIPHERTEXT")
    given = platform.msg_signature(*args)
    assert product.signature(*args) == given
    product.check_signature(*args, given)
    assert product.check_signature(*args, given.upper()) is None, "hex compared without regard to case"
    assert refused(lambda: product.check_signature(*args, "0" * 40)) == "msg_signature does not match"
    assert refused(lambda: product.check_signature(*args, "é")) == "msg_signature does not match"


@pytest.mark.parametrize("tamper, reason", [
    ("pad-too-large", "bad padding"), ("pad-disagrees", "bad padding"),
    ("receive-id", "is not this corp's id"), ("length", "runs past the plaintext"),
    ("not-base64", "not base64"), ("not-blocks", "not whole AES blocks")])
def test_a_ciphertext_that_is_not_the_platforms_is_refused(tamper, reason):
    framed = platform.frame(b"<xml/>", DEFAULT_CORP_ID)
    if tamper == "pad-too-large":
        encrypted = platform.aes_cbc(KEY, platform.pkcs7(framed)[:-1] + bytes([33]))
    elif tamper == "pad-disagrees":
        padded = bytearray(platform.pkcs7(framed + b"\0" * (32 - len(framed) % 32 - 5)))   # a pad of 5
        padded[-3] = 4
        encrypted = platform.aes_cbc(KEY, bytes(padded))
    elif tamper == "receive-id":
        encrypted = platform.encrypt(AES, b"<xml/>", "ww-another-corp")
    elif tamper == "length":
        random16, rest = framed[:16], framed[16:]
        encrypted = platform.aes_cbc(KEY, platform.pkcs7(random16 + (10 ** 6).to_bytes(4, "big") + rest[4:]))
    elif tamper == "not-base64":
        encrypted = "not base64 at all!"
    else:
        encrypted = "QUJD"   # 3 bytes
    assert reason in refused(lambda: product.decrypt(KEY, encrypted, DEFAULT_CORP_ID))


def test_a_message_under_another_key_is_always_refused():
    # The plaintext under a wrong key is random: its last byte is a valid pad about once in 256 tries,
    # and then the length field or the corp id refuses it. Whichever check catches it, none lets it in.
    reasons = set()
    for _ in range(600):
        encrypted = platform.encrypt(platform.new_encoding_aes_key(), b"<xml/>", DEFAULT_CORP_ID)
        reasons.add(refused(lambda: product.decrypt(KEY, encrypted, DEFAULT_CORP_ID)).split(" (")[0])
    assert "bad padding" in reasons, reasons


def test_an_encoding_aes_key_is_43_base64_characters():
    assert len(product.aes_key(AES)) == 32
    for bad in (AES[:42], AES + "A", "!" * 43):
        with pytest.raises(ValueError):
            product.aes_key(bad)


# ------------------------------------------------------------------------------------------------------ XML

@pytest.mark.parametrize("body, reason", [
    (BOMB, "XML refused"), (EXTERNAL, "XML refused"), (b"<xml><Encrypt>x</Encrypt>", "malformed XML"),
    (b"<html><Encrypt>x</Encrypt></html>", "not <xml>"), (b"<xml><ToUserName>a</ToUserName></xml>", "no Encrypt"),
    (b"\xff\xfe", "malformed XML"), (b"<xml>" + b"<a/>" * 65 + b"</xml>", "over 64")],
    ids=["entity-bomb", "external-entity", "unclosed", "not-xml-root", "no-encrypt", "not-text", "too-many"])
def test_an_envelope_that_is_no_callback_is_refused_before_anything_expands(body, reason):
    assert reason in refused(lambda: encrypted_of(body))


def test_an_envelope_gives_its_encrypt_field():
    assert encrypted_of(message_xml({"ToUserName": DEFAULT_CORP_ID, "Encrypt": "QUJD", "AgentID": "1"})) == "QUJD"


def fields(kind: str, **extra) -> dict:
    base = {"ToUserName": DEFAULT_CORP_ID, "FromUserName": "zhangsan", "CreateTime": 1700000000, "MsgType": kind,
            **extra, "MsgId": "7300000000000000123", "AgentID": DEFAULT_AGENT_ID}
    return parse_fields(message_xml(base), "message")


def test_a_text_message_becomes_a_dm_event_keyed_by_its_msgid():
    event = event_from_message(fields("text", Content="  two  spaces kept\n"), "wc", "default", DEFAULT_AGENT_ID)
    assert event.text == "  two  spaces kept\n" and event.platform_message_id == "7300000000000000123"
    assert (event.source.chat_id, event.source.user_id, event.source.chat_type) == ("zhangsan", "zhangsan", "dm")
    assert event.sent_at == 1700000000.0 and event.attachments == ()


def test_media_messages_carry_a_pending_attachment_by_media_id():
    image = event_from_message(fields("image", PicUrl="http://x/p", MediaId="MEDIA1"), "wc", "default")
    [attachment] = image.attachments
    assert (attachment.kind, attachment.ref, attachment.state) == ("photo", "MEDIA1", "pending")
    voice = event_from_message(fields("voice", MediaId="MEDIA2", Format="amr"), "wc", "default")
    assert voice.attachments[0].kind == "voice" and voice.attachments[0].name == "voice.amr"


def test_locations_and_links_are_told_as_text_and_events_are_skipped():
    place = event_from_message(fields("location", Location_X="23.1", Location_Y="113.3", Label="Guangzhou"),
                               "wc", "default")
    assert place.text == "[shared a location: Guangzhou (23.1, 113.3)]"
    link = event_from_message(fields("link", Title="Docs", Url="https://example.com", Description="read"),
                              "wc", "default")
    assert link.text == "[shared a link: Docs https://example.com]\nread"
    assert skip_reason({"MsgType": "event", "Event": "enter_agent"}) == "event 'enter_agent'"
    assert skip_reason(fields("text", Content="x")) is None


@pytest.mark.parametrize("change, reason", [
    ({"MsgId": ""}, "MsgId must be a number"), ({"FromUserName": ""}, "no FromUserName"),
    ({"AgentID": "999"}, "not this application's"), ({"MsgType": "shortvideo"}, "is not taken"),
    ({"MsgType": "image"}, "without MediaId")])
def test_a_message_the_gateway_cannot_take_is_malformed(change, reason):
    message = dict(fields("text", Content="x"), **change)
    with pytest.raises(MalformedPayload, match=reason):
        event_from_message(message, "wc", "default", DEFAULT_AGENT_ID)


# ---------------------------------------------------------------------------------------------- the API client

@pytest.fixture(scope="module")
def fake():
    with FakeWeCom() as server:
        yield server


def test_the_token_is_fetched_once_and_again_only_when_wecom_refuses_it(fake):
    fake.add_member("cache")

    async def scenario():
        async with WeComAPI(DEFAULT_CORP_ID, DEFAULT_SECRET, fake.base_url) as api:
            first = await api.send_text(DEFAULT_AGENT_ID, "cache", "one")
            await api.send_text(DEFAULT_AGENT_ID, "cache", "two")
            fetched_before_expiry = api.tokens_fetched
            fake.expire_tokens()
            await api.send_text(DEFAULT_AGENT_ID, "cache", "three")   # 42001, then a new token, then sent
            await api.recall(first)
            return fetched_before_expiry, api.tokens_fetched
    before = fake.stats()
    assert asyncio.run(scenario()) == (1, 2)
    after = fake.stats()
    assert after["tokens_issued"] - before["tokens_issued"] == 2 and after["token_refusals"] > before["token_refusals"]
    assert [(m["text"], m["recalled"]) for m in fake.messages("cache")] == [
        ("one", True), ("two", False), ("three", False)]


def test_a_token_past_its_expires_in_is_fetched_again_before_use(fake):
    fake.add_member("expiry")
    now = [1000.0]

    async def scenario():
        async with WeComAPI(DEFAULT_CORP_ID, DEFAULT_SECRET, fake.base_url, clock=lambda: now[0]) as api:
            await api.send_text(DEFAULT_AGENT_ID, "expiry", "a")
            now[0] += 7200 - 299        # inside the margin before expires_in: fetched again, no refusal needed
            await api.send_text(DEFAULT_AGENT_ID, "expiry", "b")
            return api.tokens_fetched
    refusals = fake.stats()["token_refusals"]
    assert asyncio.run(scenario()) == 2 and fake.stats()["token_refusals"] == refusals


def test_wecom_refusals_become_the_error_classes_the_base_acts_on(fake):
    async def scenario():
        async with WeComAPI(DEFAULT_CORP_ID, "wrong-secret", fake.base_url) as api:
            with pytest.raises(PermanentError, match="40001"):
                await api.send_text(DEFAULT_AGENT_ID, "x", "x")
        async with WeComAPI(DEFAULT_CORP_ID, DEFAULT_SECRET, fake.base_url, rate_limit_wait_s=7.0) as api:
            with pytest.raises(PermanentError, match="81013"):
                await api.send_text(DEFAULT_AGENT_ID, "no-such-member", "x")
            fake.add_member("flooded")
            fake.set_faults(next=["flood", "error"], methods=("message/send",), flood_retry_after=0.0)
            try:
                with pytest.raises(FloodError) as flood:
                    await api.send_text(DEFAULT_AGENT_ID, "flooded", "x")
                with pytest.raises(RetryableError) as busy:
                    await api.send_text(DEFAULT_AGENT_ID, "flooded", "x")
            finally:
                fake.set_faults()
            return flood.value.retry_after, busy.value.maybe_done
    assert asyncio.run(scenario()) == (7.0, True)
    assert isinstance(classify("message/send", 200, {"errcode": 45002, "errmsg": "too long"}), TooLongError)
    assert type(classify("message/send", 502, None)) is RetryableError


def test_no_error_text_carries_the_secret_or_a_token(fake):
    async def scenario():
        async with WeComAPI(DEFAULT_CORP_ID, DEFAULT_SECRET, "http://127.0.0.1:9") as api:   # nothing listens
            with pytest.raises(RetryableError) as info:
                await api.fetch_token()
            return str(info.value), api.redact(f"x {DEFAULT_SECRET} y")
    text, redacted = asyncio.run(scenario())
    assert DEFAULT_SECRET not in text and DEFAULT_SECRET not in redacted


def test_the_doctor_probe_asks_gettoken(fake):
    from actors.adapters import registry
    from daemon.doctor_probes import probe_wecom
    table = registry.validate_adapter("wc", {"type": "wecom", "corp_id": DEFAULT_CORP_ID,
                                             "agent_id": DEFAULT_AGENT_ID, "secret": DEFAULT_SECRET,
                                             "token": "t", "encoding_aes_key": AES, "base_url": fake.base_url})
    good = asyncio.run(probe_wecom("wc", table))
    assert good.status == "ok" and "7200" in good.detail
    wrong = asyncio.run(probe_wecom("wc", dict(table, secret="not-the-secret")))
    assert wrong.status == "fail" and "refused" in wrong.detail and "not-the-secret" not in wrong.detail
    away = asyncio.run(probe_wecom("wc", dict(table, base_url="http://127.0.0.1:9")))
    assert away.status == "fail" and "cannot reach" in away.detail and DEFAULT_SECRET not in away.detail
