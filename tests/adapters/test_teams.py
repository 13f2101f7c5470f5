"""The Teams adapter: its pure parts (activity tokens verified, activities to MessageEvents, service URLs checked,
error classes), its token and key caches against the fake Bot Connector (tests/fakes/teams: the access token kept and
refreshed, a rotated signing key fetched, made-up key ids fetching at most once a minute), and what Teams does that
other platforms do not, in the real daemon against the fake: an activity whose bearer token is expired, signed with
another key, for another app id, missing, or signed for another serviceUrl is answered 401 and nothing is stored; a
serviceUrl neither https nor allowed is refused before anything is stored or sent there; a channel message is taken
only when it mentions the bot, stored without the mention and answered in its thread; twenty chats streaming at once
stay within Teams' limits; a document goes to a personal chat with a file consent card and is uploaded once allowed
(declined, expired and altered offers upload nothing), and is refused for a group chat; a file shared from OneDrive
is fetched by its download link; after kill -9 a reply goes to the serviceUrl committed with its message. The
conformance suite runs it too (tests/adapters/harnesses/teams.py); the files' pure parts: test_teams_files.py.
"""
from __future__ import annotations

import asyncio
import base64
import os
import signal
import time
import uuid

import jwt
import pytest

from actors.adapters.bearer_tokens import TokenRefused
from actors.adapters.errors import FloodError, MessageNotFoundError, PermanentError, RetryableError, TooLongError
from actors.adapters.http_session import HttpSession
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.teams.adapter import inline_image
from actors.adapters.teams.auth import BotTokens, ChannelKeys, check_activity, claims_of, keys_of_jwks
from actors.adapters.teams.cards import Press, card_attachments, is_press, press_of
from actors.adapters.teams.client import classify
from actors.adapters.teams.files import Offer, seal, sealing_key
from actors.adapters.teams.inbound import event_from_activity, skip_reason
from actors.adapters.teams.serviceurls import MAX_REMEMBERED, ServiceUrlRefused, ServiceUrls, checked
from actors.media.sniff import sniff
from actors.messages import OpResult, OutgoingFile, PlatformOp, Source
from common import config as config_mod
from daemon.admin import AdminClient
from daemon.asking import ask_for
from storage import MediaCache
from tests.actor_system import wait_for
from tests.adapters.harnesses.teams import TeamsHarness
from tests.adapters.test_conformance import Rig, session_rows
from tests.fakes.teams import DEFAULT_APP_ID, DEFAULT_PASSWORD, FakeTeams, activity_token
from tests.fakes.teams.keys import CHANNEL_ISSUER, ROTATED_KID, SIGNING_KID, jwk
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(120)
KEYS, ENDORSEMENTS = keys_of_jwks({"keys": [jwk()]})
SERVICE = "https://smba.trafficmanager.net/emea/"


# --------------------------------------------------------------------------------------------- pure parts

def test_a_token_the_connector_signed_for_this_bot_and_activity_is_taken():
    claims = claims_of(activity_token(DEFAULT_APP_ID, SERVICE), KEYS, DEFAULT_APP_ID, CHANNEL_ISSUER)
    assert claims["aud"] == DEFAULT_APP_ID and claims["serviceurl"] == SERVICE
    check_activity(claims, {"serviceUrl": SERVICE, "channelId": "msteams"}, ENDORSEMENTS)


@pytest.mark.parametrize("token, reason", [
    (lambda: activity_token(DEFAULT_APP_ID, SERVICE, issued_at=time.time() - 7200), "expired"),
    (lambda: activity_token(DEFAULT_APP_ID, SERVICE, issued_at=time.time() + 3600), "not valid yet"),
    (lambda: activity_token(DEFAULT_APP_ID, SERVICE, key="other"), "signature does not verify"),
    (lambda: activity_token("another-app-id", SERVICE), "another app id"),
    (lambda: activity_token(DEFAULT_APP_ID, SERVICE, issuer="https://sts.windows.net/evil/"), "not issued by"),
    (lambda: activity_token(DEFAULT_APP_ID, SERVICE, kid=ROTATED_KID), "unknown key"),
    (lambda: "not.a.jwt", "not a JWT"),
    (lambda: jwt.encode({"iss": CHANNEL_ISSUER, "aud": DEFAULT_APP_ID, "exp": int(time.time()) + 60}, None,
                        algorithm="none", headers={"kid": SIGNING_KID}), "not RS256"),
])
def test_a_token_that_is_not_the_connectors_for_this_bot_is_refused(token, reason):
    with pytest.raises(TokenRefused, match=reason):
        claims_of(token(), KEYS, DEFAULT_APP_ID, CHANNEL_ISSUER)


