"""The fake Google Chat on its own: the token endpoint's checks of a service account's assertion, the Chat API's
answers (a token needed, requestId answered with the message it created, patch and delete, 404s), the per-space
write quota and scripted 429 bans, the published keys, and events signed and posted the way Google's documentation
describes, against a small receiver written here (no gateway)."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request

import jwt
import pytest
from aiohttp import web
from cryptography import x509

from tests.fakes.googlechat import DEFAULT_AUDIENCE, FakeGoogleChat, event_token
from tests.fakes.googlechat.keys import ACCOUNT_EMAIL, ACCOUNT_KID, SIGNING_KID, private_pem, rsa_key
from tests.fakes.harness import FakeServer

pytestmark = pytest.mark.timeout(60)


def call(fake: FakeGoogleChat, method: str, path: str, body=None, token: str = "", form=None) -> tuple:
    """(status, JSON answer) of one call."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = None
    if form is not None:
        data, headers["Content-Type"] = urllib.parse.urlencode(form).encode(), "application/x-www-form-urlencoded"
    elif body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    request = urllib.request.Request(f"{fake.base_url}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def assertion(fake: FakeGoogleChat, *, key: str = "account", scope: str = "https://www.googleapis.com/auth/chat.bot",
              lifetime: int = 3600, audience: str = "") -> str:
    now = int(time.time())
    claims = {"iss": ACCOUNT_EMAIL, "scope": scope, "aud": audience or fake.token_url, "iat": now,
              "exp": now + lifetime}
    return jwt.encode(claims, private_pem(rsa_key(key)), algorithm="RS256", headers={"kid": ACCOUNT_KID})


