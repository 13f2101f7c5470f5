"""The DingTalk adapter: its pure parts (robot messages to MessageEvents, the group @mention taken off, what is
skipped, error classes), its client against the fake open platform (the access token cached and made again before
it ends or when refused), the doctor's probe, and what the platform does that others do not, in the real daemon
against the fake (tests/fakes/dingtalk): a Stream connection dropped or told to disconnect re-opened with a fresh
ticket and nothing taken twice, each message answered once and only after its row is committed; a session webhook
that refuses, or is too near its expiry, replaced by the robot API; a group message answered through its group; a
frame no app could answer logged and nothing lost; a table with an AI card template streaming its answer into one
card that ends complete and finalized (the cards' request bodies and ids checked as pure functions, a create repeated
under one outTrackId one card; twenty card chats streaming at once within the app's QPS), and a table without one
still sending its answer whole. The conformance suite runs it too (tests/adapters/harnesses/dingtalk.py, with and
without a card template).
"""
from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid

import pytest
from hypothesis import given, strategies as st

from actors.adapters import registry
from actors.adapters.dingtalk.cards import (already_made, card_track_id, create_body, stream_body, update_guid)
from actors.adapters.dingtalk.client import DingTalkAPI, classify
from actors.adapters.dingtalk.inbound import event_from_callback, skip_reason, strip_mention
from actors.adapters.dingtalk.signing import refusal, sign
from actors.adapters.errors import FloodError, PermanentError, RetryableError
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.spec import capability_conflicts
from actors.messages import PlatformOp, Source
from storage import StorageError, Store
from tests.actor_system import wait_for
from tests.adapters.harnesses.dingtalk import DingTalkCardsHarness, DingTalkHarness
from tests.adapters.test_conformance import session_rows
from tests.fakes.dingtalk import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, FakeDingTalk
from tests.fakes.dingtalk.cards import DEFAULT_CARD_TEMPLATE
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def fake():
    with FakeDingTalk() as server:
        yield server


# --------------------------------------------------------------------------------------------- pure parts

def test_one_to_one_and_group_messages_become_events_with_the_mention_taken_off(fake):
    direct = event_from_callback(fake.message_data("alice", "hello"), "dt", "default")
    assert (direct.source.chat_id, direct.source.chat_type, direct.source.user_id, direct.text) == (
        fake.staff("alice"), "dm", fake.staff("alice"), "hello")
    group = event_from_callback(fake.message_data("bob", "what now?", group="team"), "dt", "default", "Gateway")
    assert (group.source.chat_id, group.source.chat_type, group.text, group.addressed) == (
        fake.conversation("team", True), "group", "what now?", True)
    assert strip_mention("  @Gateway  hi @Gateway", "Gateway") == "hi @Gateway"
    assert strip_mention("@alice hi", "Gateway") == "@alice hi"
    audio = dict(fake.message_data("carol", ""), msgtype="audio", content={"recognition": "spoken words"})
    assert event_from_callback(audio, "dt", "default").text == "spoken words"


def test_pictures_and_files_become_attachments_fetched_by_their_download_codes(fake):
    picture = event_from_callback(fake.message_data("a", {"downloadCode": "dc1"}, msgtype="picture"), "dt", "d")
    assert [(a.kind, a.ref) for a in picture.attachments] == [("photo", "dc1")] and picture.text == ""
    document = event_from_callback(fake.message_data("a", {"downloadCode": "dc2", "fileName": "a.pdf"},
                                                     msgtype="file"), "dt", "d")
    assert [(a.kind, a.ref, a.name) for a in document.attachments] == [("document", "dc2", "a.pdf")]
    rich = event_from_callback(fake.message_data("a", {"richText": [
        {"text": "look: "}, {"type": "picture", "downloadCode": "dc3"}, {"text": "this"}]}, msgtype="richText"),
        "dt", "d")
    assert rich.text == "look: this" and [a.ref for a in rich.attachments] == ["dc3"]
    with pytest.raises(MalformedPayload, match="downloadCode"):
        event_from_callback(fake.message_data("a", {"downloadCode": 7}, msgtype="picture"), "dt", "d")


