"""WhatsApp through the real daemon and the fake Cloud API (tests/fakes/whatsapp): webhooks refused before anything
is stored, redeliveries of one wamid made one turn, the 24-hour window (known across a kill -9 of the adapter, and
a configured template past it), rate limits waited out, status callbacks recorded on the reply (also one that comes
before the send's wamid is recorded), a refused token reported; and the pure parts (signatures, payloads, error
classes, the template's parameter, the options) on their own.

One daemon for the module (the conformance harness's fake and table: tests/adapters/harnesses/whatsapp.py), with a
second table, ``whatsapp_tpl``, whose adapter sends a template past the window, on a fake of its own; each test
uses its own users and waits for its own turns to finish, so the injected errors of one never meet another's sends.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid

import pytest

from actors.adapters.errors import FloodError, PermanentError, RetryableError
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.whatsapp.client import (CUT_MARK, GraphAPI, TokenRefused, WindowClosed, classify,
                                             template_parameter)
from actors.adapters.whatsapp.inbound import (WebhookRefused, check_signature, event_from_message, reaction_of,
                                              webhook_items)
from actors.messages import Source
from common.config import ConfigError
from storage import Store, StorageError, session_key
from tests.actor_system import wait_for
from tests.adapters.harnesses.whatsapp import WhatsAppHarness, wa_id
from tests.fakes.whatsapp import DEFAULT_APP_SECRET, DEFAULT_PHONE_NUMBER_ID, DEFAULT_TOKEN, FakeWhatsApp
from tests.fakes.whatsapp.webhooks import envelope, signature
from tests.gateway import Gateway, exited

pytestmark = pytest.mark.timeout(120)
DAY_S = 24 * 3600
TEMPLATE = "reply_later"


class TemplateHarness(WhatsAppHarness):
    """A second number's adapter in the same daemon, on a fake of its own, with a template for past the window."""
    adapter_name = "whatsapp_tpl"
    state_name = "whatsapp_tpl.json"

    def adapter_toml(self) -> str:
        return super().adapter_toml() + f'window_template = "{TEMPLATE}"\nwindow_template_language = "en_US"\n'


class Rig:
    def __init__(self, harness: WhatsAppHarness, templating: TemplateHarness, gateway: Gateway):
        self.harness, self.gateway = harness, gateway
        self.fake: FakeWhatsApp = harness.server
        self.template_fake: FakeWhatsApp = templating.server

    def new_user(self, tag: str) -> str:
        return wa_id(f"{tag}-{uuid.uuid4().hex[:8]}")

    def rows(self, user: str, adapter: str = "whatsapp"):
        key = session_key(Source(platform=adapter, chat_id=user, chat_type="dm", user_id=user))
        return _read(self.gateway, lambda store: store.inbox.rows_in_state(key, ("received", "taken", "done",
                                                                                "dropped")))

    def total_rows(self):
        return _read(self.gateway, lambda store: _sum_counts(store))

    def obligations(self, user: str):
        rows = _read(self.gateway, lambda store: store.ledger.list(limit=10_000))
        return None if rows is None else [o for o in rows if o.target.chat_id == user]

    def done(self, user: str, count: int = 1, adapter: str = "whatsapp") -> list:
        return wait_for(lambda: (r := self.rows(user, adapter)) and len(r) >= count and
                        all(x.state == "done" for x in r) and r, 60, 0.1, f"{count} finished row(s) of {user}")

    def answered_hello(self, user: str) -> tuple:
        """The user says hello: the reply's obligation (delivered) and the message the fake shows."""
        self.fake.inject_text(user, "hello")
        self.done(user)
        (obligation,) = self.settled(user)
        (reply,) = self.fake.messages(user)
        return obligation, reply

    def settled(self, user: str) -> list:
        """The user's reply obligations once none is open (delivered, failed or abandoned)."""
        return wait_for(lambda: (o := self.obligations(user)) and all(x.state in ("delivered", "failed", "abandoned")
                                                                      for x in o) and o,
                        60, 0.1, f"the replies to {user} settled (last seen: {self.obligations(user)})")


async def _sum_counts(store) -> int:
    return sum((await store.inbox.counts()).values())


