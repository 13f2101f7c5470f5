"""The Matrix adapter's parts on their own: a sync answer read, room messages -> MessageEvent and the mention
rule, the content of sends and edits within the event limit, transaction ids, the error classes, the registry
table; then the client against a real Synapse (tests/servers/synapse.py): a repeated txnId is one event, Synapse's
own 429 and 413, and doctor's whoami probe. The adapter in the daemon: tests/adapters/test_conformance.py (the
suite, ``-k matrix``) and tests/pipeline/test_matrix_e2e.py."""
from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import example, given, settings, strategies as st

from actors.adapters import registry
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.errors import (FloodError, MessageNotFoundError, PermanentError, RetryableError,
                                    TooLongError)
from actors.adapters.matrix import formatting as build
from actors.adapters.matrix.client import MatrixClient, classify_error, retry_after_s
from actors.adapters.access import AccessPolicy
from actors.adapters.matrix.inbound import Invite, event_from_sync, is_input, joins_invite, read_sync, strip_mention
from actors.adapters.registry import pacing_for
from common.config import ConfigError
from tests.adapters.harnesses.matrix import CLIENT
from tests.servers.synapse import shared_synapse

pytestmark = pytest.mark.timeout(60)
BOT = "@bot:example.org"
ROOM = "!room:example.org"


def message(body="hello", sender="@alice:example.org", event_id="$e1", **content) -> dict:
    return {"type": "m.room.message", "event_id": event_id, "sender": sender, "origin_server_ts": 1700000000000,
            "content": {"msgtype": "m.text", "body": body, **content}}


def raw(event: dict, kind: str = "dm") -> dict:
    return {"room_id": ROOM, "kind": kind, "event": event}


# ------------------------------------------------------------------------------------------------ a sync answer

def test_a_sync_answer_gives_messages_in_order_invites_and_membership_changes():
    body = {"next_batch": "s42", "rooms": {
        "join": {ROOM: {"timeline": {"events": [
            message(event_id="$a"), {"type": "m.room.member", "state_key": "@dave:x", "content": {}},
            message(event_id="$b")]}}},
        "invite": {"!new:x": {"invite_state": {"events": [
            {"type": "m.room.member", "state_key": BOT, "sender": "@carol:x",
             "content": {"membership": "invite", "is_direct": True}}]}}},
        "leave": {"!old:x": {}}}}
    batch = read_sync(body, BOT)
    assert batch.next_batch == "s42"
    assert [m["event"]["event_id"] for m in batch.messages] == ["$a", "$b"]
    assert [(i.room_id, i.inviter, i.is_direct) for i in batch.invites] == [("!new:x", "@carol:x", True)]
    assert batch.membership_changed == {ROOM} and batch.left == {"!old:x"}
    with pytest.raises(ValueError):
        read_sync({"rooms": {}}, BOT)


@pytest.mark.parametrize("mode, inviter, direct, granted, joined", [
    ("open", "@x:y", False, False, True),
    ("allowlist", "@alice:y", False, False, True),     # in allow
    ("allowlist", "@x:y", True, False, False),
    ("allowlist", "@x:y", False, True, True),          # granted with `pair approve`
    ("pairing", "@x:y", True, False, True),            # a stranger's DM: to be given a code
    ("pairing", "@x:y", False, False, False),          # a stranger's room
    ("allowlist", None, False, False, False),
], ids=["open", "allowed", "stranger-dm-allowlist", "granted", "stranger-dm-pairing", "stranger-room-pairing",
        "no-inviter"])
def test_an_invite_is_joined_only_as_the_access_policy_admits_the_inviter(mode, inviter, direct, granted, joined):
    policy = AccessPolicy(mode=mode, allow=frozenset({"@alice:y"}))
    assert joins_invite(policy, Invite("!r:y", inviter, direct), granted) is joined


# ----------------------------------------------------------------------------------------- which are questions

@pytest.mark.parametrize("event, kind, expected", [
    (message(), "dm", True),
    (message(sender=BOT), "dm", False),                                        # the bot's own, echoed
    (message(msgtype="m.notice"), "dm", False),                                # another bot's notice
    (message(**{"m.relates_to": {"rel_type": "m.replace", "event_id": "$x"}}), "dm", False),   # an edit
    (message(body="   "), "dm", False),
    (message(), "group", False),                                               # a room: not addressed
    (message(**{"m.mentions": {"user_ids": [BOT]}}), "group", True),
    (message(body=f"{BOT}: hi"), "group", True),
    ({"type": "m.room.message", "event_id": "$r", "sender": "@a:x", "content": {}}, "dm", False),  # redacted
], ids=["dm", "own", "notice", "edit", "blank", "room-unaddressed", "room-mentions", "room-named", "redacted"])
def test_which_room_messages_are_input(event, kind, expected):
    assert is_input(raw(event, kind), BOT, require_mention=True) is expected