def test_videos_and_silent_audio_are_skipped_with_their_reason(fake):
    assert skip_reason(fake.message_data("a", "x")) is None
    assert "video" in skip_reason(dict(fake.message_data("a", "x"), msgtype="video"))
    assert "recognition" in skip_reason(dict(fake.message_data("a", "x"), msgtype="audio", content={}))


@pytest.mark.parametrize("change, reason", [
    ({"msgId": None}, "msgId"), ({"conversationType": "3"}, "conversationType"),
    ({"text": {"content": 42}}, "text.content must be a string"), ({"senderStaffId": "", "senderId": None},
                                                                    "senderStaffId or senderId")])
def test_a_message_the_gateway_cannot_take_is_malformed(fake, change, reason):
    with pytest.raises(MalformedPayload, match=reason):
        event_from_callback(dict(fake.message_data("m", "x"), **change), "dt", "default")


@given(st.dictionaries(st.sampled_from(["msgId", "conversationType", "conversationId", "senderStaffId", "senderId",
                                        "msgtype", "text", "content", "createAt", "senderNick"]),
                       st.one_of(st.none(), st.integers(), st.text(max_size=30), st.booleans(),
                                 st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3))))
def test_any_message_is_an_event_or_malformed_never_a_crash(fields):
    try:
        event_from_callback(fields, "dt", "default", "Gateway")
    except MalformedPayload:
        pass
    skip_reason(fields)


def test_platform_refusals_become_the_error_classes_the_base_acts_on():
    assert isinstance(classify("batch_send", 403, {"code": "Forbidden.AccessDenied.QpsLimitForApi"}), FloodError)
    assert isinstance(classify("batch_send", 429, None), FloodError)
    lost = classify("group_send", 502, None)
    assert isinstance(lost, RetryableError) and lost.maybe_done
    assert not classify("token", 503, None).maybe_done
    assert isinstance(classify("batch_send", 400, {"code": "param.invalid", "message": "x"}), PermanentError)


def test_a_callback_sign_is_the_apps_within_the_hour_or_refused():
    now = 1_700_000_000.0
    stamp = str(int(now * 1000))
    good = sign("the-secret", stamp)
    assert refusal("the-secret", stamp, good, now) is None
    assert refusal("the-secret", stamp, good, now + 3599) is None
    assert "over 3600" in refusal("the-secret", stamp, good, now + 3601)
    assert "does not match" in refusal("the-secret", stamp, sign("another", stamp), now)
    assert "does not match" in refusal("the-secret", str(int(stamp) + 1), good, now)
    assert "no timestamp" in refusal("the-secret", None, good, now)
    assert "no number" in refusal("the-secret", "soon", good, now)
    assert "does not match" in refusal("the-secret", stamp, "\udcff" + good, now)


def dingtalk_table(**options) -> dict:
    return registry.validate_adapter("dt", {"type": "dingtalk", "client_id": DEFAULT_CLIENT_ID,
                                            "client_secret": DEFAULT_CLIENT_SECRET, **options})


def test_only_a_table_with_a_card_template_streams_by_edits_and_keys_its_sends():
    plain = registry.pacing_of(dingtalk_table())
    assert (plain.supports_edit, plain.idempotent_send) == (False, False), "final messages, re-sent with the mark"
    cards = registry.pacing_of(dingtalk_table(card_template_id="tpl.schema"))
    assert (cards.supports_edit, cards.idempotent_send) == (True, True)
    assert cards.edit_interval_s >= 1.0, "a card's content is updated once a second at most"
    assert cards.app_edit_burst + cards.app_edit_ops_per_s <= 20, "at most 20 card calls of the app in any second"
    # The conformance suite's card variant declares what this table decides: its cases follow the declaration.
    assert capability_conflicts(DingTalkCardsHarness.declared_capabilities, cards) == []
    overridden = registry.pacing_of(dingtalk_table(card_template_id="tpl.schema", pacing={"edit_interval_s": 3.0}))
    assert overridden.edit_interval_s == 3.0, "the table's pacing has the last word"
    with pytest.raises(registry.ConfigError, match="card_content_key"):
        dingtalk_table(card_template_id="tpl.schema", card_content_key=" ")