def _read(gateway: Gateway, query):
    async def read():
        async with await Store.open(gateway.state / "gateway.db") as store:
            return await query(store)
    try:
        return asyncio.run(read())
    except StorageError:
        return None


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("whatsapp")
    harness, templating = WhatsAppHarness(workdir), TemplateHarness(workdir)
    harness.start()
    templating.start()
    gateway = Gateway(workdir, extra_toml=harness.adapter_toml() + templating.adapter_toml())
    try:
        gateway.start()
        gateway.wait_ready()
        harness._checked_url()
        templating._checked_url()
        yield Rig(harness, templating, gateway)
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        harness.stop()
        templating.stop()


# ------------------------------------------------------------------------------------------- through the daemon

def test_a_webhook_not_signed_with_the_app_secret_is_refused_401_and_nothing_is_stored(rig):
    fake, user = rig.fake, rig.new_user("mallory")
    message = {"from": user, "id": "wamid.FORGED" + uuid.uuid4().hex, "timestamp": str(int(time.time())),
               "type": "text", "text": {"body": "let me in"}}
    body = json.dumps(envelope("1", DEFAULT_PHONE_NUMBER_ID, "15550000000", {"messages": [message]})).encode()
    before = rig.total_rows()
    assert fake.post(body, {"X-Hub-Signature-256": signature(body, "not-the-app-secret")}) == 401
    assert fake.post(body, {}) == 401, "an unsigned webhook"
    assert fake.post(body + b" ", {"X-Hub-Signature-256": signature(body, DEFAULT_APP_SECRET)}) == 401, \
        "a body changed after signing"
    rig.gateway.wait_log("X-Hub-Signature-256 does not match the body")
    # A genuine message after the forged ones is stored: the forged ones had their chance to be, before it.
    honest = rig.new_user("honest")
    fake.inject_text(honest, "hello")
    rig.done(honest)
    assert rig.rows(user) == [] and rig.total_rows() == before + 1
    assert fake.verify_url(rig.harness.url, verify_token="a-guess")["status"] == 403


def test_one_wamid_delivered_three_times_is_one_turn_and_one_reply(rig):
    fake, user = rig.fake, rig.new_user("thrice")
    first = fake.inject_text(user, "hello three times")
    handles = [first, fake.redeliver(first), fake.redeliver(first)]
    wait_for(lambda: all(fake.delivery(h)["state"] == "acked" for h in handles), 30, 0.05, "all three answered 200")
    (row,) = rig.done(user)
    assert row.platform_message_id == fake.delivery(first)["wamid"]
    (obligation,) = rig.settled(user)
    assert obligation.state == "delivered"
    assert len(fake.messages(user)) == 1 and len(rig.rows(user)) == 1


def test_a_reply_after_the_24_hour_window_is_not_sent_and_fails_with_the_reason(rig):
    fake, user = rig.fake, rig.new_user("late")
    # Meta retries an unanswered webhook for days: a message can arrive after its window has closed.
    fake.inject_text(user, "are you there?", timestamp=time.time() - DAY_S - 3600)
    rig.done(user)
    obligations = rig.settled(user)
    assert obligations and all(o.state == "failed" for o in obligations), obligations
    assert "24-hour customer service window is closed" in obligations[0].last_error
    assert fake.ops(user) == [] and fake.messages(user) == [], "no free text went out"


def test_a_reply_past_the_window_after_the_adapter_was_killed_is_refused_before_it_leaves(rig):
    """The windows the adapter knew died with its process: the new one learns the chat's from the inbox row the old
    one stored, and refuses the reply as the old one would have, without asking the Graph API (whose 131047 was all
    that stood in before)."""
    fake, user = rig.fake, rig.new_user("restarted")
    fake.inject_text(user, "#think 15 are you there?", timestamp=time.time() - DAY_S - 3600)
    wait_for(lambda: (r := rig.rows(user)) and r[0].state == "taken", 60, 0.1, "the turn to start")
    old = rig.gateway.node("whatsapp")
    os.kill(old["pid"], signal.SIGKILL)
    killed_at = time.time()
    wait_for(lambda: exited(old["pid"]), 15, 0.01, f"the killed adapter process {old['pid']} to exit")
    wait_for(lambda: (n := rig.gateway.node("whatsapp")) and n["pid"] != old["pid"] and n["state"] == "running",
             30, 0.1, "the adapter back")
    obligations = rig.settled(user)
    assert obligations and all(o.state == "failed" for o in obligations), obligations
    assert "24-hour customer service window is closed: the user last wrote 25 h ago" in obligations[0].last_error
    assert obligations[0].updated_at > killed_at, ("the reply was settled before the adapter was killed (the "
                                                   f"turn's #think too short on this machine): {obligations}")
    assert fake.ops(user) == [] and fake.messages(user) == [], "no free text went out"