def test_a_token_speaks_only_for_the_service_url_it_signs_and_the_channels_its_key_is_endorsed_for():
    claims = claims_of(activity_token(DEFAULT_APP_ID, SERVICE), KEYS, DEFAULT_APP_ID, CHANNEL_ISSUER)
    with pytest.raises(TokenRefused, match="serviceUrl is not the activity's"):
        check_activity(claims, {"serviceUrl": "https://evil.example.com/", "channelId": "msteams"}, ENDORSEMENTS)
    with pytest.raises(TokenRefused, match="not endorsed for channel 'webchat'"):
        check_activity(claims, {"serviceUrl": SERVICE, "channelId": "webchat"}, ENDORSEMENTS)


def test_a_service_url_is_https_or_allowed_and_the_remembered_ones_are_bounded():
    assert checked("https://smba.trafficmanager.net/amer", ()) == "https://smba.trafficmanager.net/amer/"
    for url in ("http://evil.example.com/", "https://user:pw@smba.example.com/", "https://x.example.com/?a=1",
                "ftp://x/", "", None):
        with pytest.raises(ServiceUrlRefused):
            checked(url, ())
    assert checked("http://127.0.0.1:9/", ("http://127.0.0.1:9/",)) == "http://127.0.0.1:9/"
    with pytest.raises(ServiceUrlRefused):
        checked("http://127.0.0.1:99/", ("http://127.0.0.1:9/",))
    urls = ServiceUrls(SERVICE, ())
    assert urls.for_conversation("a:never-seen") == SERVICE, "unknown: the table's service_url"
    assert urls.learn("a:1", "https://smba.trafficmanager.net/amer/") and not urls.learn(
        "a:1", "https://smba.trafficmanager.net/amer/")
    for n in range(MAX_REMEMBERED + 5):
        urls.learn(f"a:{n + 2}", "https://smba.trafficmanager.net/apac/")
    snapshot = urls.snapshot()
    assert len(snapshot["service_urls"]) == MAX_REMEMBERED and "a:1" not in snapshot["service_urls"]
    again = ServiceUrls(SERVICE, (), dict(snapshot["service_urls"], **{"a:x": "http://evil.example.com/"}))
    assert again.for_conversation(f"a:{MAX_REMEMBERED + 6}") == "https://smba.trafficmanager.net/apac/"
    assert again.for_conversation("a:x") == SERVICE, "a stored URL the table no longer allows is not used"
    again.learn("19:c@thread.tacv2;messageid=1", "https://smba.trafficmanager.net/in/")
    assert again.for_conversation("19:c@thread.tacv2;messageid=2") == "https://smba.trafficmanager.net/in/", (
        "every thread of a channel is answered at the channel's Connector")


def test_personal_group_and_channel_conversations_become_chats():
    with FakeTeams() as fake:   # only its activity builder: no server is called
        dm, group, channel = fake.personal("alice"), fake.group_chat("g"), fake.channel("general")
        direct = event_from_activity(fake.message_activity(dm, "hi there"), "teams", "p")
        in_group = event_from_activity(fake.message_activity(group, "what now?", "bob"), "teams", "p")
        unmentioned = event_from_activity(fake.message_activity(group, "chatter", "bob", mention=False), "teams", "p")
        post = fake.message_activity(channel, "new topic", "bob")
        in_channel = event_from_activity(post, "teams", "p")
        reply = event_from_activity(fake.message_activity(channel, "and then", "bob", thread=post["id"]), "teams", "p")
        quiet_post = fake.message_activity(channel, "no mention", "bob", mention=False)
    assert (direct.source.chat_id, direct.source.chat_type, direct.text, direct.addressed) == (dm, "dm", "hi there",
                                                                                             None)
    assert direct.platform_message_id.endswith("@" + dm) and direct.sent_at > 1.7e9
    assert direct.source.user_name == "Alice" and direct.source.user_id.startswith("29:")
    assert (in_group.source.chat_type, in_group.text, in_group.addressed) == ("group", "what now?", True)
    assert unmentioned.addressed is False
    assert (in_channel.source.chat_type, in_channel.text) == ("thread", "new topic"), "the mention cut"
    assert in_channel.source.chat_id == f"{channel};messageid={post['id']}" and in_channel.source.thread_id == post[
        "id"]
    assert (reply.source.chat_id, reply.source.thread_id) == (in_channel.source.chat_id, post["id"])
    assert skip_reason(quiet_post) == "a channel message that does not mention the bot"
    assert skip_reason(post) is None and skip_reason({"type": "conversationUpdate"}) == "activity 'conversationUpdate'"


