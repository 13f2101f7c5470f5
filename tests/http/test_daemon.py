"""The http adapter in the real daemon: signed webhooks in and out, and the `openai` client from PyPI talking to
/v1/chat/completions with the offline agent answering. One daemon for the module; each test uses its own
conversations."""
from __future__ import annotations

import asyncio
import base64
import json
import socket
import time
import uuid

import openai
import pytest

from actors.adapters.http.signing import sign
from storage import Store, StorageError
from tests.actor_system import free_port, wait_for
from tests.gateway import Gateway
from tests.http.fakes import CallbackReceiver, WebhookSender

pytestmark = pytest.mark.timeout(90)
SECRET, TOKEN, OTHER_TOKEN = "daemon-webhook-secret", "daemon-api-token-0123", "daemon-api-token-4567"


class Api:
    def __init__(self, gateway: Gateway, receiver: CallbackReceiver, port: int):
        self.gateway, self.receiver, self.port = gateway, receiver, port
        self.sender = WebhookSender(f"http://127.0.0.1:{port}/webhook", SECRET)

    def client(self, token: str = TOKEN) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key=token, max_retries=0, timeout=30)

    def inbox(self, what):
        async def read():
            async with await Store.open(self.gateway.state / "gateway.db") as store:
                return await what(store.inbox)
        return wait_for(lambda: _or_none(lambda: asyncio.run(read())), 10, 0.05, "the inbox")

    def total_rows(self) -> int:
        return self.inbox(lambda inbox: _total(inbox))[0]


async def _total(inbox):
    return (sum((await inbox.counts()).values()),)


def _or_none(read):
    try:
        return read()
    except StorageError:
        return None


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("http-api")
    receiver = CallbackReceiver(SECRET).start()
    port = free_port()
    gateway = Gateway(workdir, watchdog_interval=30.0, extra_toml=f"""
[adapters.api]
type = "http"
port = {port}
hmac_secret = "{SECRET}"
callback_url = "{receiver.url}"
api_tokens = ["{TOKEN}", "{OTHER_TOKEN}"]
profiles = ["default", "work"]
models = {{ "gpt-4o-mini" = "work" }}
[agent]
chunk_delay_s = 0.0
[profiles.work]
busy_mode = "queue"
[profiles.private]
busy_mode = "queue"
""")
    try:
        gateway.start()
        gateway.wait_ready()
        wait_for(lambda: _listening(port), 20, 0.05, "the HTTP server")
        yield Api(gateway, receiver, port)
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        receiver.stop()


def conversation() -> str:
    return f"conv-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------------------------------------------ webhook

def test_a_bad_signature_is_refused_before_anything_is_stored(api):
    before = api.total_rows()
    body = json.dumps({"conversation_id": conversation(), "user_id": "eve", "message_id": "m1",
                       "text": "let me in"}).encode()
    assert api.sender.post(body, signature=None)[0] == 401
    assert api.sender.post(body, signature="sha256=" + "0" * 64)[0] == 401
    tampered = body.replace(b"let me in", b"let me out")
    assert api.sender.post(tampered, signature=sign(SECRET, body, int(time.time())))[0] == 401
    status, answer = api.sender.post(body, at=int(time.time()) - 3600)   # well signed, an hour ago: a replay
    assert status == 401 and "from this server's clock" in answer["error"], answer
    assert api.total_rows() == before, "a refused request never reaches the inbox"
    log = wait_for(lambda: (text := api.gateway.log()) and "bad or missing signature" in text and text, 10, 0.05,
                   "the refusal in the log")   # written by the adapter's actor thread, a moment after the 401
    assert SECRET not in log