def card_op(action="send", text="hello", op_id="r1:3.1", **fields) -> PlatformOp:
    return PlatformOp(op_id, action, fields.pop("chat_id", "staff1"), text, **fields)


def test_card_requests_carry_the_documented_fields_and_ids_that_name_one_part_and_one_update():
    send = card_op(idempotency_key="oid0123456789abc.0")
    track = card_track_id(send)
    assert track.startswith("gwcard-") and len(track) <= 64
    # A later life sends the same part under another op id with the same key: the same card.
    assert card_track_id(card_op(op_id="r1:4.1", text="hello again", idempotency_key="oid0123456789abc.0")) == track
    assert card_track_id(card_op(idempotency_key="oid0123456789abc.1")) != track, "another part, another card"
    assert card_track_id(dataclasses.replace(send, chat_id="staff2")) != track
    assert create_body("tpl.schema", track, "staff1", "dm", "robot1", "content", "hi") == {
        "cardTemplateId": "tpl.schema", "outTrackId": track, "userIdType": 1,
        "cardData": {"cardParamMap": {"content": "hi"}}, "openSpaceId": "dtv1.card//IM_ROBOT.staff1",
        "imRobotOpenSpaceModel": {"supportForward": True},
        "imRobotOpenDeliverModel": {"spaceType": "IM_ROBOT", "robotCode": "robot1"}}
    group = create_body("tpl.schema", track, "cidAbc==", "group", "robot1", "msg", "hi")
    assert group["openSpaceId"] == "dtv1.card//IM_GROUP.cidAbc==" and group["cardData"]["cardParamMap"] == {
        "msg": "hi"}
    assert group["imGroupOpenDeliverModel"] == {"robotCode": "robot1"} and "imRobotOpenDeliverModel" not in group
    edit = card_op("edit", "partial", message_id=track)
    guid = update_guid(edit, False, False)
    assert stream_body(track, guid, "content", "partial", False, False) == {
        "outTrackId": track, "guid": guid, "key": "content", "content": "partial", "isFull": True,
        "isFinalize": False, "isError": False}
    # A guid names one update with one content: the same op again is the same guid; anything else shown, another.
    assert update_guid(card_op("edit", "partial", message_id=track), False, False) == guid
    others = {update_guid(card_op("edit", "partial!", message_id=track), False, False),
              update_guid(edit, True, False), update_guid(edit, True, True),
              update_guid(card_op("edit", "partial", op_id="r1:4.1", message_id=track), False, False),
              update_guid(dataclasses.replace(send, text="other"), True, False), update_guid(send, True, False)}
    assert guid not in others and len(others) == 6
    assert already_made(400, {"code": "param.outTrackIdExists"})
    assert not already_made(400, {"code": "param.outTrackIdEmpty"}) and not already_made(500, None)


def test_a_card_made_twice_under_one_out_track_id_is_one_card_and_a_guid_one_update(fake):
    user = fake.staff("card-user")
    op = card_op(chat_id=user, idempotency_key="oidcardtwice0000.0")
    track = card_track_id(op)
    body = create_body(DEFAULT_CARD_TEMPLATE, track, user, "dm", DEFAULT_CLIENT_ID, "content", "first words")
    before = fake.stats()

    async def scenario():
        async with DingTalkAPI(fake.base_url, DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET) as api:
            await api.create_card(body)
            await api.create_card(body)    # a create repeated after a crash: the card exists, taken as made
            final = stream_body(track, update_guid(op, True, False), "content", "the whole answer", True, False)
            await api.stream_card(final)
            await api.stream_card(final)   # the same update again: the platform changes nothing
            with pytest.raises(PermanentError, match="guidReused"):
                await api.stream_card(dict(final, content="another text"))
            with pytest.raises(PermanentError, match="cardTemplate"):
                await api.create_card(dict(body, cardTemplateId="nobody.schema", outTrackId=track + "x"))
    asyncio.run(scenario())
    [card] = fake.cards(user)
    assert (card["id"], card["content"], card["finalized"], card["history"]) == (
        track, "the whole answer", True, ["first words", "the whole answer"])
    after = fake.stats()
    assert after["card_creates_refused"] - before["card_creates_refused"] == 1
    assert after["card_updates_repeated"] - before["card_updates_repeated"] == 1
    assert after["card_guids_reused"] - before["card_guids_reused"] == 1