def test_broken_activities_are_malformed():
    with FakeTeams() as fake:
        good = fake.message_activity(fake.personal("m"), "x")
    broken = [({"id": None}, "no id"), ({"conversation": {"id": ""}}, "no id or conversation"),
              ({"id": "1@2"}, "no id"), ({"from": {"name": "x"}}, "no sender"), ({"text": None}, "without text"),
              ({"conversation": dict(good["conversation"], conversationType="meeting")}, "conversation type")]
    for change, reason in broken:
        with pytest.raises(MalformedPayload, match=reason):
            event_from_activity(dict(good, **change), "teams", "p")


def test_a_questions_buttons_are_one_adaptive_card_of_submit_actions():
    assert card_attachments(()) == []
    [card] = card_attachments((("Approve", "ap:abc:approve"), ("Deny", "ap:abc:deny"), ("large-model", "md:x")))
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
    content = card["content"]
    assert (content["type"], content["version"], content["body"]) == ("AdaptiveCard", "1.4", [])
    assert content["actions"] == [
        {"type": "Action.Submit", "title": "Approve", "data": {"answer": "ap:abc:approve"}, "style": "positive"},
        {"type": "Action.Submit", "title": "Deny", "data": {"answer": "ap:abc:deny"}, "style": "destructive"},
        {"type": "Action.Submit", "title": "large-model", "data": {"answer": "md:x"}}]


def test_a_card_submit_is_a_press_and_anything_else_is_not():
    with FakeTeams() as fake:
        chat = fake.group_chat("presses")
        submit = dict(fake.message_activity(chat, "", "bob", mention=False), value={"answer": "ap:abc:approve"},
                      replyToId="1700000000000042")
    del submit["text"]   # Action.Submit with object data: no text, the data as value
    press = press_of(submit)
    assert press == Press(submit["id"], chat, fake.user("bob"), "1700000000000042", "ap:abc:approve")
    assert is_press(dict(submit, text="")) and press_of(dict(submit, text="")) == press
    not_presses = [dict(submit, text="typed words"), dict(submit, value="ap:abc:approve"), dict(submit, type="invoke"),
                   dict(submit, value={"other": "card"}), dict(submit, value={"answer": "x" * 101}),
                   dict(submit, replyToId=None), dict(submit, **{"from": {"name": "no id"}}), dict(submit, id=None)]
    assert [press_of(activity) for activity in not_presses] == [None] * len(not_presses)


def test_an_image_goes_inline_as_a_data_uri_and_anything_else_is_refused():
    png = b"\x89PNG\r\n\x1a\n" + b"x" * 100
    sent = inline_image("image/png", "dot.png", png, " a caption ")
    assert sent == {"type": "message", "text": "a caption", "textFormat": "plain", "attachments": [
        {"contentType": "image/png", "name": "dot.png",
         "contentUrl": "data:image/png;base64," + base64.b64encode(png).decode()}]}
    assert "text" not in inline_image("image/jpeg", "", png), "no caption: no text"
    with pytest.raises(PermanentError, match="OneDrive or SharePoint"):
        inline_image("application/pdf", "a.pdf", b"%PDF-1.4")
    with pytest.raises(PermanentError, match="over the 20000"):
        inline_image("image/png", "big.png", b"x" * 20_001)


