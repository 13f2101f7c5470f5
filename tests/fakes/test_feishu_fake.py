"""The fake Feishu / Lark open platform on its own: the tenant token and what a call without a live one gets, sends
deduplicated by ``uuid``, the 5-a-second limit per chat and scripted frequency limits (429, code 99991400,
``x-ogw-ratelimit-reset``) with the calls made inside a ban counted, the edit cap, recalls, resources, and event
callbacks encrypted, signed and redelivered the way the documentation describes, against a small receiver written
here (no gateway)."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid

import pytest
from aiohttp import web

from actors.adapters.feishu.crypto import decrypt, signature
from tests.fakes.feishu import DEFAULT_APP_ID, DEFAULT_APP_SECRET, DEFAULT_ENCRYPT_KEY, FakeFeishu
from tests.fakes.harness import FakeServer

pytestmark = pytest.mark.timeout(60)


def call(fake: FakeFeishu, method: str, path: str, body=None, token: str = "") -> tuple:
    """(status, JSON answer or raw bytes, headers) of one call."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{fake.base_url}{path}", data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            status, raw, headers = resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as exc:
        status, raw, headers = exc.code, exc.read(), exc.headers
    try:
        return status, json.loads(raw), headers
    except ValueError:
        return status, raw, headers


def token_of(fake: FakeFeishu) -> str:
    status, answer, _ = call(fake, "POST", "/open-apis/auth/v3/tenant_access_token/internal",
                             {"app_id": DEFAULT_APP_ID, "app_secret": DEFAULT_APP_SECRET})
    assert status == 200 and answer["code"] == 0 and answer["expire"] == 7200
    return answer["tenant_access_token"]


def send(fake: FakeFeishu, token: str, chat: str, text: str, key=None) -> tuple:
    body = {"receive_id": chat, "msg_type": "text", "content": json.dumps({"text": text})}
    if key:
        body["uuid"] = key
    return call(fake, "POST", "/open-apis/im/v1/messages?receive_id_type=chat_id", body, token)


@pytest.fixture()
def fake():
    with FakeFeishu() as server:
        yield server


def test_calls_need_a_live_tenant_token(fake):
    status, answer, _ = call(fake, "POST", "/open-apis/auth/v3/tenant_access_token/internal",
                             {"app_id": DEFAULT_APP_ID, "app_secret": "wrong"})
    assert status == 400 and answer["code"] != 0
    token = token_of(fake)
    assert call(fake, "GET", "/open-apis/bot/v3/info", token=token)[1]["bot"]["open_id"] == fake.bot_open_id
    fake.expire_tokens()
    status, answer, _ = call(fake, "GET", "/open-apis/bot/v3/info", token=token)
    assert status == 400 and answer["code"] == 99991663 and fake.stats()["token_refusals"] == 1


def test_a_uuid_sends_once_and_the_repeat_is_answered_with_the_first_message(fake):
    token, chat, key = token_of(fake), fake.p2p_chat("u"), str(uuid.uuid4())
    first = send(fake, token, chat, "hello", key)[1]["data"]["message_id"]
    assert send(fake, token, chat, "hello", key)[1]["data"]["message_id"] == first
    assert send(fake, token, chat, "hello", "x" * 51)[0] == 400, "a uuid is at most 50 characters"
    assert [m["text"] for m in fake.messages(chat)] == ["hello"] and fake.stats()["uuid_repeats"] == 1


def test_six_sends_to_one_chat_within_a_second_break_the_limit(fake):
    token, chat = token_of(fake), fake.p2p_chat("fast")
    statuses = [send(fake, token, chat, f"n{i}")[0] for i in range(6)]
    assert statuses[:5] == [200] * 5 and statuses[5] == 429
    assert fake.stats()["pacing_violations"] == 1


def test_a_scripted_frequency_limit_names_its_reset_and_counts_calls_inside_it(fake):
    token, chat = token_of(fake), fake.p2p_chat("flood")
    fake.set_faults(next=["flood"], flood_retry_after=1.2)
    status, answer, headers = send(fake, token, chat, "a")
    assert status == 429 and answer["code"] == 99991400 and headers["x-ogw-ratelimit-reset"] == "2"
    assert send(fake, token, chat, "b")[0] == 429 and fake.stats()["retry_after_violations"] == 1
    fake.wait_for(lambda: fake.gates.ban_remaining([chat], time.time()) <= 0, timeout=10)
    assert send(fake, token, chat, "c")[0] == 200