# ----------------------------------------------------------------------------------- client against the fake

def test_the_access_token_is_made_once_and_again_only_when_it_ends_or_is_refused(fake):
    now = [1000.0]
    user = fake.staff("token-user")
    before = fake.stats()["tokens_issued"]

    async def scenario():
        async with DingTalkAPI(fake.base_url, DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET,
                               clock=lambda: now[0]) as api:
            for i in range(3):
                await api.send_to_user(user, f"n{i}")
            made = [api.tokens_made]
            now[0] += 7200 - 300 + 1     # within five minutes of its end: made again before the platform refuses
            await api.send_to_user(user, "near the end")
            made.append(api.tokens_made)
            fake.expire_tokens()         # the platform calls it invalid early: made again once, the send repeated
            await api.send_to_user(user, "after")
            made.append(api.tokens_made)
            return made
    assert asyncio.run(scenario()) == [1, 2, 3]
    assert fake.stats()["tokens_issued"] - before == 3
    assert [m["text"] for m in fake.messages(user)] == ["n0", "n1", "n2", "near the end", "after"]


def test_a_wrong_secret_is_refused_permanently_and_never_shown(fake):
    async def scenario():
        async with DingTalkAPI(fake.base_url, DEFAULT_CLIENT_ID, "not-the-secret") as api:
            await api.open_connection()
    with pytest.raises(PermanentError) as refused:
        asyncio.run(scenario())
    assert "not-the-secret" not in str(refused.value)


def test_the_doctor_makes_a_token_and_a_stream_ticket_and_plans_an_http_robots_port(fake):
    from actors.adapters import registry
    from daemon.doctor import planned_ports
    from daemon.doctor_probes import probe_dingtalk
    table = registry.validate_adapter("dt", {"type": "dingtalk", "client_id": DEFAULT_CLIENT_ID,
                                             "client_secret": DEFAULT_CLIENT_SECRET, "base_url": fake.base_url})
    good = asyncio.run(probe_dingtalk("dt", table))
    assert good.status == "ok" and "ticket" in good.detail
    wrong = asyncio.run(probe_dingtalk("dt", dict(table, client_secret="not-the-secret")))
    assert wrong.status == "fail" and "refused" in wrong.detail and "not-the-secret" not in wrong.detail
    away = asyncio.run(probe_dingtalk("dt", dict(table, base_url="http://127.0.0.1:9")))
    assert away.status == "fail" and "cannot reach" in away.detail and DEFAULT_CLIENT_SECRET not in away.detail
    config = {"gateway": {"bind_host": "127.0.0.1", "admin_port": 1}}
    http = dict(table, inbound="http", callback_port=8125)
    assert planned_ports(config, {"dt": table, "dh": http}) == [("admin", "127.0.0.1", 1),
                                                               ("dh callbacks", "127.0.0.1", 8125)]


# ---------------------------------------------------------------------------------------------- in the daemon

@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("dingtalk")
    harness = DingTalkHarness(workdir)
    harness.start()
    # The same daemon runs a second robot of the app in HTTP mode (its own table): no second daemon for it.
    http_table = harness.adapter_toml().replace(f"[adapters.{harness.adapter_name}]", f"[adapters.{HTTP_NAME}]")
    # And a third, also by HTTP (one stream connection per app, so each message reaches one adapter), whose app has
    # an AI card template: its answers stream into cards.
    cards_table = harness.adapter_toml(extra=f'inbound = "http"\ncallback_port = 0\n'
                                             f'card_template_id = "{DEFAULT_CARD_TEMPLATE}"\n'
                                             f'card_content_key = "content"\n').replace(
        f"[adapters.{harness.adapter_name}]", f"[adapters.{CARDS_NAME}]")
    gateway = Gateway(workdir, extra_toml=harness.adapter_toml(extra='bot_name = "Gateway"\n') + "\n" + http_table +
                      'inbound = "http"\ncallback_port = 0\n' + "\n" + cards_table, watchdog_interval=30.0)
    try:
        gateway.start()
        gateway.wait_ready()
        yield harness, gateway
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        harness.stop()