def test_pasted_images_on_the_activitys_own_connector_are_taken_and_others_are_not_fetched():
    with FakeTeams() as fake:
        message = fake.message_activity(fake.personal("pics"), "look")
    own = f"{message['serviceUrl']}v3/attachments/0-eus-d1-abc/views/original"
    message["attachments"] = [
        {"contentType": "image/png", "contentUrl": own, "name": "shot.png"},
        {"contentType": "text/html", "content": "<p>look</p>"},
        {"contentType": "application/vnd.microsoft.card.adaptive", "content": {}},
        {"contentType": "image/jpeg", "contentUrl": "https://evil.example.com/v3/attachments/x/views/original"}]
    event = event_from_activity(message, "teams", "p")
    assert [(a.kind, a.state, a.ref, a.name) for a in event.attachments] == [
        ("photo", "pending", own, "shot.png"), ("photo", "unavailable", "", "")], "the token goes to no other host"
    without_text = {k: v for k, v in message.items() if k != "text"}
    assert event_from_activity(without_text, "teams", "p").text == "", "an image alone is a message"
    many = dict(message, attachments=[{"contentType": "image/png", "contentUrl": own}] * 30)
    assert len(event_from_activity(many, "teams", "p").attachments) == 10


def test_errors_are_classified():
    flood = classify("send", 429, {"error": {"code": "TooManyRequests"}}, {"Retry-After": "3"})
    assert isinstance(flood, FloodError) and flood.retry_after == 3.0
    assert isinstance(classify("update", 412, None, {}, 0.5), FloodError), "Teams' 412 is throttling too"
    assert classify("update", 412, None, {}, 0.5).retry_after == 0.5
    assert isinstance(classify("update", 404, {"error": {"message": "Activity not found"}}), MessageNotFoundError)
    assert isinstance(classify("send", 413, {"error": {"code": "MessageSizeTooBig"}}), TooLongError)
    lost = classify("send", 502, None)
    assert isinstance(lost, RetryableError) and lost.maybe_done
    assert type(classify("send", 403, {"error": {"code": "BotNotInConversationRoster"}})) is PermanentError


# --------------------------------------------------------------------------------------- against the fake

@pytest.fixture(scope="module")
def fake():
    with FakeTeams() as server:
        yield server


def test_the_access_token_is_kept_until_near_expiry_and_a_wrong_secret_is_refused(fake):
    async def scenario():
        async with HttpSession() as http:
            tokens = BotTokens(http, DEFAULT_APP_ID, DEFAULT_PASSWORD, fake.token_url)
            first = await tokens.token()
            assert await tokens.token() == first and tokens.fetches == 1, "kept while valid"
            fake.configure(token_lifetime=200)   # under the 300 s refresh margin: asked for again every time
            try:
                tokens.forget()   # a 401's doing: asked for again
                await tokens.token()
                await tokens.token()
            finally:
                fake.configure(token_lifetime=3600)
            assert tokens.fetches == 3
            with pytest.raises(PermanentError, match="refused the app id and secret.*AADSTS7000215"):
                await BotTokens(http, DEFAULT_APP_ID, "wrong", fake.token_url).token()
    asyncio.run(scenario())


def test_keys_are_fetched_once_a_rotated_key_is_fetched_and_made_up_kids_fetch_at_most_once_a_minute(fake):
    async def scenario():
        async with HttpSession() as http:
            keys = ChannelKeys(http, fake.metadata_url)
            for _ in range(3):
                await keys.verify(f"Bearer {activity_token(DEFAULT_APP_ID, SERVICE)}", DEFAULT_APP_ID,
                                  CHANNEL_ISSUER)
            assert keys.fetches == 1 and keys.endorsements[SIGNING_KID] == ["msteams"]
            for _ in range(3):   # made-up kids within a minute of the fetch: refused from the cache
                with pytest.raises(TokenRefused, match="unknown key"):
                    await keys.verify(f"Bearer {activity_token(DEFAULT_APP_ID, SERVICE, kid=ROTATED_KID)}",
                                      DEFAULT_APP_ID, CHANNEL_ISSUER)
            assert keys.fetches == 1
            fake.rotate_keys()
            try:
                keys.fetched_at -= 61   # a minute later, the Connector signs with its new key: fetched once
                for _ in range(3):
                    await keys.verify(f"Bearer {activity_token(DEFAULT_APP_ID, SERVICE, kid=ROTATED_KID)}",
                                      DEFAULT_APP_ID, CHANNEL_ISSUER)
                assert keys.fetches == 2
                with pytest.raises(TokenRefused, match="unknown key"):   # the old key is no longer published
                    await keys.verify(f"Bearer {activity_token(DEFAULT_APP_ID, SERVICE)}", DEFAULT_APP_ID,
                                      CHANNEL_ISSUER)
                assert keys.fetches == 2
            finally:
                fake.signing_kid, fake.published_kids = SIGNING_KID, [SIGNING_KID]
    asyncio.run(scenario())
    assert fake.stats()["metadata_served"] == 2


