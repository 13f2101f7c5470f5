"""The fake LINE on its own: the reply and push APIs' answers (reply tokens single use and expiring, retry keys
answered 409 with the first push, the monthly quota, 429 bans), the loading animation, content, and webhooks signed
and redelivered the way LINE's documentation describes, against a small receiver written here (no gateway)."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
import uuid

import pytest
from aiohttp import web

from tests.fakes.harness import FakeServer
from tests.fakes.line import DEFAULT_ACCESS_TOKEN, DEFAULT_BOT_USER, DEFAULT_CHANNEL_SECRET, FakeLine

pytestmark = pytest.mark.timeout(60)


def call(fake: FakeLine, path: str, body=None, token: str = DEFAULT_ACCESS_TOKEN, **headers) -> tuple:
    """(status, JSON answer or raw bytes, headers) of one call."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{fake.base_url}{path}", data=data, method="GET" if body is None else "POST",
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                                              **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            status, raw, answer_headers = resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as exc:
        status, raw, answer_headers = exc.code, exc.read(), exc.headers
    try:
        return status, json.loads(raw), answer_headers
    except ValueError:
        return status, raw, answer_headers


def text(value: str) -> list:
    return [{"type": "text", "text": value}]


def push(fake: FakeLine, to: str, value: str, key=None) -> tuple:
    headers = {"X-Line-Retry-Key": key} if key else {}
    return call(fake, "/v2/bot/message/push", {"to": to, "messages": text(value)}, **headers)


@pytest.fixture(scope="module")
def fake():
    with FakeLine(answer_timeout=0.5, retry_delays=[0.05]) as server:
        yield server


def test_every_call_needs_the_channel_access_token(fake):
    assert call(fake, "/v2/bot/info")[1]["userId"] == DEFAULT_BOT_USER
    status, answer, _ = call(fake, "/v2/bot/info", token="wrong")
    assert status == 401 and "access token" in answer["message"]


def test_a_reply_token_is_used_once_and_expires(fake):
    user = fake.user("replier")
    token = fake.event(user, None)["replyToken"]
    status, answer, _ = call(fake, "/v2/bot/message/reply", {"replyToken": token, "messages": text("hi")})
    assert status == 200 and answer["sentMessages"][0]["id"]
    again = call(fake, "/v2/bot/message/reply", {"replyToken": token, "messages": text("hi again")})
    assert again[0] == 400 and again[1]["message"] == "Invalid reply token"
    stale = fake.event(user, None)["replyToken"]
    fake.expire_reply_tokens()
    assert call(fake, "/v2/bot/message/reply", {"replyToken": stale, "messages": text("late")})[0] == 400
    keyed = fake.event(user, None)["replyToken"]
    assert call(fake, "/v2/bot/message/reply", {"replyToken": keyed, "messages": text("x")},
                **{"X-Line-Retry-Key": str(uuid.uuid4())})[0] == 400, "replies take no retry key"
    assert [(m["text"], m["via"]) for m in fake.messages(user)] == [("hi", "reply")]


def test_a_repeated_retry_key_is_409_with_the_first_push_and_sends_nothing(fake):
    user, key = fake.user("retrier"), str(uuid.uuid4())
    status, first, headers = push(fake, user, "once", key)
    assert status == 200
    status, again, headers = push(fake, user, "once", key)
    assert status == 409 and again["sentMessages"] == first["sentMessages"]
    assert headers["x-line-accepted-request-id"]
    assert push(fake, user, "bad key", "not-a-uuid")[0] == 400
    assert [m["text"] for m in fake.messages(user)] == ["once"]


def test_messages_are_1_to_5_texts_of_at_most_5000_units(fake):
    user = fake.user("limits")
    assert push(fake, user, "x" * 5000)[0] == 200
    status, answer, _ = push(fake, user, "x" * 5001)
    assert status == 400 and "Length" in answer["details"][0]["message"]
    assert push(fake, user, "\U0001F600" * 2501)[0] == 400, "an emoji is two UTF-16 units"
    six = call(fake, "/v2/bot/message/push", {"to": user, "messages": text("a") * 6})
    assert six[0] == 400


def test_the_monthly_quota_answers_429_with_its_own_message():
    with FakeLine(push_quota=1) as line:
        user = line.user("quota")
        assert push(line, user, "the last one", str(uuid.uuid4()))[0] == 200
        status, answer, _ = push(line, user, "one too many", str(uuid.uuid4()))
        assert status == 429 and answer["message"] == "You have reached your monthly limit."
        assert line.stats()["quota_refusals"] == 1 and len(line.messages(user)) == 1


def test_a_scripted_flood_bans_the_chat_and_counts_calls_inside_the_ban(fake):
    user = fake.user("flood")
    fake.set_faults(next=["flood"], flood_retry_after=0.5)
    try:
        assert push(fake, user, "a")[0] == 429
        assert push(fake, user, "b")[0] == 429
        assert fake.stats()["retry_after_violations"] == 1
        assert push(fake, fake.user("elsewhere"), "c")[0] == 200, "the ban is the chat's"
    finally:
        fake.set_faults()
    deadline, answers = time.monotonic() + 5, []
    while not answers or answers[-1] != 200:   # the ban ends 0.5 s after the 429 (a poll with a deadline)
        assert time.monotonic() < deadline, f"the chat is still refused: {answers}"
        answers.append(push(fake, user, "d")[0])
        time.sleep(0.1)