HTTP_NAME = "dingtalk_http"
CARDS_NAME = "dingtalk_cards"


def name(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:6]}"


def replies(server: FakeDingTalk, chat_id: str, count: int = 1) -> list:
    try:
        return wait_for(lambda: len(m := server.messages(chat_id)) >= count and m, 60, 0.1,
                        f"{count} answer(s) in {chat_id}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the chat shows {server.messages(chat_id)}, the fake's stats: "
                             f"{server.stats()}") from None


def rows_now(gateway: Gateway, source) -> list:
    """The session's rows as they are now: polled only while the database is busy (None), never for a row to
    come, so a row committed after its message was answered is not waited for."""
    return wait_for(lambda: (rows := session_rows(gateway, source)) is not None and [rows], 10, 0.05,
                    "the database to be readable")[0]


@pytest.mark.parametrize("how", ["disconnect", "drop"])
def test_a_dropped_stream_reopens_with_a_fresh_ticket_and_takes_nothing_twice(rig, how):
    harness, gateway = rig
    server = harness.server
    first = harness.inject(name("before"), "before the drop")
    wait_for(lambda: harness.acknowledged(first), 60, 0.05, "the first message answered")
    opened = len(server.connections())
    answers_before = server.stats()["duplicate_answers"]
    server.run(server.disconnect_sockets(close_after=0.5) if how == "disconnect" else server.drop_sockets())
    chat = name(how)
    during = harness.inject(chat, "sent across the drop")
    again = harness.replay(first)   # the platform redelivers the first message too: answered, nothing stored
    wait_for(lambda: harness.acknowledged(during), 60, 0.05,
             f"the message answered on a new connection; connections: {server.connections()}")
    # Answered only after its commit: the row is there the moment the answer is seen.
    assert len(rows_now(gateway, harness.source(chat))) == 1
    wait_for(lambda: harness.acknowledged(again), 60, 0.05, "the redelivery answered")
    connections = server.connections()
    assert len(connections) > opened and connections[-1]["closed_at"] is None
    tickets = [c["ticket"] for c in connections]
    assert len(set(tickets)) == len(tickets), "every connection opened with a fresh ticket"
    first_chat = server.callback(first)["data"]["senderStaffId"]
    assert len(rows_now(gateway, harness.source_of(first_chat))) == 1, "the redelivery stored nothing"
    assert server.stats()["duplicate_answers"] == answers_before, "no callback answered twice"
    assert len(rows_now(gateway, harness.source(chat))) == 1


def test_a_session_webhook_that_refuses_or_is_near_its_end_is_replaced_by_the_robot_api(rig):
    harness, gateway = rig
    server = harness.server
    live, refused, ending = name("live"), name("refused"), name("ending")
    refusals = server.stats()["session_refusals"]
    server.queue(server.message_data(live, "hello"))
    server.queue(server.message_data(refused, "hello", session_dead=True))
    server.queue(server.message_data(ending, "hello", session_ttl=30))    # under webhook_margin_s (60)
    assert [m["via"] for m in replies(server, server.staff(live))] == ["session"]
    assert [m["via"] for m in replies(server, server.staff(refused))] == ["batch_send"]
    assert [m["via"] for m in replies(server, server.staff(ending))] == ["batch_send"]
    assert server.stats()["session_refusals"] - refusals == 1, "the webhook near its end was never called"
    gateway.wait_log("refused a send (session webhook is expired or unknown (errcode 300001))")