def test_the_doctor_asks_for_an_access_token_and_plans_the_activity_port(fake):
    from actors.adapters import registry
    from daemon.doctor import planned_ports
    from daemon.doctor_probes import probe_teams
    table = registry.validate_adapter("tm", {"type": "teams", "app_id": DEFAULT_APP_ID, "app_password":
                                             DEFAULT_PASSWORD, "oauth_url": fake.token_url, "webhook_port": 8125})
    good = asyncio.run(probe_teams("tm", table))
    assert good.status == "ok" and DEFAULT_APP_ID in good.detail, good
    refused = asyncio.run(probe_teams("tm", dict(table, app_password="wrong-secret-value")))
    assert refused.status == "fail" and "refused" in refused.detail and "wrong-secret-value" not in refused.detail
    away = asyncio.run(probe_teams("tm", dict(table, oauth_url="http://127.0.0.1:9/token")))
    assert away.status == "fail" and "cannot reach" in away.detail
    config = {"gateway": {"bind_host": "127.0.0.1", "admin_port": 1}}
    assert ("tm activities", "127.0.0.1", 8125) in planned_ports(config, {"tm": table})


# ------------------------------------------------------------------------------------------ in the daemon

@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("teams")
    harness = TeamsHarness(workdir)
    harness.default_service_url = "https://connector.invalid/"   # nobody serves it: answers go where activities say
    harness.paced_as_the_platform = True
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


def first_status(teams: FakeTeams, handle: str) -> int:
    wait_for(lambda: teams.delivery(handle)["attempts"], 30, 0.05, f"an answer to delivery {handle}")
    return teams.delivery(handle)["attempts"][0]["status"]


def test_an_activity_whose_token_is_forged_expired_for_another_app_or_another_service_url_is_refused_401(rig):
    harness, gateway = rig
    teams, name = harness.server, f"forged-{uuid.uuid4().hex[:6]}"
    chat = teams.personal(name)
    service = teams.service_url
    forged = {"expired": activity_token(DEFAULT_APP_ID, service, issued_at=time.time() - 7200),
              "mis-signed": activity_token(DEFAULT_APP_ID, service, key="other"),
              "wrong audience": activity_token("another-app-id", service),
              "another serviceUrl": activity_token(DEFAULT_APP_ID, "https://smba.trafficmanager.net/amer/")}
    handles = [teams.deliver_activity(teams.message_activity(chat, f"let me in ({what})", name), token=token)
               for what, token in forged.items()]
    handles.append(teams.deliver_activity(teams.message_activity(chat, "let me in (unsigned)", name), headers={}))
    assert [first_status(teams, handle) for handle in handles] == [401] * 5
    gateway.wait_log("activity refused: the token has expired")
    gateway.wait_log("activity refused: the signature does not verify")
    gateway.wait_log("activity refused: the token is for another app id")
    gateway.wait_log("activity refused: the token's serviceUrl is not the activity's")
    gateway.wait_log("activity refused: no bearer token")
    signed = teams.inject_text(chat, "signed", name)
    wait_for(lambda: harness.acknowledged(signed), 30, 0.05, "the signed activity's answer")
    [row] = wait_for(lambda: session_rows(gateway, harness.source(name)), 30, 0.05, "the signed activity's row")
    assert row.payload["text"] == "signed", "nothing of the refused activities was stored before it"