def grant(fake: FakeGoogleChat, signed: str) -> tuple:
    return call(fake, "POST", "/token", form={"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                              "assertion": signed})


@pytest.fixture(scope="module")
def fake():
    with FakeGoogleChat(answer_timeout=2.0) as server:
        yield server


@pytest.fixture(scope="module")
def token(fake):
    status, answer = grant(fake, assertion(fake))
    assert status == 200 and answer["token_type"] == "Bearer" and answer["expires_in"] == 3600
    return answer["access_token"]


def test_the_token_endpoint_takes_only_the_service_accounts_assertion(fake, token):
    for signed, error in ((assertion(fake, key="other"), "invalid_grant"),
                          (assertion(fake, scope="https://www.googleapis.com/auth/drive"), "invalid_scope"),
                          (assertion(fake, lifetime=7200), "invalid_grant"),
                          (assertion(fake, audience="https://elsewhere/token"), "invalid_grant")):
        status, answer = grant(fake, signed)
        assert (status, answer["error"]) == (400, error), answer
    assert call(fake, "POST", "/token", form={"grant_type": "password"})[0] == 400


def test_every_api_call_needs_a_granted_token(fake, token):
    space = fake.dm("auth")
    assert call(fake, "GET", f"/v1/{space}", token=token)[1]["spaceType"] == "DIRECT_MESSAGE"
    status, answer = call(fake, "POST", f"/v1/{space}/messages", {"text": "x"}, token="ya29.made-up")
    assert status == 401 and answer["error"]["status"] == "UNAUTHENTICATED"
    assert fake.messages(space) == []


def test_a_repeated_request_id_returns_the_message_it_created(fake, token):
    space = fake.dm("request-ids")
    status, first = call(fake, "POST", f"/v1/{space}/messages?requestId=r-1", {"text": "once"}, token=token)
    assert status == 200 and first["name"].startswith(space + "/messages/")
    status, again = call(fake, "POST", f"/v1/{space}/messages?requestId=r-1", {"text": "changed"}, token=token)
    assert status == 200 and again["name"] == first["name"] and again["text"] == "once"
    other = call(fake, "POST", f"/v1/{space}/messages?requestId=r-2", {"text": "once"}, token=token)[1]
    assert other["name"] != first["name"]
    assert [m["text"] for m in fake.messages(space)] == ["once", "once"]


def test_patch_delete_threads_and_limits(fake, token):
    space = fake.space("threads")
    thread = f"{space}/threads/abc"
    query = "?requestId=t-1&messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"
    created = call(fake, "POST", f"/v1/{space}/messages{query}", {"text": "a", "thread": {"name": thread}},
                   token=token)[1]
    assert created["thread"]["name"] == thread
    unthreaded = call(fake, "POST", f"/v1/{space}/messages", {"text": "b", "thread": {"name": thread}},
                      token=token)[1]
    assert unthreaded["thread"]["name"] != thread, "without a reply option a message starts a thread"
    assert call(fake, "PATCH", f"/v1/{created['name']}?updateMask=text", {"text": "a2"}, token=token)[1]["text"] == "a2"
    assert call(fake, "PATCH", f"/v1/{created['name']}", {"text": "a3"}, token=token)[0] == 400
    assert call(fake, "POST", f"/v1/{space}/messages", {"text": "x" * 4097}, token=token)[0] == 400
    assert call(fake, "DELETE", f"/v1/{created['name']}", token=token)[0] == 200
    assert call(fake, "DELETE", f"/v1/{created['name']}", token=token)[0] == 404
    assert call(fake, "PATCH", f"/v1/{space}/messages/nothing.1?updateMask=text", {"text": "x"}, token=token)[0] == 404
    assert [(m["text"], m["deleted"]) for m in fake.messages(space)] == [("a2", True), ("b", False)]


def test_the_space_write_quota_and_scripted_bans_answer_429(fake, token):
    space = fake.dm("quota")
    fake.configure(space_writes_per_minute=3)
    try:
        statuses = [call(fake, "POST", f"/v1/{space}/messages", {"text": str(i)}, token=token)[0] for i in range(4)]
    finally:
        fake.configure(space_writes_per_minute=60)
    assert statuses == [200, 200, 200, 429] and fake.stats()["pace_violations"] == 1
    other = fake.dm("banned")
    fake.set_faults(next=["flood"], flood_retry_after=30.0)
    try:
        status, answer = call(fake, "POST", f"/v1/{other}/messages", {"text": "x"}, token=token)
        assert (status, answer["error"]["status"]) == (429, "RESOURCE_EXHAUSTED")
        assert call(fake, "POST", f"/v1/{other}/messages", {"text": "x"}, token=token)[0] == 429
    finally:
        fake.set_faults()
    assert fake.stats()["retry_after_violations"] == 1


def test_the_published_keys_verify_the_event_tokens(fake):
    status, certs = call(fake, "GET", "/certs/x509")
    public = x509.load_pem_x509_certificate(certs[SIGNING_KID].encode()).public_key()
    claims = jwt.decode(event_token(DEFAULT_AUDIENCE), public, algorithms=["RS256"], audience=DEFAULT_AUDIENCE)
    assert claims["iss"] == "chat@system.gserviceaccount.com"
    [key] = call(fake, "GET", "/certs/jwks")[1]["keys"]
    url = "https://bot.example.com/events"
    claims = jwt.decode(event_token(url), jwt.PyJWK(key).key, algorithms=["RS256"], audience=url)
    assert (claims["iss"], claims["email"]) == ("https://accounts.google.com", "chat@system.gserviceaccount.com")


class Receiver(FakeServer):
    """The app's endpoint: records each request's Authorization header and body, answers ``status``."""

    def __init__(self):
        super().__init__()
        self.got: list = []
        self.status = 200

    def initial_state(self) -> dict:
        return {}

    def add_routes(self, app):
        async def take(request):
            self.got.append((request.headers.get("Authorization"), await request.json()))
            return web.json_response({}, status=self.status)
        app.router.add_post("/events", take)


def test_events_are_posted_once_with_a_fresh_token_and_retried_only_when_asked():
    with Receiver() as app, FakeGoogleChat(webhook_url=None, answer_timeout=2.0) as fake:
        fake.webhook_url = f"{app.base_url}/events"
        space = fake.space("team")
        delivery = fake.inject_text(space, "hello there", "bob")
        fake.wait_for(lambda: fake.delivery(delivery)["state"] == "acked", 10)
        [(header, event)] = app.got
        assert jwt.decode(header.split(" ", 1)[1], rsa_key("chat").public_key(), algorithms=["RS256"],
                          audience=DEFAULT_AUDIENCE)["iss"] == "chat@system.gserviceaccount.com"
        message = event["message"]
        assert event["type"] == "MESSAGE" and message["text"] == "@Gateway hello there"
        assert message["argumentText"] == " hello there" and message["sender"]["name"] == fake.user("bob")
        assert event["space"]["spaceThreadingState"] == "THREADED_MESSAGES"
        app.status = 500
        failed = fake.inject_text(fake.dm("bob"), "again")
        fake.wait_for(lambda: fake.delivery(failed)["state"] == "given_up", 10)
        assert len(fake.delivery(failed)["attempts"]) == 1, "Google Chat posts an event once"
