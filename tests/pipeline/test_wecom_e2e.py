"""WeCom through the real daemon and the fake WeCom (tests/fakes/wecom): callbacks refused before anything is stored,
retries of one MsgId made one turn, and a slow answer delivered through the active API once.

One daemon for the module. The 20 s answer is asked for when the daemon is up (``rig``), so its wait runs while the
other tests do; its test comes last and only collects the outcome.
"""
from __future__ import annotations

import asyncio
import io
import json
import time

import pytest

from actors.messages import Source
from storage import Store, StorageError, session_key
from tests.actor_system import wait_for
from tests.fakes.wecom import DEFAULT_AGENT_ID, DEFAULT_CALLBACK_TOKEN, DEFAULT_CORP_ID, DEFAULT_SECRET, FakeWeCom
from tests.fakes.wecom import crypto
from tests.fakes.wecom.callbacks import message_xml
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(120)
SLOW_S = 20.0
BOMB = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + b"".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i > 1 else "&lol;" * 10}">'.encode()
                   for i in range(1, 10)) + b"]>")


class Rig:
    def __init__(self, wecom: FakeWeCom, gw: Gateway, url: str):
        self.wecom, self.gw, self.url = wecom, gw, url
        self.slow_handle, self.slow_at = "", 0.0

    def rows(self, user: str):
        """The inbox rows of the member's chat; None while the database is busy (callers poll)."""
        key = session_key(Source(platform="wecom", chat_id=user, chat_type="dm", user_id=user))

        async def read():
            async with await Store.open(self.gw.state / "gateway.db") as store:
                return await store.inbox.rows_in_state(key, ("received", "taken", "done", "dropped"))
        try:
            return asyncio.run(read())
        except StorageError:
            return None

    def total_rows(self):
        async def read():
            async with await Store.open(self.gw.state / "gateway.db") as store:
                return sum((await store.inbox.counts()).values())
        try:
            return asyncio.run(read())
        except StorageError:
            return None

    def replies(self, user: str) -> list[str]:
        return [m["text"] for m in self.wecom.messages(user)]

    def answered(self, user: str, count: int = 1) -> list:
        """Wait until the member's ``count`` rows are done (the turn over, its reply delivered) and return them."""
        rows = wait_for(lambda: (r := self.rows(user)) and len(r) >= count and all(x.state == "done" for x in r)
                        and r, 60, 0.1, f"{count} answered row(s) of {user}")
        wait_for(lambda: len(self.replies(user)) >= count, 30, 0.1, f"the reply to {user}")
        return rows


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("wecom")
    key = crypto.new_encoding_aes_key()
    with FakeWeCom(encoding_aes_key=key) as wecom:
        # Port 0, read back from `status`: a port picked free here could be taken by the other worker's daemon.
        gw = Gateway(tmp_path, extra_toml=f"""
[adapters.wecom]
type = "wecom"
access = "open"
corp_id = "{DEFAULT_CORP_ID}"
agent_id = {DEFAULT_AGENT_ID}
secret = "{DEFAULT_SECRET}"
token = "{DEFAULT_CALLBACK_TOKEN}"
encoding_aes_key = "{key}"
base_url = "{wecom.base_url}"
callback_port = 0
""")
        try:
            gw.start()
            gw.wait_ready()
            seen: list = []

            def served_url():
                rows = json.loads(gw.cli("status", "--json").stdout or "{}").get("adapters", [])
                seen[:] = [r for r in rows if r.get("name") == "wecom"]
                return next((r.get("url") for r in seen if r.get("url")), None)
            try:
                url = wait_for(served_url, 60, 0.2, "the callback URL in status")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; the adapter's row: {seen}") from None
            check = wecom.verify_url(url)
            assert check["verified"], check
            rig = Rig(wecom, gw, url)
            # The slow answer starts now; then every token expires, so the next call the daemon makes meets 42001.
            rig.slow_handle, rig.slow_at = wecom.inject_text("slow-member", f"#think {SLOW_S:g} take your time"), \
                time.monotonic()
            wait_for(lambda: wecom.callback(rig.slow_handle)["state"] == "acked", 30, 0.05, "the slow one stored")
            wecom.expire_tokens()
            yield rig
        finally:
            gw.cli("stop")
            gw.kill_everything()