def test_a_service_url_neither_https_nor_allowed_is_refused_and_nothing_is_stored(rig):
    harness, gateway = rig
    teams, name = harness.server, f"elsewhere-{uuid.uuid4().hex[:6]}"
    chat = teams.personal(name)
    sends = teams.stats()["sends"]
    activity = dict(teams.message_activity(chat, "answer me over there", name), serviceUrl="http://127.0.0.1:9/")
    handle = teams.deliver_activity(activity)   # signed by the fake for that URL: only the allow-list stops it
    assert first_status(teams, handle) == 403
    gateway.wait_log("activity refused: the serviceUrl 'http://127.0.0.1:9/' is neither https nor in "
                     "allowed_service_urls")
    signed = teams.inject_text(chat, "from the allowed Connector", name)
    wait_for(lambda: harness.acknowledged(signed), 30, 0.05, "the allowed activity's answer")
    [row] = wait_for(lambda: session_rows(gateway, harness.source(name)), 30, 0.05, "the allowed activity's row")
    assert row.payload["text"] == "from the allowed Connector"
    wait_for(lambda: teams.activities(chat), 60, 0.1, "the answer, at the allowed Connector")
    assert teams.stats()["sends"] > sends


def test_a_channel_message_is_taken_only_with_a_mention_and_answered_in_its_thread(rig):
    harness, gateway = rig
    teams = harness.server
    channel = teams.channel(f"general-{uuid.uuid4().hex[:6]}")
    quiet = teams.message_activity(channel, "just chatting", "bob", mention=False)
    quiet_handle = teams.deliver_activity(quiet)
    wait_for(lambda: harness.acknowledged(quiet_handle), 30, 0.05, "the unmentioned post answered")
    gateway.wait_log("skipped a channel message that does not mention the bot")
    post = teams.message_activity(channel, "what is new?", "bob")
    teams.deliver_activity(post)
    conversation = f"{channel};messageid={post['id']}"
    source = Source(platform="teams", chat_id=conversation, chat_type="thread", thread_id=post["id"],
                    user_id=teams.user("bob"))
    [row] = wait_for(lambda: session_rows(gateway, source), 30, 0.05, "the channel post's row")
    assert row.payload["text"] == "what is new?" and row.payload["addressed"] is True
    [answer] = wait_for(lambda: teams.activities(channel), 60, 0.1, "the answer in the channel")
    assert answer["thread"] == post["id"] and answer["reply_to"] == post["id"], answer
    assert teams.ops(channel, "reply") and not teams.ops(channel, "send"), "a reply to the post, in its thread"
    quiet_source = Source(platform="teams", chat_id=f"{channel};messageid={quiet['id']}", chat_type="thread",
                          thread_id=quiet["id"], user_id=teams.user("bob"))
    assert not session_rows(gateway, quiet_source), "the unmentioned post was not stored"


def test_twenty_chats_streaming_at_once_stay_within_teams_limits(rig):
    """Each answer streams as updates of its one message (PUT), paced by the platform row: the fake's Teams limits
    per conversation (7 operations a second, 8 in 2 s, 60 in 30 s) see no violation."""
    harness, gateway = rig
    teams, tag = harness.server, uuid.uuid4().hex[:6]
    before = teams.stats()
    names = [f"stream-{tag}-{n}" for n in range(20)]
    for name in names:   # about 4 s of previews each (the offline agent's hooks)
        harness.inject(name, f"stream this {name} #long 700 #slow 0.15")

    def settled():
        shown = [teams.activities(teams.personal(name)) for name in names]
        done = [s for s in shown if len(s) == 1 and "\u258d" not in s[0]["text"] and len(s[0]["text"]) >= 600]
        return len(done) == len(names) and shown
    shown = wait_for(settled, 120, 0.2, "twenty whole answers, each one message")
    after = teams.stats()
    assert all(s[0]["edits"] >= 1 for s in shown), [s[0]["edits"] for s in shown]
    assert after["updates"] - before["updates"] >= 20
    assert (after["pace_violations"], after["retry_after_violations"]) == (before["pace_violations"],
                                                                            before["retry_after_violations"])
    assert after["flood_served"] == before["flood_served"], "no 429 at all"