def test_a_group_message_is_answered_in_its_group_without_the_mention(rig):
    harness, gateway = rig
    server, group, member = harness.server, name("group"), name("member")
    cid = server.conversation(group, True)
    server.queue(server.message_data(member, "what is new?", group=group))
    replies(server, cid, 1)
    # The chat's latest message names the webhook its answers take: this one's refuses, so the group send API.
    server.queue(server.message_data(member, "and now?", group=group, session_dead=True))
    assert [m["via"] for m in replies(server, cid, 2)] == ["session", "group_send"]
    rows = wait_for(lambda: len(r := session_rows(gateway, harness.source_of(cid, "group")) or []) == 2 and r, 30,
                    0.05, "the group's rows")
    assert sorted(r.payload["text"] for r in rows) == ["and now?", "what is new?"]


def test_a_frame_no_app_could_answer_is_logged_and_nothing_is_lost(rig):
    harness, gateway = rig
    server = harness.server
    pid = gateway.node(harness.adapter_name)["pid"]
    server.run(server.send_raw("this is no JSON {"))
    server.run(server.send_raw('{"type": "CALLBACK", "headers": {"topic": "/v1.0/im/bot/messages/get"}}'))
    chat = name("after-junk")
    handle = harness.inject(chat, "still listening")
    wait_for(lambda: harness.acknowledged(handle), 60, 0.05, "the next message answered")
    line = gateway.wait_log("a stream frame that cannot be answered was skipped")
    assert "WARNING" in line and "this is no JSON" in line
    assert len(rows_now(gateway, harness.source(chat))) == 1
    assert gateway.node(harness.adapter_name)["pid"] == pid


def test_an_http_callback_with_a_bad_or_stale_sign_is_refused_and_a_signed_one_stored_once(rig):
    harness, gateway = rig
    server, chat = harness.server, name("http")
    url = served_url(harness, HTTP_NAME)
    staff = server.staff(chat)
    source = Source(platform=HTTP_NAME, chat_id=staff, chat_type="dm", user_id=staff)
    data = server.message_data(chat, "signed hello")
    two_hours_ago = int((time.time() - 7200) * 1000)
    assert server.post_callback(url, data, secret="not-the-secret") == 401
    assert server.post_callback(url, data, timestamp=two_hours_ago) == 401
    assert server.post_callback(url, data, sign="") == 401
    gateway.wait_log("callback refused: the sign does not match")
    gateway.wait_log("callback refused: signed 7200 s from now")
    assert not rows_now(gateway, source), "nothing stored"
    assert server.post_callback(url, data) == 200
    assert [r.payload["text"] for r in rows_now(gateway, source)] == ["signed hello"], "stored before the 200"
    assert server.post_callback(url, data) == 200      # the platform's retry: answered, no second row
    assert len(rows_now(gateway, source)) == 1
    assert [m["via"] for m in replies(server, staff)] == ["session"]


def served_url(harness: DingTalkHarness, adapter: str) -> str:
    """The callback URL of the rig's HTTP-mode adapter ``adapter``, as ``status`` shows it."""
    view = DingTalkHarness(harness.workdir)
    view.adapter_name = adapter
    return wait_for(view.served_url, 60, 0.2, f"the callback URL of {adapter} in status")


def delivered(gateway: Gateway, chat_id: str) -> bool:
    """The chat's replies all delivered, as the ledger says (False while the database is busy)."""
    async def read():
        async with await Store.open(gateway.state / "gateway.db") as store:
            return [o for o in await store.ledger.list(limit=10_000) if o.target.chat_id == chat_id]
    try:
        found = asyncio.run(read())
    except StorageError:
        return False
    return bool(found) and all(o.state == "delivered" for o in found)


def card_chat(harness: DingTalkHarness, tag: str) -> tuple:
    """(the fake, a new chat's name, its staff id, the card adapter's callback URL)."""
    server, chat = harness.server, name(tag)
    return server, chat, server.staff(chat), served_url(harness, CARDS_NAME)


def answered_in_cards(gateway: Gateway, server: FakeDingTalk, staff: str) -> list:
    """The chat's cards once its answer is delivered in the ledger (on a timeout: what the cards showed then)."""
    try:
        wait_for(lambda: delivered(gateway, staff), 90, 0.2, "the answer delivered in the ledger")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the cards: {server.cards(staff)}; the fake's stats: {server.stats()}") from None
    return server.cards(staff)