def test_edits_are_capped_and_a_recalled_message_is_gone(fake):
    token, chat = token_of(fake), fake.p2p_chat("edits")
    fake.configure(edits_per_message=2)
    message = send(fake, token, chat, "v0")[1]["data"]["message_id"]
    path = f"/open-apis/im/v1/messages/{message}"
    for i in (1, 2):
        assert call(fake, "PUT", path, {"msg_type": "text", "content": json.dumps({"text": f"v{i}"})}, token)[0] == 200
    capped = call(fake, "PUT", path, {"msg_type": "text", "content": json.dumps({"text": "v3"})}, token)
    assert capped[0] == 400 and capped[1]["code"] == 230072 and fake.messages(chat)[0]["text"] == "v2"
    assert call(fake, "DELETE", path, token=token)[0] == 200
    assert call(fake, "DELETE", path, token=token)[1]["code"] == 230011


def test_callbacks_are_encrypted_signed_and_redelivered_until_answered_200(fake):
    seen, answers = [], [500, 200]

    class Receiver(FakeServer):
        def initial_state(self):
            return {}

        def add_routes(self, app):
            async def take(request):
                body = await request.read()
                headers = request.headers
                assert headers["X-Lark-Signature"] == signature(
                    DEFAULT_ENCRYPT_KEY, headers["X-Lark-Request-Timestamp"], headers["X-Lark-Request-Nonce"], body)
                seen.append(json.loads(decrypt(DEFAULT_ENCRYPT_KEY, json.loads(body)["encrypt"])))
                return web.Response(status=answers.pop(0))
            app.router.add_post("/events", take)

    fake.configure(retry_delays=[0.1])
    with Receiver() as receiver:
        fake.callback_url = f"{receiver.base_url}/events"
        handle = fake.inject_text(fake.p2p_chat("cb"), fake.user("cb"), "hi")
        fake.wait_for(lambda: fake.callback(handle)["state"] == "acked", timeout=20)
    assert [a["status"] for a in fake.callback(handle)["attempts"]] == [500, 200]
    first, again = seen
    assert first == again and first["header"]["event_type"] == "im.message.receive_v1"
    assert json.loads(first["event"]["message"]["content"]) == {"text": "hi"}


def test_an_image_is_served_by_its_message_and_key(fake):
    token = token_of(fake)
    handle = fake.inject_image(fake.p2p_chat("img"), fake.user("img"), b"\x89PNG bytes")
    message = fake.callback(handle)["event"]["event"]["message"]
    key = json.loads(message["content"])["image_key"]
    path = f"/open-apis/im/v1/messages/{message['message_id']}/resources/{key}?type=image"
    assert call(fake, "GET", path, token=token)[1] == b"\x89PNG bytes"
    assert call(fake, "GET", path.replace(key, "img_other"), token=token)[1]["code"] == 234003


def test_the_apps_reactions_are_added_listed_removed_and_their_history_kept(fake):
    token = token_of(fake)
    handle = fake.inject_text(fake.p2p_chat("react"), fake.user("react"), "react to me")
    message = fake.callback(handle)["event"]["event"]["message"]["message_id"]
    path = f"/open-apis/im/v1/messages/{message}/reactions"
    added = call(fake, "POST", path, {"reaction_type": {"emoji_type": "THUMBSUP"}}, token)[1]["data"]
    assert added["operator"] == {"operator_id": DEFAULT_APP_ID, "operator_type": "app"}
    assert [r["reaction_id"] for r in call(fake, "GET", path, token=token)[1]["data"]["items"]] == [
        added["reaction_id"]]
    assert call(fake, "DELETE", f"{path}/{added['reaction_id']}", token=token)[0] == 200
    assert call(fake, "DELETE", f"{path}/{added['reaction_id']}", token=token)[0] == 400
    assert fake.reaction_history(message) == [["THUMBSUP"], []]
