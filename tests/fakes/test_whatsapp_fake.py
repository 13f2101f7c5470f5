"""The fake WhatsApp Cloud API on its own: the Graph API's answers (the window rule, errors, media, pacing counts)
and webhooks signed, delivered and retried the way Meta's documentation describes, against a small receiver
written here (no gateway)."""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from aiohttp import web

from tests.fakes.whatsapp import DEFAULT_APP_SECRET, DEFAULT_PHONE_NUMBER_ID, DEFAULT_TOKEN, FakeWhatsApp

pytestmark = pytest.mark.timeout(60)
USER = "15551230001"


def call(fake: FakeWhatsApp, path: str, body=None, token: str = DEFAULT_TOKEN) -> tuple[int, dict]:
    request = urllib.request.Request(f"{fake.base_url}/v21.0{path}", method="GET" if body is None else "POST",
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def text(fake: FakeWhatsApp, user: str, body: str, **extra) -> tuple[int, dict]:
    return call(fake, f"/{DEFAULT_PHONE_NUMBER_ID}/messages", {"messaging_product": "whatsapp", "to": user,
                                                               "type": "text", "text": {"body": body}, **extra})


class Receiver:
    """A webhook endpoint in a thread: records each POST, answers ``statuses`` in turn (then 200); a GET is the
    handshake, passed with the verify token "right"."""

    def __init__(self):
        self.requests: list[tuple[dict, bytes]] = []
        self.statuses: list[int] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.url = ""

    async def _handle(self, request: web.Request) -> web.Response:
        self.requests.append((dict(request.headers), await request.read()))
        return web.Response(status=self.statuses.pop(0) if self.statuses else 200)

    async def _handshake(self, request: web.Request) -> web.Response:
        ok = request.query.get("hub.verify_token") == "right" and request.query.get("hub.mode") == "subscribe"
        return web.Response(text=request.query["hub.challenge"] if ok else "no", status=200 if ok else 403)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        app.router.add_get("/hook", self._handshake)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}/hook"

    def __enter__(self):
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def fake():
    with FakeWhatsApp(retry_delays=[0.05], retries=3) as server:
        yield server