def test_a_reply_past_the_window_goes_as_the_configured_template_with_the_reply_in_its_parameter(rig):
    fake, user = rig.template_fake, rig.new_user("template")
    fake.approve_template(TEMPLATE, "en_US", "About your earlier message: {{1}}", body_only=False)
    fake.inject_text(user, "#long 2000 are you there?", timestamp=time.time() - DAY_S - 3600)
    rig.done(user, adapter="whatsapp_tpl")
    (obligation,) = rig.settled(user)
    assert obligation.state == "delivered", obligation
    assert [o["code"] for o in fake.ops(user)] == [None], "one send, the template: no free text tried first"
    (shown,) = fake.messages(user)
    assert (shown["kind"], shown["template"], shown["language"]) == ("template", TEMPLATE, "en_US"), shown
    (parameter,) = shown["parameters"]
    assert shown["text"] == "About your earlier message: " + parameter
    # The answer has lines and a code block, and is longer than a parameter may be in a template with a footer.
    (answer,) = obligation.chunks
    assert "\n" in answer and len(answer) == 2000, answer
    assert len(parameter) == 1024 and parameter.endswith(CUT_MARK) and "\n" not in parameter
    assert " ".join(answer.split()).startswith(" ".join(parameter[:-1].split()))


def test_a_window_the_api_says_is_closed_is_answered_with_the_template(rig):
    fake, user = rig.template_fake, rig.new_user("apiclosed")
    fake.approve_template(TEMPLATE, "en_US", "About your earlier message: {{1}}")
    fake.fail_next(131047, to=user)   # the window as Meta knows it, closed where the adapter could not know
    fake.inject_text(user, "hello")
    rig.done(user, adapter="whatsapp_tpl")
    (obligation,) = rig.settled(user)
    assert obligation.state == "delivered", obligation
    assert [o["code"] for o in fake.ops(user)] == [131047, None]
    assert [(m["kind"], m["template"]) for m in fake.messages(user)] == [("template", TEMPLATE)]


def test_a_file_past_the_window_is_not_sent_and_its_place_says_why_even_with_a_template(rig):
    fake, user = rig.template_fake, rig.new_user("latefile")
    fake.approve_template(TEMPLATE, "en_US", "About your earlier message: {{1}}")
    fake.inject_text(user, "draw a card saying hello", timestamp=time.time() - DAY_S - 3600)
    rig.done(user, adapter="whatsapp_tpl")
    (obligation,) = rig.settled(user)
    assert fake.stats()["uploads"] == 0 and {m["kind"] for m in fake.messages(user)} == {"template"}, \
        fake.messages(user)
    instead = next((c for c in obligation.chunks if c.startswith("[file: card.png")), None)
    assert instead and "24-hour customer service window is closed" in instead and "a file cannot reach them" in \
        instead, obligation.chunks
    assert any(m["parameters"] == [instead] for m in fake.messages(user)), "the reason reached the user"


def test_a_window_the_api_says_is_closed_fails_the_reply_with_the_reason(rig):
    fake, user = rig.fake, rig.new_user("closed")
    fake.fail_next(131047, to=user)   # what the Cloud API answers when the adapter could not know (after a restart)
    fake.inject_text(user, "hello")
    rig.done(user)
    obligations = rig.settled(user)
    assert obligations[0].state == "failed" and "24-hour customer service window" in obligations[0].last_error
    assert fake.messages(user) == []
    assert [o["code"] for o in fake.ops(user)][0] == 131047