def test_a_signed_message_is_stored_once_and_answered_through_the_callback(api):
    chat = conversation()
    body = json.dumps({"conversation_id": chat, "user_id": "alice", "message_id": "m1",
                       "text": "hello from the webhook"}).encode()
    status, answer = api.sender.post(body)
    assert status == 202 and answer["accepted"] is True and isinstance(answer["seq"], int)
    row = api.inbox(lambda inbox: inbox.get(answer["seq"]))
    assert row.platform == "api" and row.platform_message_id == f"{chat}/m1"   # durable before the 202
    assert row.payload["text"] == "hello from the webhook" and row.payload["source"]["chat_id"] == chat
    assert api.sender.post(body) == (200, {"duplicate": True, "seq": answer["seq"]})

    final = wait_for(lambda: next((p for p in api.receiver.received if p["conversation_id"] == chat
                                   and p["final"]), None), 30, 0.05, "the reply at the callback")
    assert 'You said: "hello from the webhook"' in final["text"] and final["in_reply_to"] == "m1"
    assert api.receiver.bad_signatures == 0, "every callback is signed with the same secret"
    assert [m["text"] for m in api.receiver.messages(chat)] == [final["text"]]


def test_a_drawn_card_reaches_the_callback_and_the_openai_client_as_an_image_part(api):
    chat = conversation()
    body = json.dumps({"conversation_id": chat, "user_id": "alice", "message_id": "card",
                       "text": "draw a card saying gone fishing"}).encode()
    assert api.sender.post(body)[0] == 202
    sent = wait_for(lambda: next((p for p in api.receiver.received if p["conversation_id"] == chat
                                  and p.get("content")), None), 30, 0.05, "the card at the callback")
    (part,) = sent["content"]
    assert part["type"] == "image_url" and sent["text"] == "drawn offline" and sent["action"] == "send"
    assert base64.b64decode(part["image_url"]["url"].split(",", 1)[1]).startswith(b"\x89PNG")

    answer = api.client().chat.completions.create(model="work", messages=[
        {"role": "user", "content": "draw a card saying back soon"}])
    text, image = answer.choices[0].message.content
    assert "I used the text_image tool" in text["text"] and image["type"] == "image_url"
    assert image["image_url"]["url"].startswith("data:image/png;base64,")


def test_malformed_and_oversized_bodies_are_refused(api):
    before = api.total_rows()
    bad = json.dumps({"conversation_id": conversation(), "user_id": "u", "message_id": "m", "text": 5}).encode()
    status, answer = api.sender.post(bad)
    assert status == 400 and "text must be a string" in answer["error"]
    assert api.sender.post(b"not json")[0] == 400
    huge = json.dumps({"conversation_id": conversation(), "user_id": "u", "message_id": "m",
                       "text": "x" * 1_100_000}).encode()
    assert api.sender.post(huge)[0] == 413
    assert api.total_rows() == before


def test_a_text_over_the_gateways_limit_is_a_413_that_says_so_and_nothing_is_stored(api):
    before = api.total_rows()
    long = json.dumps({"conversation_id": conversation(), "user_id": "u", "message_id": "m-long",
                       "text": "x" * 16_001}).encode()      # within the body limit, over [gateway] max_text_chars
    status, answer = api.sender.post(long)
    assert status == 413 and "16,001 characters long" in answer["error"] and "at most 16,000" in answer["error"]
    with pytest.raises(openai.APIStatusError) as refused:
        api.client().chat.completions.create(model="work", messages=[{"role": "user", "content": "y" * 16_001}])
    assert refused.value.status_code == 413 and "shorter parts" in str(refused.value)
    assert api.total_rows() == before


# --------------------------------------------------------------------------------------------------- openai API

def test_the_openai_client_gets_the_offline_agents_answer(api):
    answer = api.client().chat.completions.create(model="work", messages=[
        {"role": "system", "content": "You are terse."}, {"role": "user", "content": "Tell me about otters"}])
    text = answer.choices[0].message.content
    assert text.startswith('You said: "Tell me about otters"') and "offline agent" in text
    assert answer.choices[0].finish_reason == "stop" and answer.model == "work"