def test_a_room_message_becomes_an_event_of_its_room_and_sender():
    event = event_from_sync(raw(message(**{"m.relates_to": {"m.in_reply_to": {"event_id": "$q"}}})), "mx", "p", BOT)
    assert (event.source.chat_id, event.source.chat_type, event.source.user_id, event.source.user_name) == \
        (ROOM, "dm", "@alice:example.org", "alice")
    assert event.platform_message_id == "$e1" and event.reply_to_message_id == "$q" and event.sent_at == 1.7e9


VOICE = {"msgtype": "m.audio", "url": "mxc://example.org/AbC_1", "info": {"mimetype": "audio/ogg", "size": 900,
                                                                      "duration": 2500},
         "org.matrix.msc3245.voice": {}}


def test_a_voice_message_is_input_in_a_dm_and_becomes_a_pending_voice_note_of_its_audio():
    voice = message("Voice message", **VOICE)
    assert is_input(raw(voice), BOT, require_mention=True)
    assert not is_input(raw(voice, "group"), BOT, require_mention=True)   # no mention in a recording
    assert is_input(raw(voice, "group"), BOT, require_mention=False)
    assert not is_input(raw(message("song.ogg", **dict(VOICE, **{"org.matrix.msc3245.voice": None}))), BOT, True)
    event = event_from_sync(raw(voice), "mx", "p", BOT)
    (note,) = event.attachments
    assert event.text == "" and (note.kind, note.ref, note.size, note.duration_s, note.state) == \
        ("voice", "mxc://example.org/AbC_1", 900, 2, "pending")
    broken = event_from_sync(raw(message("Voice message", **dict(VOICE, url="https://x/y"))), "mx", "p", BOT)
    assert broken.attachments[0].state == "unavailable", "no mxc URI to fetch: said, not lost"


def test_a_voice_reply_is_an_m_audio_marked_as_a_voice_message():
    content = build.voice_message("mxc://example.org/Q", "audio/ogg", 47, thread_id="$root")
    assert content["msgtype"] == "m.audio" and content["url"] == "mxc://example.org/Q"
    assert content["info"] == {"mimetype": "audio/ogg", "size": 47} and content["body"] == "Voice message"
    assert content["org.matrix.msc3245.voice"] == {} and content["m.relates_to"]["rel_type"] == "m.thread"