# ------------------------------------------------------------------------------------------ refused callbacks

def forged(wecom: FakeWeCom, case: str) -> tuple[dict, bytes]:
    """A callback as WeCom would never send it: (query, body)."""
    key = crypto.key_of(wecom.encoding_aes_key)
    xml = message_xml(wecom.message_fields("mallory", "text", {"Content": "let me in"}, "7399999999999999999"))
    framed = crypto.frame(xml, DEFAULT_CORP_ID)
    if case == "bad-signature":
        msg_encrypt = crypto.encrypt(wecom.encoding_aes_key, xml, DEFAULT_CORP_ID)
        return wecom.signed_query(msg_encrypt, token="not-the-token"), wecom.envelope(msg_encrypt)
    if case == "bad-padding":
        msg_encrypt = crypto.aes_cbc(key, crypto.pkcs7(framed)[:-1] + bytes([40]))
    elif case == "wrong-receive-id":
        msg_encrypt = crypto.encrypt(wecom.encoding_aes_key, xml, "ww-someone-else")
    elif case == "xml-bomb-inside":
        msg_encrypt = crypto.encrypt(wecom.encoding_aes_key, BOMB + b"<xml><Content>&lol9;</Content></xml>",
                                     DEFAULT_CORP_ID)
    elif case == "malformed-xml-inside":
        msg_encrypt = crypto.encrypt(wecom.encoding_aes_key, b"<xml><MsgId>1</MsgId>", DEFAULT_CORP_ID)
    elif case == "xml-bomb-envelope":
        body = BOMB + b"<xml><Encrypt>&lol9;</Encrypt></xml>"
        return wecom.signed_query("anything"), body
    else:   # a replay: signed right, but its timestamp an hour old
        msg_encrypt = crypto.encrypt(wecom.encoding_aes_key, xml, DEFAULT_CORP_ID)
        return wecom.signed_query(msg_encrypt, timestamp=str(int(time.time()) - 3600)), wecom.envelope(msg_encrypt)
    return wecom.signed_query(msg_encrypt), wecom.envelope(msg_encrypt)


@pytest.mark.parametrize("case, status, reason", [
    ("bad-signature", 401, "msg_signature does not match"),
    ("bad-padding", 400, "bad padding"),
    ("wrong-receive-id", 400, "ReceiveId 'ww-someone-else' is not this corp's id"),
    ("xml-bomb-envelope", 400, "envelope: XML refused"),
    ("xml-bomb-inside", 400, "message: XML refused"),
    ("malformed-xml-inside", 400, "message: malformed XML"),
    ("replayed", 401, "s from our clock")])
def test_a_callback_that_is_not_wecoms_is_refused_logged_once_and_nothing_is_stored(rig, case, status, reason):
    before = wait_for(rig.total_rows, 20, 0.05, "inbox counts")
    logged = rig.gw.log().count(reason)
    query, body = forged(rig.wecom, case)
    answer = rig.wecom.post(query, body, rig.url)
    assert answer[0] == status, answer
    line = wait_for(lambda: rig.gw.log().count(reason) > logged and rig.gw.log(), 20, 0.05, f"the log line {reason!r}")
    assert line.count(reason) == logged + 1, "logged once"
    assert [entry for entry in line.splitlines() if reason in entry][-1].count("WARNING") == 1
    assert rig.total_rows() == before and rig.rows("mallory") == []
    assert rig.replies("mallory") == [], "nothing reached a session"