def test_a_streaming_call_yields_chunks_that_add_up_to_the_answer(api):
    prompt = f"Stream this please {uuid.uuid4().hex[:6]}"
    chunks = list(api.client().chat.completions.create(model="work", stream=True,
                                                        messages=[{"role": "user", "content": prompt}]))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert len(chunks) >= 3 and chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop" and all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    plain = api.client().chat.completions.create(model="work", messages=[{"role": "user", "content": prompt}])
    assert streamed == plain.choices[0].message.content, "a fresh conversation each: the same answer either way"
    assert streamed.startswith(f'You said: "{prompt}"')


def test_a_wrong_key_is_an_authentication_error(api):
    with pytest.raises(openai.AuthenticationError) as refused:
        api.client("not-a-token").chat.completions.create(model="work", messages=[{"role": "user", "content": "x"}])
    assert refused.value.status_code == 401 and refused.value.body["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        api.client("not-a-token").models.list()
    wait_for(lambda: api.gateway.log().count("missing or unknown bearer token") >= 2, 10, 0.05, "the refusals")
    assert "not-a-token" not in api.gateway.log()


def test_the_user_field_keeps_a_conversation_per_token_and_models_lists_profiles(api):
    user = f"carol-{uuid.uuid4().hex[:6]}"

    def ask(token: str, text: str) -> str:
        return api.client(token).chat.completions.create(
            model="work", user=user, messages=[{"role": "user", "content": text}]).choices[0].message.content

    assert "has 1 message from you" in ask(TOKEN, "first")
    assert "has 2 messages from you" in ask(TOKEN, "second")
    assert "has 1 message from you" in ask(OTHER_TOKEN, "first"), "another token never joins this conversation"
    assert sorted(m.id for m in api.client().models.list().data) == ["default", "work"]


def test_the_model_picks_the_profile_and_each_profile_keeps_its_own_session(api):
    user = f"dana-{uuid.uuid4().hex[:6]}"

    def ask(model: str, text: str) -> str:
        return api.client().chat.completions.create(
            model=model, user=user, messages=[{"role": "user", "content": text}]).choices[0].message.content

    assert "has 1 message from you" in ask("profile:work", "for work")
    assert "has 1 message from you" in ask("default", "for me"), "another profile: another session"
    assert "has 2 messages from you" in ask("gpt-4o-mini", "work again"), "a configured model name"
    chunks = list(api.client().chat.completions.create(model="work", user=user, stream=True,
                                                        messages=[{"role": "user", "content": "stream it"}]))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert "has 3 messages from you" in streamed and chunks[0].model == "work"
    assert "has 2 messages from you" in ask("", "me again"), "no model: the adapter's own profile"

    async def sessions_of_user():
        async with await Store.open(api.gateway.state / "gateway.db") as store:
            infos = await store.sessions.list(limit=10_000)
            return {i.session_key: [e.payload.get("text") for e in await store.sessions.load(i.session_id)
                                    if e.role == "user"]
                    for i in infos if user in str(i.source)}
    sessions = asyncio.run(sessions_of_user())
    by_profile = {key.split(".", 1)[0]: texts for key, texts in sessions.items()}
    assert len(sessions) == 2 and set(by_profile) == {"default", "work"}, sessions
    assert by_profile["work"] == ["for work", "work again", "stream it"]
    assert by_profile["default"] == ["for me", "me again"]


def test_a_model_that_names_no_served_profile_is_a_404_and_nothing_is_stored(api):
    before = api.total_rows()
    for model in ("profile:private", "profile:nope", "gpt-4o"):
        with pytest.raises(openai.NotFoundError) as refused:
            api.client().chat.completions.create(model=model, messages=[{"role": "user", "content": "hello?"}])
        error = refused.value.body
        assert refused.value.status_code == 404 and error["code"] == "model_not_found", model
        assert model.removeprefix("profile:") in error["message"] and "profiles: default, work" in error["message"]
    with pytest.raises(openai.NotFoundError):
        list(api.client().chat.completions.create(model="profile:nope", stream=True,
                                                  messages=[{"role": "user", "content": "hello?"}]))
    assert api.total_rows() == before, "a refused request never reaches the inbox"
    assert sorted(m.id for m in api.client().models.list().data) == ["default", "work"], "private is not served"