def taught(harness: TeamsHarness, gateway: Gateway, name: str) -> str:
    """The personal chat of ``name``, after one message and its answer (the chat's serviceUrl learned: the table's
    service_url is a host nobody serves)."""
    teams = harness.server
    chat = teams.personal(name)
    harness.inject(name, "hello")
    wait_for(lambda: teams.activities(chat), 60, 0.1, "the answer to the first message")
    return chat


def test_a_document_in_a_personal_chat_goes_with_a_consent_card_and_is_uploaded_once_allowed(rig, monkeypatch):
    """The card names the file and its size; Allow brings an invoke whose uploadInfo names an upload session: the
    bytes arrive there whole, without the bot's token, and a file info card shows the file in the chat. Decline
    and an offer past its expiry are answered with the file's line; a context a client altered uploads nothing."""
    harness, gateway = rig
    teams, name = harness.server, f"consent-{uuid.uuid4().hex[:6]}"
    chat = taught(harness, gateway, name)
    monkeypatch.setenv("GATEWAY_STATE_DIR", str(gateway.state))   # the admin client finds the daemon through it
    ops = Rig(harness, gateway, AdminClient(config_mod.load(str(gateway.config))))
    cache = MediaCache(gateway.state / "media")

    def offer(data: bytes, file_name: str) -> str:
        sent = ops.op(name, "send", file=OutgoingFile(cache.put(data), sniff(data, file_name), "document", file_name,
                                                      "for you", len(data)))
        assert sent.ok, sent
        [card] = [c for c in teams.consent_cards(chat) if c["activity"] == sent.message_id]
        assert (card["name"], card["content"]["sizeInBytes"], card["content"]["description"]) == (
            file_name, len(data), "for you")
        return sent.message_id

    report = b"%PDF-1.7\n" + os.urandom(60_000)
    handle = teams.answer_consent(chat, offer(report, "report.pdf"), accept=True, user=name)
    wait_for(lambda: harness.acknowledged(handle), 60, 0.1, "the Allow answered")
    [shown] = wait_for(lambda: teams.file_cards(chat), 60, 0.1, "the file info card in the chat")
    [upload] = [u for u in teams.uploads() if u["name"] == "report.pdf"]
    assert upload["complete"] and upload["data"] == report and upload["ranges"] == [[0, len(report) - 1]]
    assert shown["name"] == "report.pdf" and shown["content"]["fileType"] == "pdf", shown
    assert teams.stats()["token_leaks"] == 0, "the bot's token went with the upload"

    def line_shown(words: str):
        return [a["text"] for a in teams.activities(chat) if words in a["text"]]
    teams.answer_consent(chat, offer(b"plain words " * 50, "notes.txt"), accept=False, user=name)
    [declined] = wait_for(lambda: line_shown("notes.txt"), 60, 0.1, "the declined file's line")
    assert "declined" in declined and declined.startswith("[file: notes.txt"), declined

    late = offer(b"late words " * 50, "late.txt")
    context = teams.consent_cards(chat)[-1]["content"]["acceptContext"]
    expired = seal(Offer(chat, context["file"], "late.txt", context["mime"], context["size"], int(time.time()) - 5),
                   sealing_key(DEFAULT_PASSWORD))
    teams.answer_consent(chat, late, accept=True, user=name, context=expired)
    [line] = wait_for(lambda: line_shown("late.txt"), 60, 0.1, "the expired offer's line")
    assert "the offer expired" in line, line
    altered = dict(context, expires=context["expires"] + 10 ** 6)   # a client that wants it to last longer
    altered_handle = teams.answer_consent(chat, late, accept=True, user=name, context=altered)
    wait_for(lambda: harness.acknowledged(altered_handle), 60, 0.1, "the altered Allow answered")
    gateway.wait_log("a file consent answer refused: its context is none of this bot's offers")
    assert [u["complete"] for u in teams.uploads() if u["name"] == "late.txt"] == [False, False], (
        "neither the expired nor the altered offer uploaded a byte")
    assert len(teams.file_cards(chat)) == 1