def test_a_thread_message_is_its_own_chat_and_its_fallback_reply_is_not_a_reply():
    relates = {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": True, "m.in_reply_to": {"event_id": "$root"}}
    event = event_from_sync(raw(message(**{"m.relates_to": relates}), "group"), "mx", "p", BOT)
    assert (event.source.chat_type, event.source.thread_id, event.reply_to_message_id) == ("thread", "$root", None)


@pytest.mark.parametrize("event, reason", [
    (message(**{"m.relates_to": "bad"}), "m.relates_to must be an object"),
    (message(**{"m.relates_to": {"rel_type": "m.thread", "event_id": 42}}), "thread root"),
    (message(sender="alice"), "sender must be"),
    ({**message(), "event_id": None}, "event_id must be"),
    ({**message(), "content": {"msgtype": "m.text", "body": 7}}, "body must be a string"),
], ids=["relation", "thread-root", "sender", "event-id", "body"])
def test_a_malformed_message_is_refused_with_its_reason(event, reason):
    with pytest.raises(MalformedPayload, match=reason):
        event_from_sync(raw(event), "mx", "p", BOT)


def test_the_mention_that_addresses_the_bot_is_not_part_of_the_question():
    assert strip_mention(f"{BOT}: what time is it", BOT) == "what time is it"
    assert strip_mention("bot: what time is it", BOT) == "what time is it"
    assert strip_mention("robots are fine", BOT) == "robots are fine"


# -------------------------------------------------------------------------------------- what the bot sends

def test_a_reply_in_a_thread_carries_the_thread_relation_and_the_question_it_answers():
    content = build.new_message("**yes**", thread_id="$root", reply_to="$q")
    assert content["m.relates_to"] == {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": False,
                                       "m.in_reply_to": {"event_id": "$q"}}
    assert content["formatted_body"] == "<p><strong>yes</strong></p>" and content["body"] == "**yes**"
    assert "formatted_body" not in build.new_message("plain words"), "one plain paragraph needs no HTML"
    assert build.new_message("hi", reply_to="$q")["m.relates_to"] == {"m.in_reply_to": {"event_id": "$q"}}


def test_an_edit_replaces_the_original_with_new_content():
    content = build.edit("$orig", "new *text*")
    assert content["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$orig"}
    assert content["body"] == "* new *text*" and content["m.new_content"]["body"] == "new *text*"
    assert "m.relates_to" not in content["m.new_content"]


@pytest.mark.parametrize("character", ["\n", '"', "<", "日"], ids=["newlines", "quotes", "markup", "cjk"])
def test_a_text_at_the_pacing_limit_fits_the_event_as_a_message_and_as_an_edit(character):
    """The pacing table's 24,000 bytes of text, of the characters that grow most in JSON or HTML: the content
    still fits 65,536 bytes with room for the envelope (formatted body or fallback dropped where they must be)."""
    limit = pacing_for("matrix").text_limit
    text = character * (limit // len(character.encode()))
    for content in (build.new_message(text), build.edit("$orig", text)):
        assert build.canonical_size(content) <= build.MAX_CONTENT_BYTES
        assert (content.get("m.new_content") or content)["body"] == text, "the text itself is never cut"


def test_a_content_that_cannot_fit_is_refused_before_anything_leaves():
    with pytest.raises(TooLongError):
        build.new_message('"' * 40_000)   # two bytes of JSON each: 80,000, more than the event holds


def test_control_characters_no_client_shows_are_left_out():
    assert build.new_message("a\x00b\x1bc\td\ne")["body"] == "abc\td\ne"


def test_a_txn_id_is_the_ledger_key_else_the_operation_and_always_url_safe():
    assert build.txn_id("0123456789abcdef.2", "op-1") == "gw.0123456789abcdef.2"
    assert build.txn_id(None, "op-1") == build.txn_id(None, "op-1") != build.txn_id(None, "op-2")
    assert build.txn_id(None, "op-1", "edit") != build.txn_id(None, "op-1")
    assert build.txn_id("a/b c", "op").replace(".", "").isalnum()


# ------------------------------------------------------------------------------------------------ errors

def test_matrix_errors_map_to_what_the_caller_does_next():
    flood = classify_error("send", 429, {"errcode": "M_LIMIT_EXCEEDED", "retry_after_ms": 1500})
    assert isinstance(flood, FloodError) and flood.retry_after == 1.5
    assert retry_after_s({}, "3") == 3.0 and retry_after_s({}, None) == 1.0
    assert isinstance(classify_error("send", 413, {"errcode": "M_TOO_LARGE"}), TooLongError)
    assert isinstance(classify_error("get_event", 404, {"errcode": "M_NOT_FOUND"}), MessageNotFoundError)
    assert isinstance(classify_error("whoami", 401, {"errcode": "M_UNKNOWN_TOKEN"}), PermanentError)
    assert isinstance(classify_error("send", 502, None), RetryableError)
    assert "syt_secret" not in MatrixClient("http://h", "syt_secret").redact("Bearer syt_secret refused")


def test_the_adapter_table_needs_a_homeserver_and_keeps_its_token_secret():
    table = registry.validate_adapter("mx", {"type": "matrix", "homeserver": "http://127.0.0.1:1",
                                             "access_token": "syt_abc"})
    assert table["access"] == "" and registry.entry_of(table).access == "pairing"
    assert registry.secret_values(table) == ["syt_abc"]
    with pytest.raises(ConfigError, match="access_token"):
        registry.validate_adapter("mx", {"type": "matrix", "homeserver": "http://127.0.0.1:1"})
    with pytest.raises(ConfigError, match="homeserver.*https:// URL"):
        registry.validate_adapter("mx", {"type": "matrix", "homeserver": "matrix.org", "access_token": "t"})
    assert pacing_for("matrix").idempotent_send, "the txnId is the ledger's key: no re-sent mark needed"


# --------------------------------------------------------------------------------------- against Synapse

@pytest.fixture(scope="module")
def synapse():
    return shared_synapse()


@pytest.fixture(scope="module")
def room(synapse):
    user = synapse.register(f"client-{uuid.uuid4().hex[:8]}")
    room_id = synapse.call("POST", f"{CLIENT}/createRoom", user["access_token"], {"preset": "private_chat"})["room_id"]
    return user, room_id


def run(coro):
    return asyncio.run(coro)


def test_a_repeated_txn_id_from_the_same_token_is_one_event_and_another_device_makes_another(synapse, room):
    user, room_id = room

    async def sends(token: str, count: int) -> list[str]:
        async with MatrixClient(synapse.base_url, token) as client:
            return [await client.send_event(room_id, "gw.same", {"msgtype": "m.text", "body": "once"})
                    for _ in range(count)]
    first, again = run(sends(user["access_token"], 2))
    assert first == again
    [other_device] = run(sends(synapse.login(user)["access_token"], 1))
    assert other_device != first, "transaction ids are scoped to the access token's device: keep the token"


def test_synapses_429_and_413_come_back_as_flood_and_too_long(synapse, room):
    user, room_id = room
    synapse.limit_messages(user["user_id"], 1, 1)

    async def flood() -> FloodError:
        async with MatrixClient(synapse.base_url, user["access_token"]) as client:
            for index in range(10):
                try:
                    await client.send_event(room_id, f"gw.flood{index}", {"msgtype": "m.text", "body": "x"})
                except FloodError as exc:
                    return exc
            raise AssertionError("ten sends at a limit of one a second and no 429")
    try:
        error = run(flood())
    finally:
        synapse.limit_messages(user["user_id"], 0, 0)
    assert 0 < error.retry_after <= 1.0 and "M_LIMIT_EXCEEDED" in str(error)

    async def too_big():
        async with MatrixClient(synapse.base_url, user["access_token"]) as client:
            await client.send_event(room_id, "gw.big", {"msgtype": "m.text", "body": "x" * 70_000})
    with pytest.raises(TooLongError, match="M_TOO_LARGE"):
        run(too_big())


def test_doctor_probe_says_whose_token_it_is_or_that_it_was_refused(synapse, room):
    from daemon.doctor_probes import probe_matrix
    user, _ = room
    ok = run(probe_matrix("mx", {"homeserver": synapse.base_url, "access_token": user["access_token"]}))
    assert ok.status == "ok" and user["user_id"] in ok.detail and user["access_token"] not in ok.detail
    refused = run(probe_matrix("mx", {"homeserver": synapse.base_url, "access_token": "syt_not_a_token"}))
    assert refused.status == "fail" and "refused" in refused.detail and "M_UNKNOWN_TOKEN" in refused.detail
    assert "syt_not_a_token" not in refused.detail
    unreachable = run(probe_matrix("mx", {"homeserver": "http://127.0.0.1:9", "access_token": "t"}))
    assert unreachable.status == "fail" and "cannot reach" in unreachable.detail


# ----------------------------------------------------------------------------------------------- properties

_json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                         max_size=4), max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(event=st.dictionaries(st.sampled_from(["event_id", "sender", "content", "origin_server_ts", "type"]),
                             _json_values, max_size=5),
       content=st.dictionaries(st.sampled_from(["body", "msgtype", "m.relates_to", "m.mentions"]), _json_values))
def test_any_sync_event_is_an_event_or_refused_with_a_reason(event, content):
    event = dict(event, content=content) if "content" not in event else event
    item = {"room_id": ROOM, "kind": "dm", "event": event}
    is_input(item, BOT, require_mention=True)
    try:
        parsed = event_from_sync(item, "mx", "p", BOT)
    except MalformedPayload as exc:
        assert str(exc)
    else:
        assert parsed.platform_message_id.startswith("$") and parsed.source.chat_id == ROOM


@settings(max_examples=60, deadline=None)
@given(text=st.text(min_size=1, max_size=9000)
       | st.text(min_size=1, max_size=40).map(lambda piece: piece * (24_000 // len(piece) + 1)))   # at the limit
@example(text="\x1b" * 24_000)
def test_any_text_within_the_pacing_limit_is_sent_within_the_event_limit(text):
    text = text.encode("utf-8", "surrogatepass")[:pacing_for("matrix").text_limit].decode("utf-8", "ignore") or "x"
    for content in (build.new_message(text, thread_id="$t", reply_to="$q"), build.edit("$orig", text)):
        assert build.canonical_size(content) <= build.MAX_CONTENT_BYTES