def test_a_rate_limited_send_is_retried_after_the_backoff_and_delivered_once(rig):
    fake, user = rig.fake, rig.new_user("busy")
    fake.fail_next(131056, to=user)   # the pair rate limit: too many messages to this user
    fake.inject_text(user, "hello")
    rig.done(user)
    (obligation,) = rig.settled(user)
    assert obligation.state == "delivered"
    attempts = fake.ops(user)
    assert [a["status"] for a in attempts] == [429, 200], attempts
    assert attempts[1]["at"] - attempts[0]["at"] >= 0.5 - 0.06, "the retry waited rate_limit_wait_s"
    assert len(fake.messages(user)) == 1


def test_a_users_reaction_on_a_reply_is_stored_as_feedback_on_it(rig):
    fake, user = rig.fake, rig.new_user("fan")
    obligation, reply = rig.answered_hello(user)
    fake.inject_message(user, "reaction", {"message_id": reply["wamid"], "emoji": "👍"})
    key = session_key(Source(platform="whatsapp", chat_id=user, chat_type="dm", user_id=user))
    (row,) = wait_for(lambda: _read(rig.gateway, lambda store: store.feedback.of_session(key)), 30, 0.1,
                      "the reaction stored as feedback")
    assert (row.message_id, row.emoji, row.obligation_id) == (reply["wamid"], ["👍"], obligation.obligation_id)
    assert len(rig.rows(user)) == 1, "a reaction is no turn"


def test_a_failed_status_callback_is_logged_with_metas_reason(rig):
    fake, user = rig.fake, rig.new_user("status")
    handle = fake.send_status(user, "wamid.GONE" + uuid.uuid4().hex[:6], "failed",
                              [{"code": 131026, "title": "Message undeliverable"}])
    wait_for(lambda: fake.delivery(handle)["state"] == "acked", 30, 0.05, "the status callback answered 200")
    rig.gateway.wait_log(f"to {user}: failed (131026 Message undeliverable)")


def test_status_callbacks_are_recorded_on_the_reply_and_a_failed_one_shows_it_not_received(rig):
    fake, user = rig.fake, rig.new_user("receipts")
    obligation, reply = rig.answered_hello(user)
    for status in ("delivered", "sent"):   # out of order, as Meta may send them: delivered stays
        handle = fake.send_status(user, reply["wamid"], status)
        wait_for(lambda: fake.delivery(handle)["state"] == "acked", 30, 0.05, f"the {status} status answered 200")
    (seen,) = rig.obligations(user)
    assert seen.receipts == {0: "delivered"} and seen.last_error is None, seen
    handle = fake.send_status(user, reply["wamid"], "failed", [{"code": 131026, "title": "Message undeliverable"}])
    wait_for(lambda: fake.delivery(handle)["state"] == "acked", 30, 0.05, "the failed status answered 200")
    (seen,) = rig.obligations(user)
    assert (seen.state, seen.receipts, seen.not_received) == ("delivered", {0: "failed"}, True), seen
    assert seen.last_error == "part 1 not received: 131026 Message undeliverable", seen
    listed = rig.gateway.cli("deliveries", "--json", "--limit", "1000", check=True)
    [row] = [d for d in json.loads(listed.stdout)["deliveries"] if d["obligation_id"] == obligation.obligation_id]
    assert row["not_received"] and row["receipts"] == {"0": "failed"}, row
    assert "delivered~not-received" in rig.gateway.cli("deliveries", "--limit", "1000", check=True).stdout


def status_before_the_send_is_recorded(rig, user: str, status: str, errors=None):
    """The reply's send reaches the fake, whose answer (the wamid) is held; the status callback of that wamid is
    answered 200 while the ledger holds no part of that id yet; then the answer goes. The reply's obligation once
    settled."""
    fake = rig.fake
    fake.hold_next_answer("messages", user)
    try:
        fake.inject_text(user, "hello")
        assert fake.answer_held.wait(60), f"the reply's send never reached the fake (ops: {fake.ops(user)})"
        (reply,) = fake.messages(user)
        handle = fake.send_status(user, reply["wamid"], status, errors)
        try:
            wait_for(lambda: fake.delivery(handle)["state"] == "acked", 60, 0.05, f"the {status} status answered 200")
        except AssertionError:
            raise AssertionError(f"the {status} status was not answered 200: {fake.delivery(handle)}") from None
        (unrecorded,) = wait_for(lambda: rig.obligations(user), 60, 0.1, "the reply's obligation read")
        assert unrecorded.parts == {} and unrecorded.receipts == {}, f"the send was recorded first: {unrecorded}"
    finally:
        fake.release_held()
    (obligation,) = rig.settled(user)
    assert obligation.parts == {0: reply["wamid"]}, obligation
    return obligation


