"""The Google Chat adapter: its pure parts (event tokens verified, events to MessageEvents, request ids, error
classes), its token caches against the fake Google Chat (tests/fakes/googlechat), and what Google Chat does that other
platforms do not, in the real daemon against the fake: an event whose bearer token is expired, signed with another
key, for another audience or missing is answered 401 and nothing is stored; a space's @-mention is stored without
the mention and answered in its thread. The conformance suite runs it too (tests/adapters/harnesses/googlechat.py):
its delivery case is the kill -9 between a create leaving and its name being recorded, shown once under the
requestId; the last test here shows the same with the fake's count of the repeated requestId.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid

import pytest

from actors.adapters.bearer_tokens import TokenRefused, keys_from_document
from actors.adapters.errors import FloodError, MessageNotFoundError, PermanentError, RetryableError, TooLongError
from actors.adapters.googlechat.adapter import request_id
from actors.adapters.googlechat.auth import ChatKeys, ServiceAccountTokens, claims_of, service_account_from
from actors.adapters.googlechat.client import ChatAPI, classify
from actors.adapters.googlechat.inbound import event_from_chat, skip_reason
from actors.adapters.http_session import HttpSession
from actors.adapters.payload_fields import MalformedPayload
from actors.messages import PlatformOp, Source
from storage import MediaCache
from tests.actor_system import wait_for
from tests.adapters.harnesses.googlechat import GoogleChatHarness
from tests.adapters.test_conformance import session_rows
from tests.fakes.googlechat import DEFAULT_AUDIENCE, FakeGoogleChat, event_token, service_account_file
from tests.fakes.googlechat.keys import SIGNING_KID, certificate_pem, jwk, private_pem, rsa_key
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(120)
KEYS = keys_from_document({SIGNING_KID: certificate_pem()})


# --------------------------------------------------------------------------------------------- pure parts

def test_a_token_google_chat_signed_for_this_app_is_taken():
    claims = claims_of(event_token(DEFAULT_AUDIENCE), KEYS, DEFAULT_AUDIENCE, now=time.time())
    assert claims["iss"] == "chat@system.gserviceaccount.com" and claims["aud"] == DEFAULT_AUDIENCE
    url = "https://bot.example.com/googlechat/events"   # the endpoint URL as the audience: a Google ID token
    jwks = keys_from_document({"keys": [jwk()]})
    assert claims_of(event_token(url), jwks, url)["email"] == "chat@system.gserviceaccount.com"


@pytest.mark.parametrize("token, reason", [
    (lambda: event_token(DEFAULT_AUDIENCE, issued_at=time.time() - 7200), "expired"),
    (lambda: event_token(DEFAULT_AUDIENCE, key="other"), "signature does not verify"),
    (lambda: event_token("999999999999"), "another audience"),
    (lambda: event_token(DEFAULT_AUDIENCE, issuer="someone@example.iam.gserviceaccount.com"), "not issued by"),
    (lambda: event_token(DEFAULT_AUDIENCE, kid="rotated-away"), "unknown key"),
    (lambda: event_token("https://bot.example.com/e", issuer="https://evil.example.com"), "not issued by"),
    (lambda: "not.a.jwt", "not a JWT"),
])
def test_a_token_that_is_not_google_chats_for_this_app_is_refused(token, reason):
    with pytest.raises(TokenRefused, match=reason):
        claims_of(token(), KEYS, DEFAULT_AUDIENCE, now=time.time())


def test_an_unsigned_token_is_refused():
    import jwt
    unsigned = jwt.encode({"iss": "chat@system.gserviceaccount.com", "aud": DEFAULT_AUDIENCE,
                           "iat": int(time.time()), "exp": int(time.time()) + 60}, None, algorithm="none",
                          headers={"kid": SIGNING_KID})
    with pytest.raises(TokenRefused, match="not RS256"):
        claims_of(unsigned, KEYS, DEFAULT_AUDIENCE)


def test_dms_spaces_and_threads_become_chats():
    with FakeGoogleChat() as fake:   # only its event builder: no server is called
        dm, team, chat = fake.dm("alice"), fake.space("team"), fake.space("flat", threaded=False)
        direct = event_from_chat(fake.message_event(dm, "hi there", "alice"), "gc", "p")
        threaded = fake.message_event(team, "what now?", "bob")
        in_team = event_from_chat(threaded, "gc", "p")
        reply = event_from_chat(fake.message_event(chat, "and then", "bob", thread=f"{chat}/threads/x1"), "gc", "p")
        flat = event_from_chat(fake.message_event(chat, "hello", "bob"), "gc", "p")
    assert (direct.source.chat_id, direct.source.chat_type, direct.source.thread_id) == (dm, "dm", None)
    assert direct.text == "hi there" and direct.addressed is None and direct.source.user_name == "Alice"
    assert direct.platform_message_id.startswith(dm + "/messages/") and direct.sent_at > 1.7e9
    assert (in_team.source.chat_type, in_team.text, in_team.addressed) == ("thread", "what now?", True), (
        "a space's message reaches the app only when it is @-mentioned: stored without the mention")
    assert in_team.source.thread_id == threaded["message"]["thread"]["name"]
    assert (reply.source.chat_type, reply.source.thread_id) == ("thread", f"{chat}/threads/x1")
    assert (flat.source.chat_type, flat.source.thread_id) == ("group", None)


def test_events_that_are_no_message_are_skipped_and_broken_ones_malformed():
    assert skip_reason({"type": "REMOVED_FROM_SPACE", "space": {}}) == "event 'REMOVED_FROM_SPACE'"
    assert skip_reason({"type": "CARD_CLICKED"}) == "event 'CARD_CLICKED'"
    assert "without a message" in skip_reason({"type": "ADDED_TO_SPACE", "space": {}})
    assert skip_reason({"type": "ADDED_TO_SPACE", "message": {}}) is None
    with FakeGoogleChat() as fake:
        good = fake.message_event(fake.dm("m"), "x")
        other = fake.dm("other")
    broken = [({"message": dict(good["message"], name="spaces/x/messages/../../etc")}, "no message name"),
              ({"space": {"name": "not a space"}}, "no space name"),
              ({"space": {"name": other}}, "not a message of"),
              ({"message": dict(good["message"], sender={"name": "robots"}), "user": None}, "no sender"),
              ({"message": {k: v for k, v in good["message"].items() if "ext" not in k}}, "without text")]
    for change, reason in broken:
        with pytest.raises(MalformedPayload, match=reason):
            event_from_chat(dict(good, **change), "gc", "p")


def op(op_id: str, text: str, key=None, chat: str = "spaces/AAA") -> PlatformOp:
    return PlatformOp(op_id, "send", chat, text, idempotency_key=key)


def test_uploaded_files_are_taken_by_their_resource_name_and_drive_files_are_named_but_not_fetched():
    with FakeGoogleChat() as fake:   # only its event builders: no server is called
        space = fake.dm("files")
        event = fake.message_event(space, "")
        message = event["message"]
        photo = fake.uploaded(message["name"], b"\x89PNG", "image/png", "shot.png")
        report = fake.uploaded(message["name"], b"%PDF", "application/pdf", "report.pdf")
        drive = fake.drive_file(message["name"], "plan.gdoc", "application/vnd.google-apps.document")
    del message["text"], message["argumentText"]   # a file sent alone
    message["attachment"] = [photo, report, drive, dict(report, attachmentDataRef={"resourceName": "../../x"})]
    taken = event_from_chat(event, "googlechat", "p")
    assert taken.text == "", "a file alone is a message"
    assert [(a.kind, a.state, a.ref, a.name) for a in taken.attachments] == [
        ("photo", "pending", photo["attachmentDataRef"]["resourceName"], "shot.png"),
        ("document", "pending", report["attachmentDataRef"]["resourceName"], "report.pdf"),
        ("document", "unavailable", "", "plan.gdoc"), ("document", "unavailable", "", "report.pdf")]
    message["attachment"] = [report] * 30
    assert len(event_from_chat(event, "googlechat", "p").attachments) == 10


def test_a_request_id_names_one_operation_with_one_content_in_every_life():
    assert request_id(op("o:1.1", "hi")) == request_id(op("o:1.1", "hi")), "the same op again: the same id"
    assert request_id(op("o:1.1", "hi")) != request_id(op("o:1.1", "another text"))
    assert request_id(op("o:1.1", "hi")) != request_id(op("o:2.1", "hi")), "another claim's op: another id"
    assert request_id(op("o:1.1", "hi", chat="spaces/BBB")) != request_id(op("o:1.1", "hi"))
    keyed = request_id(op("o:1.1", "draft", key="turn-7/part-1"))
    assert keyed == request_id(op("o:2.5", "final", key="turn-7/part-1")), "a keyed send: the part's id"


def test_errors_are_classified():
    flood = classify("create", 429, {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota"}}, {})
    assert isinstance(flood, FloodError) and flood.retry_after == 5.0
    assert classify("create", 429, None, {"Retry-After": "7"}).retry_after == 7.0
    assert isinstance(classify("patch", 404, {"error": {"message": "Message not found"}}), MessageNotFoundError)
    assert isinstance(classify("create", 400, {"error": {"message": "text length exceeds"}}), TooLongError)
    lost = classify("create", 503, None)
    assert isinstance(lost, RetryableError) and lost.maybe_done
    assert type(classify("create", 403, {"error": {"message": "not a member"}})) is PermanentError


# --------------------------------------------------------------------------------------- against the fake

@pytest.fixture(scope="module")
def fake():
    with FakeGoogleChat() as server:
        yield server


def test_the_access_token_is_kept_until_near_expiry_and_a_wrong_key_is_refused(fake):
    async def scenario():
        async with HttpSession() as http:
            tokens = ServiceAccountTokens(http, service_account_from(service_account_file(fake.token_url)))
            first = await tokens.token()
            assert await tokens.token() == first and tokens.fetches == 1, "kept while valid"
            fake.configure(token_lifetime=200)   # under the 300 s refresh margin: asked for again every time
            try:
                tokens.forget()
                await tokens.token()
                await tokens.token()
            finally:
                fake.configure(token_lifetime=3600)
            assert tokens.fetches == 3
            api = ChatAPI(tokens, fake.base_url)
            space = fake.dm("token-user")
            message = await api.create(space, "hello", "req-1")
            assert (await api.create(space, "hello", "req-1"))["name"] == message["name"]
            await api.close()
            wrong = json.loads(service_account_file(fake.token_url))
            wrong["private_key"] = private_pem(rsa_key("other"))   # a key file whose key is not the account's
            with pytest.raises(PermanentError):
                await ServiceAccountTokens(http, service_account_from(json.dumps(wrong))).token()
    asyncio.run(scenario())
    assert fake.stats()["tokens_refused"] >= 1


def test_429s_in_a_row_wait_twice_as_long_each_time_per_space(fake):
    async def scenario():
        async with HttpSession() as http:
            api = ChatAPI(ServiceAccountTokens(http, service_account_from(service_account_file(fake.token_url))),
                          fake.base_url, rate_limit_wait_s=0.5)
            stormy, calm = fake.dm("stormy"), fake.dm("calm")
            fake.set_faults(next=["flood"] * 3, flood_retry_after=0.0)
            waits = []
            try:
                for _ in range(3):
                    with pytest.raises(FloodError) as flood:
                        await api.create(stormy, "x", "storm-1")
                    waits.append(flood.value.retry_after)
            finally:
                fake.set_faults()
            assert waits == [0.5, 1.0, 2.0]
            message = await api.create(stormy, "x", "storm-1")
            await api.patch(message["name"], "y")
            fake.set_faults(next=["flood", "flood"], flood_retry_after=0.0)
            try:
                for space in (stormy, calm):   # the storm's count ended with its success; each space its own
                    with pytest.raises(FloodError) as flood:
                        await api.create(space, "z", "storm-2")
                    assert flood.value.retry_after == 0.5
            finally:
                fake.set_faults()
            await api.close()
    asyncio.run(scenario())


def test_signing_keys_are_fetched_once_and_again_for_an_unknown_kid_at_most_once_a_minute(fake):
    async def scenario():
        async with HttpSession() as http:
            keys = ChatKeys(http, f"{fake.base_url}/certs/x509")
            for _ in range(3):
                await keys.verify(f"Bearer {event_token(DEFAULT_AUDIENCE)}", DEFAULT_AUDIENCE)
            assert keys.fetches == 1
            with pytest.raises(TokenRefused, match="unknown key"):   # within a minute of a fetch: no refresh
                await keys.verify(f"Bearer {event_token(DEFAULT_AUDIENCE, kid='made-up')}", DEFAULT_AUDIENCE)
            assert keys.fetches == 1
            keys.fetched_at -= 61   # a minute later
            for _ in range(3):   # a made-up kid: one refresh, then refused from the cache
                with pytest.raises(TokenRefused, match="unknown key"):
                    await keys.verify(f"Bearer {event_token(DEFAULT_AUDIENCE, kid='made-up')}", DEFAULT_AUDIENCE)
            assert keys.fetches == 2
            keys.expires_at = 0.0   # the published keys expired: fetched again
            await keys.verify(f"Bearer {event_token(DEFAULT_AUDIENCE)}", DEFAULT_AUDIENCE)
            assert keys.fetches == 3
            with pytest.raises(TokenRefused, match="no bearer"):
                await keys.verify(None, DEFAULT_AUDIENCE)
    asyncio.run(scenario())


def test_the_doctor_asks_for_an_access_token_and_plans_the_event_port(fake, tmp_path):
    from actors.adapters import registry
    from daemon.doctor import planned_ports
    from daemon.doctor_probes import probe_googlechat
    key_file = tmp_path / "key.json"
    key_file.write_text(service_account_file(fake.token_url))
    table = registry.validate_adapter("gc", {"type": "googlechat", "audience": DEFAULT_AUDIENCE,
                                             "service_account_file": str(key_file), "webhook_port": 8124})
    good = asyncio.run(probe_googlechat("gc", table))
    assert good.status == "ok" and "gateway-bot@fake-project" in good.detail, good
    wrong = json.loads(key_file.read_text())
    wrong["private_key"] = private_pem(rsa_key("other"))
    (tmp_path / "wrong.json").write_text(json.dumps(wrong))
    refused = asyncio.run(probe_googlechat("gc", dict(table, service_account_file=str(tmp_path / "wrong.json"))))
    assert refused.status == "fail" and "refused" in refused.detail and "PRIVATE KEY" not in refused.detail
    missing = asyncio.run(probe_googlechat("gc", dict(table, service_account_file=str(tmp_path / "none.json"))))
    assert missing.status == "fail" and "cannot be read" in missing.detail
    away = asyncio.run(probe_googlechat("gc", dict(table, oauth_url="http://127.0.0.1:9/token")))
    assert away.status == "fail" and "cannot reach" in away.detail
    config = {"gateway": {"bind_host": "127.0.0.1", "admin_port": 1}}
    assert ("gc events", "127.0.0.1", 8124) in planned_ports(config, {"gc": table})


def test_keys_out_of_reach_are_not_asked_for_again_on_every_request(fake):
    async def scenario():
        async with HttpSession() as http:
            keys = ChatKeys(http, f"{fake.base_url}/certs/gone")
            header = f"Bearer {event_token(DEFAULT_AUDIENCE)}"
            with pytest.raises(RetryableError, match="HTTP 404"):
                await keys.verify(header, DEFAULT_AUDIENCE)
            with pytest.raises(RetryableError, match="a moment ago"):   # no second fetch within the hold
                await keys.verify(header, DEFAULT_AUDIENCE)
            keys.failed_at -= 6
            keys.url = f"{fake.base_url}/certs/x509"   # reachable again: the next request fetches them
            assert (await keys.verify(header, DEFAULT_AUDIENCE))["aud"] == DEFAULT_AUDIENCE
    asyncio.run(scenario())


# ------------------------------------------------------------------------------------------ in the daemon

@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("googlechat")
    harness = GoogleChatHarness(workdir)
    harness.start()
    gateway = Gateway(workdir, extra_toml=harness.adapter_toml(), watchdog_interval=30.0)
    try:
        gateway.start()
        gateway.wait_ready()
        harness.webhook_ready()
        yield harness, gateway
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        harness.stop()


def test_an_event_whose_token_is_expired_mis_signed_for_another_audience_or_missing_is_refused_401(rig):
    harness, gateway = rig
    chat, server = harness.server, f"forged-{uuid.uuid4().hex[:6]}"
    space = chat.dm(server)
    forged = {"expired": event_token(DEFAULT_AUDIENCE, issued_at=time.time() - 7200),
              "mis-signed": event_token(DEFAULT_AUDIENCE, key="other"),
              "wrong audience": event_token("999999999999")}
    handles = [chat.deliver_event(chat.message_event(space, f"let me in ({what})", server), token=token)
               for what, token in forged.items()]
    handles.append(chat.deliver_event(chat.message_event(space, "let me in (unsigned)", server), headers={}))
    for handle in handles:
        wait_for(lambda: chat.delivery(handle)["state"] != "pending", 30, 0.05, "the forged event's answer")
        assert [a["status"] for a in chat.delivery(handle)["attempts"]][:1] == [401]
    gateway.wait_log("event refused: the token has expired")
    gateway.wait_log("event refused: the signature does not verify")
    gateway.wait_log("event refused: the token is for another audience")
    gateway.wait_log("event refused: no bearer token")
    signed = chat.inject_text(space, "signed", server)
    wait_for(lambda: harness.acknowledged(signed), 30, 0.05, "the signed event's answer")
    [row] = wait_for(lambda: session_rows(gateway, harness.source(server)), 30, 0.05, "the signed event's row")
    assert row.payload["text"] == "signed", "nothing of the refused events was stored before it"


def test_an_at_mention_in_a_threaded_space_is_stored_without_it_and_answered_in_its_thread(rig):
    harness, gateway = rig
    chat = harness.server
    space = chat.space(f"team-{uuid.uuid4().hex[:6]}")
    event = chat.message_event(space, "what is new?", "bob")
    thread = event["message"]["thread"]["name"]
    chat.deliver_event(event)
    source = Source(platform="googlechat", chat_id=space, chat_type="thread", thread_id=thread,
                    user_id=chat.user("bob"))
    [row] = wait_for(lambda: session_rows(gateway, source), 30, 0.05, "the space's row")
    assert row.payload["text"] == "what is new?" and row.payload["addressed"] is True
    [answer] = wait_for(lambda: chat.messages(space), 60, 0.1, "the answer in the space")
    assert answer["thread"] == thread and answer["reply_option"] == "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"


def test_a_file_uploaded_in_a_space_is_fetched_with_media_download_and_a_drive_file_is_not(rig):
    harness, gateway = rig
    chat = harness.server
    space = chat.space(f"files-{uuid.uuid4().hex[:6]}")
    event = chat.message_event(space, "read this", "carol")
    report = b"%PDF-1.7\n" + os.urandom(40_000)
    downloads = chat.stats()["media_downloads"]
    event["message"]["attachment"] = [chat.uploaded(event["message"]["name"], report, "application/pdf", "q3.pdf"),
                                      chat.drive_file(event["message"]["name"], "plan.gdoc")]
    chat.deliver_event(event)
    source = Source(platform="googlechat", chat_id=space, chat_type="thread",
                    thread_id=event["message"]["thread"]["name"], user_id=chat.user("carol"))
    [row] = wait_for(lambda: session_rows(gateway, source), 60, 0.05, "the message's row")
    uploaded, in_drive = row.payload["attachments"]
    assert (uploaded["state"], uploaded["mime"], uploaded["name"]) == ("cached", "application/pdf", "q3.pdf")
    assert MediaCache(gateway.state / "media").read(uploaded["cache_key"]) == report
    assert (in_drive["state"], in_drive["name"]) == ("unavailable", "plan.gdoc")
    assert chat.stats()["media_downloads"] == downloads + 1


# Last in the file: it kills the daemon with -9 and starts it again.
def test_kill_9_between_a_create_and_its_record_shows_one_message(rig):
    harness, gateway = rig
    chat, name = harness.server, f"lost-create-{uuid.uuid4().hex[:6]}"
    space = chat.dm(name)
    repeats = chat.stats()["request_id_repeats"]
    chat.hold_next_answer("create", space)
    try:
        harness.inject(name, f"answer me once {uuid.uuid4().hex[:6]}")
        wait_for(chat.answer_held.is_set, 60, 0.02, "the create on the platform, its answer held")
        os.kill(gateway.launcher_pid, signal.SIGKILL)
        gateway.assert_no_process_left()
    finally:
        chat.release_held()
    [copy] = chat.messages(space)
    gateway.start()
    gateway.wait_ready(timeout=30)
    wait_for(lambda: chat.stats()["request_id_repeats"] > repeats, 60, 0.1, "the create sent again")
    assert [m["name"] for m in chat.messages(space)] == [copy["name"]], "one message: Chat answered the repeat"