def test_a_webhook_is_signed_with_the_app_secret_and_retried_until_answered_200(fake):
    with Receiver() as receiver:
        fake.webhook_url = receiver.url
        receiver.statuses = [500, 503]
        handle = fake.inject_text(USER, "hello")
        fake.wait_for(lambda: fake.delivery(handle)["state"] == "acked", 10)
        assert [a["status"] for a in fake.delivery(handle)["attempts"]] == [500, 503, 200]
        bodies = {body for _, body in receiver.requests}
        assert len(bodies) == 1, "every retry carries the same body"
        headers, body = receiver.requests[-1]
        expected = "sha256=" + hmac.new(DEFAULT_APP_SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert headers["X-Hub-Signature-256"] == expected
        message = json.loads(body)["entry"][0]["changes"][0]["value"]["messages"][0]
        assert message["from"] == USER and message["text"] == {"body": "hello"} and message["id"].startswith("wamid.")
        again = fake.redeliver(handle)
        fake.wait_for(lambda: fake.delivery(again)["state"] == "acked", 10)
        assert receiver.requests[-1][1] == body, "a redelivery is the same body, the same wamid"


def test_the_handshake_needs_the_verify_token_and_echoes_the_challenge(fake):
    with Receiver() as receiver:
        fake.verify_token = "wrong"
        assert not fake.verify_url(receiver.url)["verified"] and fake.webhook_url is None
        fake.verify_token = "right"
        assert fake.verify_url(receiver.url)["verified"] and fake.webhook_url == receiver.url


def test_free_text_outside_the_24_hour_window_is_refused_with_131047(fake):
    fake.add_user(USER, last_inbound=time.time() - 25 * 3600)
    status, answer = text(fake, USER, "too late")
    assert status == 400 and answer["error"]["code"] == 131047 and fake.messages(USER) == []
    fake.add_user(USER, last_inbound=time.time())
    status, answer = text(fake, USER, "in time", context={"message_id": "wamid.X"})
    assert status == 200 and answer["messages"][0]["id"].startswith("wamid.")
    assert [(m["text"], m["reply_to"]) for m in fake.messages(USER)] == [("in time", "wamid.X")]
    assert fake.stats()["window_refusals"] == 1


def test_an_approved_template_reaches_a_user_past_the_window_and_a_refused_one_says_why(fake):
    fake.add_user(USER, last_inbound=time.time() - 25 * 3600)
    fake.approve_template("reply_later", "en_US", "Your answer is ready: {{1}}")
    fake.approve_template("with_footer", "en_US", "Hi {{1}}", body_only=False)

    def template(name, *parameters, language="en_US"):
        body = [{"type": "body", "parameters": [{"type": "text", "text": p} for p in parameters]}]
        status, answer = call(fake, f"/{DEFAULT_PHONE_NUMBER_ID}/messages", {
            "messaging_product": "whatsapp", "to": USER, "type": "template",
            "template": {"name": name, "language": {"code": language}, "components": body}})
        return answer["error"]["code"] if status != 200 else answer["messages"][0]["id"]

    wamid = template("reply_later", "it is 42")
    assert wamid.startswith("wamid."), wamid
    ((shown, kind, name, parameters),) = [(m["text"], m["kind"], m["template"], m["parameters"])
                                          for m in fake.messages(USER)]
    assert (shown, kind, name, parameters) == ("Your answer is ready: it is 42", "template", "reply_later",
                                               ["it is 42"])
    assert template("no_such", "x") == 132001 and template("reply_later", "x", language="de") == 132001
    assert template("reply_later") == 132000 and template("reply_later", "a", "b") == 132000
    for refused in ("two\nlines", "a\ttab", "five     spaces"):
        assert template("reply_later", refused) == 132018, refused
    assert template("reply_later", "x" * 32768).startswith("wamid.") and template("reply_later", "x" * 32769) == 132005
    assert template("with_footer", "x" * 1024).startswith("wamid.") and template("with_footer", "x" * 1025) == 132005
    assert text(fake, USER, "free text, still too late")[1]["error"]["code"] == 131047


def test_outside_the_window_in_status_mode_the_send_is_accepted_and_a_failed_status_follows(fake):
    fake.configure(window_errors="status")
    fake.add_user(USER, last_inbound=time.time() - 25 * 3600)
    with Receiver() as receiver:
        fake.webhook_url = receiver.url
        status, answer = text(fake, USER, "too late")
        assert status == 200
        fake.wait_for(lambda: any(d["kind"] == "status" and d["state"] == "acked" for d in fake.deliveries()), 10)
        value = json.loads(receiver.requests[-1][1])["entry"][0]["changes"][0]["value"]
        (failed,) = value["statuses"]
        assert failed["id"] == answer["messages"][0]["id"] and failed["status"] == "failed"
        assert failed["errors"][0]["code"] == 131047


def test_errors_a_bad_token_floods_and_injected_codes(fake):
    fake.add_user(USER, last_inbound=time.time())
    status, answer = call(fake, f"/{DEFAULT_PHONE_NUMBER_ID}", token="nope")
    assert status == 401 and answer["error"]["code"] == 190
    fake.set_faults(next=["flood"], flood_retry_after=0.5)
    assert text(fake, USER, "1")[1]["error"]["code"] == 130429
    assert text(fake, USER, "2")[1]["error"]["code"] == 130429, "inside the ban: refused again"
    assert fake.stats()["retry_after_violations"] == 1
    time.sleep(0.5)   # the ban the fake imposed runs out (the fake's clock, not a synchronisation)
    fake.fail_next(131056)
    assert text(fake, USER, "3")[1]["error"]["code"] == 131056
    assert text(fake, USER, "4")[0] == 200
    assert [o["status"] for o in fake.ops(USER)] == [429, 429, 429, 200]


def test_media_goes_through_the_url_indirection_with_the_bearer(fake):
    media_id = fake.add_media(b"\x89PNG fake bytes", "image/png")
    status, info = call(fake, f"/{media_id}")
    assert status == 200 and info["file_size"] == 15 and info["mime_type"] == "image/png"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(info["url"], timeout=10)
    assert refused.value.code == 401
    request = urllib.request.Request(info["url"], headers={"Authorization": f"Bearer {DEFAULT_TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.read() == b"\x89PNG fake bytes"
    assert call(fake, "/999")[1]["error"]["code"] == 100


def test_reactions_read_marks_and_pacing_counts(fake):
    fake.add_user(USER, last_inbound=time.time())
    for emoji in ("👍", ""):
        assert call(fake, f"/{DEFAULT_PHONE_NUMBER_ID}/messages", {"messaging_product": "whatsapp", "to": USER,
                    "type": "reaction", "reaction": {"message_id": "wamid.U", "emoji": emoji}})[0] == 200
    assert fake.reactions(USER, "wamid.U") == [["👍"], []]
    assert call(fake, f"/{DEFAULT_PHONE_NUMBER_ID}/messages", {"messaging_product": "whatsapp", "status": "read",
                "message_id": "wamid.U", "typing_indicator": {"type": "text"}}) == (200, {"success": True})
    for i in range(3):
        text(fake, USER, f"burst {i}")
    assert fake.stats()["pair_rate_violations"] == 1, "the 5th message to one user within 24 s is one too many"
    assert (fake.stats()["reads"], fake.stats()["typing"]) == (1, 1)


def test_an_uploaded_file_is_sent_by_its_media_id(fake):
    fake.add_user(USER, last_inbound=time.time())
    boundary = "XyZ"
    parts = [("messaging_product", None, b"whatsapp"), ("type", None, b"application/pdf"),
             ("file", "report.pdf", b"%PDF-1.4 fake")]
    body = b"".join(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"".encode()
                    + (f"; filename=\"{filename}\"\r\nContent-Type: application/pdf".encode() if filename else b"")
                    + b"\r\n\r\n" + value + b"\r\n" for name, filename, value in parts) + f"--{boundary}--\r\n".encode()
    headers = {"Authorization": f"Bearer {DEFAULT_TOKEN}", "Content-Type": f"multipart/form-data; boundary={boundary}"}
    request = urllib.request.Request(f"{fake.base_url}/v21.0/{DEFAULT_PHONE_NUMBER_ID}/media", data=body,
                                     method="POST", headers=headers)
    with urllib.request.urlopen(request, timeout=10) as resp:
        media_id = json.loads(resp.read())["id"]
    status, _ = call(fake, f"/{DEFAULT_PHONE_NUMBER_ID}/messages", {"messaging_product": "whatsapp", "to": USER,
                     "type": "document", "document": {"id": media_id, "filename": "report.pdf"}})
    assert status == 200
    (shown,) = fake.messages(USER)
    assert shown["kind"] == "document" and shown["sha256"] == hashlib.sha256(b"%PDF-1.4 fake").hexdigest()
    status, answer = call(fake, f"/{DEFAULT_PHONE_NUMBER_ID}/messages", {"messaging_product": "whatsapp",
                          "to": USER, "type": "image", "image": {"id": "nope"}})
    assert status == 400 and answer["error"]["code"] == 100