def test_a_failed_status_that_comes_before_the_send_is_recorded_marks_the_reply_not_received(rig):
    user = rig.new_user("early")
    obligation = status_before_the_send_is_recorded(rig, user, "failed",
                                                    [{"code": 131026, "title": "Message undeliverable"}])
    assert (obligation.state, obligation.receipts, obligation.not_received) == ("delivered", {0: "failed"}, True), \
        obligation
    assert obligation.last_error == "part 1 not received: 131026 Message undeliverable", obligation
    listed = rig.gateway.cli("deliveries", "--json", "--limit", "1000", check=True)
    [row] = [d for d in json.loads(listed.stdout)["deliveries"] if d["obligation_id"] == obligation.obligation_id]
    assert row["not_received"] and row["receipts"] == {"0": "failed"}, row


def test_a_read_status_that_comes_before_the_send_is_recorded_is_applied_with_the_record(rig):
    user = rig.new_user("earlyread")
    obligation = status_before_the_send_is_recorded(rig, user, "read")
    assert (obligation.state, obligation.receipts, obligation.last_error) == ("delivered", {0: "read"}, None), \
        obligation


def test_an_image_is_fetched_through_the_media_url_and_cached(rig):
    fake, user = rig.fake, rig.new_user("photo")
    data = b"\x89PNG\r\n\x1a\n" + bytes(200)
    fake.inject_media(user, "image", data, "image/png", caption="look")
    (row,) = rig.done(user)
    (attachment,) = row.payload["attachments"]
    assert attachment["size"] == len(data) and attachment["caption"] == "look"
    assert fake.stats()["media_served"] >= 1


def test_a_refused_token_shows_the_adapter_refused_with_the_reason(tmp_path):
    with FakeWhatsApp() as fake:
        gateway = Gateway(tmp_path, extra_toml=f"""
[adapters.whatsapp]
type = "whatsapp"
phone_number_id = "{DEFAULT_PHONE_NUMBER_ID}"
access_token = "EAA-revoked"
app_secret = "{DEFAULT_APP_SECRET}"
verify_token = "v"
base_url = "{fake.base_url}"
webhook_port = 0
""")
        try:
            gateway.start()
            gateway.wait_ready()
            log = gateway.wait_log("the access token was refused", timeout=60)
            assert "EAA-revoked" not in log
            assert fake.stats()["token_refusals"] >= 1
        finally:
            gateway.cli("stop")
            gateway.kill_everything()


# -------------------------------------------------------------------------------------------------- pure parts

def webhook(*messages, statuses=(), phone=DEFAULT_PHONE_NUMBER_ID) -> bytes:
    value = {"contacts": [{"profile": {"name": "Alice"}, "wa_id": "15551230001"}], "messages": list(messages),
             "statuses": list(statuses)}
    return json.dumps(envelope("1", phone, "15550000000", value)).encode()


def message(kind: str, content=None, **extra) -> dict:
    out = {"from": "15551230001", "id": "wamid.A" + uuid.uuid4().hex, "timestamp": "1712345678", "type": kind,
           **extra}
    if content is not None:
        out[kind] = content
    return out


def test_the_signature_is_checked_on_the_raw_bytes_in_constant_time():
    body = webhook(message("text", {"body": "hi"}))
    check_signature(body, signature(body, "s3cret"), "s3cret")
    for header in (None, "", "sha256=" + "0" * 64, signature(body, "other"), signature(body + b"\n", "s3cret")):
        with pytest.raises(WebhookRefused) as refused:
            check_signature(body, header, "s3cret")
        assert refused.value.status == 401