def test_a_document_for_a_group_chat_or_channel_is_refused_saying_why(rig, monkeypatch):
    harness, gateway = rig
    monkeypatch.setenv("GATEWAY_STATE_DIR", str(gateway.state))
    admin = AdminClient(config_mod.load(str(gateway.config)))
    ref = Rig(harness, gateway, admin).ref
    data = b"%PDF-1.7\n" + os.urandom(1000)
    file = OutgoingFile(MediaCache(gateway.state / "media").put(data), "application/pdf", "document", "a.pdf",
                        size=len(data))
    group = harness.server.group_chat(f"files-{uuid.uuid4().hex[:6]}")
    op = PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=group, chat_type="group", file=file)
    result = ask_for(admin.asys, ref, op, OpResult, 15.0)
    assert result is not None and not result.ok and result.error_kind == "permanent", result
    assert "only in a personal chat" in result.error, result
    assert harness.server.activities(group) == [], "nothing was sent"


def test_a_file_shared_from_onedrive_is_fetched_by_its_download_link_without_the_token(rig):
    harness, gateway = rig
    teams, name = harness.server, f"shared-{uuid.uuid4().hex[:6]}"
    harness.webhook_ready()
    spec = b"%PDF-1.7\n" + os.urandom(30_000)
    teams.inject_shared_file(teams.personal(name), spec, "spec.pdf", "have a look", user=name)
    [row] = wait_for(lambda: session_rows(gateway, harness.source(name)), 60, 0.1, "the shared file's row")
    [attachment] = row.payload["attachments"]
    assert (attachment["state"], attachment["kind"], attachment["mime"], attachment["name"]) == (
        "cached", "document", "application/pdf", "spec.pdf"), attachment
    assert MediaCache(gateway.state / "media").read(attachment["cache_key"]) == spec
    assert row.payload["text"] == "have a look" and teams.stats()["token_leaks"] == 0


# Last in the file: it kills the daemon with -9 and starts it again.
def test_kill_9_between_a_send_and_its_record_resends_it_and_a_file_waiting_for_consent_survives(rig, monkeypatch):
    """The lost send goes again at the conversation's remembered serviceUrl; a document offered before the kill is
    uploaded when the user allows it after the restart (the offer is in the card, the bytes in the media cache)."""
    harness, gateway = rig
    teams, name = harness.server, f"lost-send-{uuid.uuid4().hex[:6]}"
    chat = teams.personal(name)
    waiting_name = f"waiting-{uuid.uuid4().hex[:6]}"
    waiting = taught(harness, gateway, waiting_name)
    monkeypatch.setenv("GATEWAY_STATE_DIR", str(gateway.state))
    ops = Rig(harness, gateway, AdminClient(config_mod.load(str(gateway.config))))
    memo = b"%PDF-1.7\n" + os.urandom(20_000)
    offered = ops.op(waiting_name, "send", file=OutgoingFile(MediaCache(gateway.state / "media").put(memo),
                                                             "application/pdf", "document", "memo.pdf", size=len(memo)))
    assert offered.ok, offered
    teams.hold_next_answer("send", chat)
    try:
        harness.inject(name, f"answer me {uuid.uuid4().hex[:6]}")
        wait_for(teams.answer_held.is_set, 60, 0.02, "the send on the platform, its answer held")
        os.kill(gateway.launcher_pid, signal.SIGKILL)
        gateway.assert_no_process_left()
    finally:
        teams.release_held()
    [first] = teams.activities(chat)
    gateway.start()
    gateway.wait_ready(timeout=30)
    # No new activity teaches the URL again: the resend finds it in the offset committed with the message's row
    # (the table's service_url is a host nobody serves).
    shown = wait_for(lambda: teams.activities(chat)[1:], 60, 0.1, "the part sent again after the restart")
    assert shown[0]["id"] != first["id"] and teams.stats()["sends"] >= 2
    teams.answer_consent(waiting, offered.message_id, accept=True, user=waiting_name)
    [card] = wait_for(lambda: teams.file_cards(waiting), 60, 0.1, "the file offered before the kill, shown")
    assert card["name"] == "memo.pdf"
    assert [u["data"] for u in teams.uploads() if u["name"] == "memo.pdf" and u["complete"]] == [memo]