def test_a_streamed_answer_in_an_ai_card_ends_complete_and_finalized(rig):
    harness, gateway = rig
    server, chat, staff, url = card_chat(harness, "card")
    updates = server.stats()["card_updates"]
    # About 4 s of streaming in ~20 pieces: several updates a second apart, then the final one.
    assert server.post_callback(url, server.message_data(chat, "stream it #long 1800 #slow 0.2")) == 200
    [card] = answered_in_cards(gateway, server, staff)
    assert card["finalized"] and not card["error"], card
    assert len(card["content"]) == 1800 and "▍" not in card["content"], card["content"][-80:]
    assert card["history"][-1] == card["content"] and len(card["history"]) >= 3, "streamed, then the whole answer"
    assert card["template"] == DEFAULT_CARD_TEMPLATE
    assert server.stats()["card_updates"] - updates == len(card["history"]) - 1
    assert server.messages(staff) == [], "no text message beside the card"
    assert server.stats()["card_guids_reused"] == 0 and server.stats()["retry_after_violations"] == 0


def test_twenty_card_chats_streaming_at_once_stay_within_the_apps_qps(rig):
    """Each answer streams into its card, paced by the chat's budget and by the app's (card calls count against the
    app's QPS across its chats: platform.py): twenty at once end complete, and the fake's QPS count of card calls
    (more than 20 of the app within a second) sees no violation, nor any call inside a flood's wait."""
    harness, gateway = rig
    server, url, tag = harness.server, served_url(harness, CARDS_NAME), uuid.uuid4().hex[:6]
    before = server.stats()
    chats = [f"twenty-{tag}-{n}" for n in range(20)]
    for chat in chats:   # about 4 s of streaming each
        assert server.post_callback(url, server.message_data(chat, f"stream this {chat} #long 700 #slow 0.15")) == 200
    try:
        wait_for(lambda: all(delivered(gateway, server.staff(chat)) for chat in chats), 180, 0.5,
                 "twenty answers delivered in the ledger")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; cards made: {[len(server.cards(server.staff(c))) for c in chats]}; "
                             f"the fake's stats: {server.stats()}") from None
    cards = [server.cards(server.staff(chat)) for chat in chats]
    assert all(len(shown) == 1 and shown[0]["finalized"] and len(shown[0]["content"]) == 700 for shown in cards), [
        (len(shown), shown and (shown[0]["finalized"], len(shown[0]["content"]))) for shown in cards]
    after = server.stats()
    assert after["card_updates"] - before["card_updates"] >= 20, "each card updated at least once"
    assert after["card_qps_violations"] == before["card_qps_violations"], after
    assert after["retry_after_violations"] == before["retry_after_violations"], after


def test_a_table_without_a_card_template_still_sends_its_answer_whole(rig):
    harness, gateway = rig
    server, chat = harness.server, name("plain")
    staff = server.staff(chat)
    server.queue(server.message_data(chat, "stream it #long 1800 #slow 0.1"))
    [message] = replies(server, staff)
    assert len(message["text"]) == 1800 and message["via"] == "session", "the final text in one message"
    assert server.cards(staff) == []
    wait_for(lambda: delivered(gateway, staff), 60, 0.2, "the answer delivered in the ledger")
    assert len(server.messages(staff)) == 1, "no preview before it"


def test_a_card_create_whose_answer_is_lost_goes_again_as_the_same_card(rig):
    harness, gateway = rig
    server, chat, staff, url = card_chat(harness, "card-lost")
    refused = server.stats()["card_creates_refused"]
    # The card is made and the answer to its create lost (as a kill -9 between a send and its record leaves it):
    # the create goes again under the same outTrackId, the platform makes no second card, the adapter takes it.
    server.set_faults(next=["drop_after"], methods=("card_create",))
    try:
        assert server.post_callback(url, server.message_data(chat, "once please #long 900 #slow 0.1")) == 200
        [card] = answered_in_cards(gateway, server, staff)
    finally:
        server.set_faults()
    assert card["finalized"] and len(card["content"]) == 900, card
    assert server.stats()["card_creates_refused"] - refused == 1, "the repeated create named the card made"
    assert server.messages(staff) == []