def test_every_inbound_kind_becomes_its_event():
    def event(msg):
        (raw,), _ = webhook_items(webhook(msg), DEFAULT_PHONE_NUMBER_ID)
        return event_from_message(raw, "whatsapp", "default")

    text = event(message("text", {"body": "hi"}, context={"from": "1555", "id": "wamid.PREV"}))
    assert (text.text, text.reply_to_message_id, text.source.chat_id, text.source.user_name) == \
        ("hi", "wamid.PREV", "15551230001", "Alice")
    assert text.sent_at == 1712345678.0
    image = event(message("image", {"id": "m1", "mime_type": "image/jpeg", "caption": "cap"}))
    assert (image.attachments[0].kind, image.attachments[0].ref, image.text) == ("photo", "m1", "cap")
    voice = event(message("audio", {"id": "m2", "mime_type": "audio/ogg", "voice": True}))
    assert voice.attachments[0].kind == "voice"
    assert event(message("audio", {"id": "m3"})).attachments[0].kind == "audio"
    document = event(message("document", {"id": "m4", "filename": "report.pdf"}))
    assert (document.attachments[0].kind, document.attachments[0].name) == ("document", "report.pdf")
    place = event(message("location", {"latitude": 52.5, "longitude": 13.4, "name": "Office"}))
    assert place.text == "[shared a location: Office (52.5, 13.4)]"
    button = event(message("interactive", {"type": "button_reply", "button_reply": {"id": "yes", "title": "Yes"}}))
    listed = event(message("interactive", {"type": "list_reply", "list_reply": {"id": "r2", "title": "Room 2"}}))
    assert (button.text, listed.text) == ("Yes", "Room 2")
    reaction = message("reaction", {"message_id": "wamid.OURS", "emoji": "👍"})
    (raw,), _ = webhook_items(webhook(reaction), DEFAULT_PHONE_NUMBER_ID)
    seen = reaction_of(raw, "whatsapp")
    assert (seen.message_id, seen.emoji, seen.chat_id) == ("wamid.OURS", ("👍",), "15551230001")


def test_malformed_messages_and_other_numbers_are_refused_or_left_out():
    for bad, reason in ((message("text", None), "without its 'text' object"),
                        (message("text", {"body": "x"}, id=""), "no message id"),
                        (message("text", {"body": "x"}, **{"from": "alice"}), "must be a WhatsApp id"),
                        (message("image", {"caption": "no id"}), "without its media id"),
                        (message("poll", {}), "is not taken")):
        (raw,), _ = webhook_items(webhook(bad), DEFAULT_PHONE_NUMBER_ID)
        with pytest.raises(MalformedPayload, match=reason):
            event_from_message(raw, "whatsapp", "default")
    assert webhook_items(webhook(message("text", {"body": "x"}), phone="999"), DEFAULT_PHONE_NUMBER_ID) == ([], [])
    for body in (b"not json", b'{"object": "page"}', b"[" * 100000):
        with pytest.raises(WebhookRefused):
            webhook_items(body, DEFAULT_PHONE_NUMBER_ID)


def error(code: int) -> dict:
    return {"error": {"message": "m", "type": "OAuthException", "code": code, "error_data": {"details": "d"}}}


def test_graph_error_codes_are_classified():
    for code in (130429, 131056):
        flood = classify("messages:text", 400, error(code), rate_limit_wait_s=6.0)
        assert isinstance(flood, FloodError) and flood.retry_after == 6.0
    assert isinstance(classify("messages:text", 400, error(131047)), WindowClosed)
    assert isinstance(classify("phone_number", 401, error(190)), TokenRefused)
    lost = classify("messages:text", 500, error(131000), may_take_effect=True)
    assert isinstance(lost, RetryableError) and lost.maybe_done
    assert isinstance(classify("messages:text", 400, error(131026)), PermanentError)
    assert isinstance(classify("messages:text", 502, None), RetryableError)


def test_the_client_against_the_fake_token_window_and_media():
    async def scenario(fake: FakeWhatsApp):
        async with GraphAPI(DEFAULT_PHONE_NUMBER_ID, "wrong", fake.base_url) as refused:
            with pytest.raises(TokenRefused):
                await refused.phone_number()
        async with GraphAPI(DEFAULT_PHONE_NUMBER_ID, DEFAULT_TOKEN, fake.base_url) as api:
            assert (await api.phone_number())["verified_name"]
            fake.add_user("15550001", last_inbound=time.time() - DAY_S - 60)
            with pytest.raises(WindowClosed):
                await api.send("15550001", "text", {"body": "late"})
            fake.add_user("15550001", last_inbound=time.time())
            wamid = await api.send("15550001", "text", {"body": "on time"}, reply_to="wamid.X")
            assert [(m["wamid"], m["reply_to"]) for m in fake.messages("15550001")] == [(wamid, "wamid.X")]
            media_id = fake.add_media(b"x" * 5000, "application/pdf")
            assert await api.media(media_id, 10_000) == (b"x" * 5000, "application/pdf")
            with pytest.raises(Exception, match="5000 bytes"):
                await api.media(media_id, 1000)
    with FakeWhatsApp() as fake:
        asyncio.run(scenario(fake))