def test_the_url_check_is_answered_only_when_signed(rig):
    assert rig.wecom.verify_url(rig.url)["verified"]
    echostr = crypto.encrypt(rig.wecom.encoding_aes_key, b"hello", DEFAULT_CORP_ID)
    query = rig.wecom.signed_query(echostr, token="not-the-token", echostr=True)

    async def get():
        import aiohttp
        from urllib.parse import urlencode
        async with aiohttp.ClientSession() as http:
            async with http.get(rig.url + "?" + urlencode(query)) as resp:
                return resp.status, await resp.text()
    status, text = asyncio.run(get())
    assert status == 401 and "hello" not in text


# -------------------------------------------------------------------------------------------------- retries

def test_the_same_msgid_delivered_three_times_at_once_is_one_turn(rig):
    first = rig.wecom.inject_text("triple", "just once please")
    again = [rig.wecom.redeliver(first), rig.wecom.redeliver(first)]   # the same request, as WeCom retries it
    for handle in [first, *again]:
        wait_for(lambda: rig.wecom.callback(handle)["state"] == "acked", 30, 0.05, f"{handle} answered")
    [row] = rig.answered("triple")
    assert row.platform_message_id == rig.wecom.callback(first)["msg_id"]
    assert len(rig.replies("triple")) == 1 and "just once please" in rig.replies("triple")[0]


def test_an_answer_held_past_the_window_is_retried_by_wecom_and_still_one_turn(rig):
    """An image whose download (before the row is committed) outlasts WeCom's 5 s twice: WeCom gives up on the
    answer and sends the callback again, twice or three times, while the first is still being stored."""
    from PIL import Image
    png = io.BytesIO()
    Image.new("RGB", (8, 6), "red").save(png, "PNG")
    rig.wecom.configure(media_delay=13.0)   # past two windows (aiohttp rounds a 5 s timeout up to 6 s at most)
    try:
        handle = rig.wecom.inject_image("photographer", png.getvalue())
        wait_for(lambda: rig.wecom.callback(handle)["state"] != "pending", 60, 0.1, "the callback settled")
    finally:
        rig.wecom.configure(media_delay=0.0)
    attempts = rig.wecom.callback(handle)["attempts"]
    assert [a["failure"] for a in attempts][:2] == ["timeout", "timeout"] and attempts[-1]["status"] == 200, attempts
    [row] = rig.answered("photographer")
    [attachment] = row.payload["attachments"]
    assert attachment["state"] == "cached" and attachment["mime"] == "image/png"
    assert len(rig.replies("photographer")) == 1 and "photo" in rig.replies("photographer")[0]


def test_an_event_is_answered_and_skipped(rig):
    handle = rig.wecom.inject_event("visitor", "enter_agent")
    wait_for(lambda: rig.wecom.callback(handle)["state"] == "acked", 30, 0.05, "the event answered")
    assert rig.rows("visitor") == []


# ---------------------------------------------------------------------------------------------- a slow answer

def test_an_answer_that_takes_20_s_reaches_the_member_once_through_the_active_api(rig):
    callback = rig.wecom.callback(rig.slow_handle)
    [attempt] = callback["attempts"]
    assert attempt["status"] == 200 and attempt["answered_at"] - attempt["at"] < 5.0, "answered within the window"
    rig.answered("slow-member")
    took = time.monotonic() - rig.slow_at
    assert took >= SLOW_S - 1, f"answered after {took:.1f} s"
    assert len(rig.replies("slow-member")) == 1 and "take your time" in rig.replies("slow-member")[0]
    sends = rig.wecom.ops("slow-member", "message/send")
    assert [op["errcode"] for op in sends] == [0], sends
    assert rig.wecom.stats()["token_refusals"] >= 1, "the expired token was refused, fetched again, used"
    assert rig.wecom.read(lambda s: s["passive_replies"]) == [], "no passive reply, ever"
    assert rig.wecom.stats()["truncated"] == 0 and rig.wecom.stats()["dropped_over_member_limit"] == 0