def test_the_loading_animation_is_for_users_and_5_to_60_seconds_in_steps_of_5(fake):
    user = fake.user("loading")
    assert call(fake, "/v2/bot/chat/loading/start", {"chatId": user, "loadingSeconds": 20})[0] == 202
    assert call(fake, "/v2/bot/chat/loading/start", {"chatId": user, "loadingSeconds": 7})[0] == 400
    assert call(fake, "/v2/bot/chat/loading/start", {"chatId": fake.group("g"), "loadingSeconds": 5})[0] == 400
    assert [e["loadingSeconds"] for e in fake.loading(user)] == [20]
    assert fake.stats()["loading_refused"] == 2


class Receiver(FakeServer):
    """A bot's webhook URL, checking the signature as a bot must. ``statuses``: the answers to give, in order
    (then 200)."""

    def __init__(self, statuses=()):
        self.statuses = list(statuses)
        self.bodies: list[dict] = []
        self.problems: list[str] = []
        super().__init__()

    def initial_state(self) -> dict:
        return {}

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/hook", self.handle)
        app.router.add_get("/media/{name}", self.serve_file)

    async def serve_file(self, request: web.Request) -> web.Response:
        """A bot's file, as the gateway's webhook server serves one (``gone.png``: one it no longer has)."""
        name = request.match_info["name"]
        if name == "gone.png":
            return web.Response(status=404)
        return web.Response(body=b"\x89PNG served " + name.encode(), content_type="image/png")

    @property
    def url(self) -> str:
        return f"{self.base_url}/hook"

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        expected = base64.b64encode(hmac.new(DEFAULT_CHANNEL_SECRET.encode(), raw, hashlib.sha256).digest()).decode()
        if request.headers.get("X-Line-Signature") != expected:
            self.problems.append("bad signature")
        self.bodies.append(json.loads(raw))
        return web.Response(status=self.statuses.pop(0) if self.statuses else 200)


def test_a_webhook_is_signed_and_redelivered_with_the_same_event_id_until_answered(fake):
    with Receiver(statuses=[500]) as receiver:
        fake.webhook_url = receiver.url
        user = fake.user("hooked")
        handle = fake.inject_text(user, "hello")
        fake.wait_for(lambda: fake.webhook(handle)["state"] == "acked", timeout=10)
    assert receiver.problems == []
    first, second = receiver.bodies
    assert first["destination"] == DEFAULT_BOT_USER
    [event], [again] = first["events"], second["events"]
    assert event["message"]["text"] == "hello" and event["source"] == {"type": "user", "userId": user}
    assert event["deliveryContext"] == {"isRedelivery": False} and again["deliveryContext"] == {"isRedelivery": True}
    assert again["webhookEventId"] == event["webhookEventId"] and again["message"]["id"] == event["message"]["id"]


def test_an_injected_file_is_served_by_the_content_endpoint(fake):
    with Receiver() as receiver:
        fake.webhook_url = receiver.url
        handle = fake.inject_file(fake.group("files"), b"\x89PNG fake bytes")
        fake.wait_for(lambda: fake.webhook(handle)["state"] == "acked", timeout=10)
    [event] = receiver.bodies[-1]["events"]
    assert event["source"]["type"] == "group" and event["message"]["type"] == "image"
    status, data, _ = call(fake, f"/v2/bot/message/{event['message']['id']}/content")
    assert status == 200 and data == b"\x89PNG fake bytes"
    assert call(fake, "/v2/bot/message/1/content")[0] == 404


def media(kind: str, **fields) -> list:
    return [{"type": kind, **fields}]


def test_image_video_and_audio_messages_need_https_urls_and_an_audios_duration(fake):
    user, push_path = fake.user("media-rules"), "/v2/bot/message/push"
    url, preview = "https://bot.example/media/a.png", "https://bot.example/media/p.png"
    for kind in ("image", "video"):
        assert call(fake, push_path, {"to": user, "messages": media(kind, originalContentUrl=url,
                                                                     previewImageUrl=preview)})[0] == 200
        status, answer, _ = call(fake, push_path, {"to": user, "messages": media(kind, originalContentUrl=url)})
        assert status == 400 and answer["details"][0]["property"] == "messages[0].previewImageUrl"
    assert call(fake, push_path, {"to": user, "messages": media("audio", originalContentUrl=url,
                                                                 duration=1500)})[0] == 200
    refused = [media("audio", originalContentUrl=url), media("audio", originalContentUrl=url, duration=0),
               media("image", originalContentUrl="http://bot.example/a.png", previewImageUrl=preview),
               media("image", originalContentUrl="https://bot.example/" + "a" * 2000, previewImageUrl=preview),
               media("file", originalContentUrl=url)]
    for messages in refused:
        status, answer, _ = call(fake, push_path, {"to": user, "messages": messages})
        assert status == 400 and answer["details"], (messages, answer)
    assert [m["type"] for m in fake.messages(user)] == ["image", "video", "audio"]


def test_a_media_messages_urls_are_fetched_from_the_webhooks_origin_when_the_chat_is_viewed(fake):
    user = fake.user("media-viewed")
    with Receiver() as receiver:
        fake.webhook_url = receiver.url
        messages = media("image", originalContentUrl="https://bot.example/media/a.png",
                         previewImageUrl="https://bot.example/media/gone.png")
        assert call(fake, "/v2/bot/message/push", {"to": user, "messages": messages})[0] == 200
        before = fake.stats()["media_fetches"]
        [shown] = fake.view(user)
        assert fake.view(user) == [shown], "each URL is fetched once"
    assert shown["fetched"]["originalContentUrl"] == {
        "status": 200, "sha256": hashlib.sha256(b"\x89PNG served a.png").hexdigest(), "size": 17,
        "type": "image/png"}
    assert shown["fetched"]["previewImageUrl"]["status"] == 404
    assert fake.stats()["media_fetches"] == before + 2