def test_a_reply_becomes_a_template_parameter_meta_accepts():
    assert template_parameter("Hello!\n\nThe answer:\n\tx = 1      # set\r\n  done  ", 1024) == \
        "Hello! The answer: x = 1    # set done"
    assert template_parameter("a\u2028b", 10) == "a b"
    cut = template_parameter("word " * 400, 1024)
    assert len(cut) == 1024 and cut.endswith(CUT_MARK) and cut.startswith("word word")


def test_the_window_template_options_are_checked_at_load():
    from actors.adapters import registry
    table = {"type": "whatsapp", "phone_number_id": "1", "access_token": "t", "app_secret": "s", "verify_token": "v"}
    checked = registry.validate_adapter("wa", table)
    assert (checked["window_template"], checked["window_template_language"]) == ("", "en_US"), "off by default"
    assert registry.validate_adapter("wa", dict(table, window_template="reply_later",
                                                window_template_language="pt_BR"))["window_template"] == "reply_later"
    for key, value, problem in (("window_template", "Reply Later", "is no template name"),
                                ("window_template", "x" * 513, "is no template name"),
                                ("window_template_language", "english", "is no template language code"),
                                ("window_template_language", "", "is no template language code"),
                                ("window_template", 3, "")):
        with pytest.raises(ConfigError) as refused:
            registry.validate_adapter("wa", dict(table, **{key: value}))
        assert refused.value.key == f"[adapters.wa] {key}" and problem in refused.value.reason, refused.value


def test_the_doctor_probe_asks_for_the_phone_number():
    from actors.adapters import registry
    from daemon.doctor_probes import probe_whatsapp
    with FakeWhatsApp() as fake:
        table = registry.validate_adapter("wa", {"type": "whatsapp", "phone_number_id": DEFAULT_PHONE_NUMBER_ID,
                                                 "access_token": DEFAULT_TOKEN, "app_secret": "s",
                                                 "verify_token": "v", "base_url": fake.base_url})
        good = asyncio.run(probe_whatsapp("wa", table))
        assert good.status == "ok" and "Fake Shop" in good.detail
        wrong = asyncio.run(probe_whatsapp("wa", dict(table, access_token="EAA-revoked")))
        assert wrong.status == "fail" and "refused" in wrong.detail and "EAA-revoked" not in wrong.detail
    away = asyncio.run(probe_whatsapp("wa", dict(table, base_url="http://127.0.0.1:9")))
    assert away.status == "fail" and "cannot reach" in away.detail and DEFAULT_TOKEN not in away.detail


def test_twenty_chats_at_once_get_their_whole_answers_as_final_messages_within_the_limits(rig):
    """An answer longer than a message (4,096 characters) goes as final parts, no edits (WhatsApp has none), each
    within the limit; twenty chats answered at once break none of the fake's pace rules (the pair rate per user,
    the throughput per phone number, a 429's wait)."""
    fake, users = rig.fake, [rig.new_user(f"crowd{i}") for i in range(20)]
    before = fake.stats()
    for user in users:
        fake.inject_text(user, "#long 6000 a long answer, please")
    for user in users:
        assert [o.state for o in rig.settled(user)] == ["delivered"], user
    for user in users:
        texts = [m.get("text") for m in fake.messages(user)]
        assert len(texts) == 2 and all(t and len(t) <= 4096 for t in texts), (user, [len(t or "") for t in texts])
        assert "".join(texts).count("def step_") >= 10, "the answer's code block, whole across the parts"
    after = fake.stats()
    for counter in ("pair_rate_violations", "throughput_violations", "retry_after_violations"):
        assert after[counter] == before[counter], (counter, before, after)
