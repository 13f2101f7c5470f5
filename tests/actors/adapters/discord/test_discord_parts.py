"""The Discord adapter's parts on their own: the rate-limit bookkeeping, MESSAGE_CREATE -> MessageEvent and the
mention rule, the REST error classes, the REST client against the fake Discord (tests/fakes/discord) and doctor's
probe, without a daemon. The gateway link: tests/adapters/test_discord_gateway.py. The adapter in the daemon:
tests/adapters/test_conformance.py (the suite) and tests/pipeline/test_discord_e2e.py (kill -9, dropped and
invalidated sessions, twenty chats streaming)."""
from __future__ import annotations

import asyncio
import time

import pytest

from actors.adapters import registry
from actors.adapters.discord.platform import DISCORD_INTENTS
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.discord.inbound import addressed_to_bot, event_from_message, is_input, strip_mention
from actors.adapters.discord.ratelimits import RateLimits
from actors.adapters.discord.client import DiscordREST, classify_error
from actors.adapters.errors import (FloodError, MessageNotFoundError, PermanentError, RetryableError,
                                    TooLongError)
from common.config import ConfigError
from storage import session_key
from tests.fakes.discord import BOT_ID, DEFAULT_TOKEN, GENERAL_CHANNEL_ID, FakeDiscord
from tests.fakes.discord.protocol import INTENTS

pytestmark = pytest.mark.timeout(30)
BOT = str(BOT_ID)
INTENTS_ALL = DISCORD_INTENTS


# ------------------------------------------------------------------------------------------- rate-limit buckets

def test_a_bucket_lets_requests_go_until_the_headers_say_it_is_empty_then_waits_for_its_reset():
    limits = RateLimits()
    assert limits.acquire("create_message", "1", 0.0) == 0.0, "an unknown bucket: the first request goes"
    limits.update("create_message", "1", {"X-RateLimit-Bucket": "abc", "X-RateLimit-Remaining": "2",
                                          "X-RateLimit-Reset-After": "5.000"}, 0.0)
    assert limits.acquire("create_message", "1", 0.1) == 0.0
    assert limits.acquire("create_message", "1", 0.2) == 0.0
    assert limits.acquire("create_message", "1", 0.3) == pytest.approx(4.7), "two left, two taken: wait"
    assert limits.acquire("create_message", "2", 0.3) == 0.0, "another channel is another bucket"
    assert limits.acquire("create_message", "1", 5.0) == 0.0, "after the reset the window is new"


def test_the_global_limit_is_kept_by_counting_the_last_second():
    limits = RateLimits(global_per_s=3)
    assert [limits.acquire("typing", str(i), 0.1 * i) for i in range(3)] == [0.0, 0.0, 0.0]
    assert limits.acquire("typing", "9", 0.5) == pytest.approx(0.5), "a fourth within the second waits"
    assert limits.acquire("typing", "9", 1.0) == 0.0, "the first has left the window"


def test_routes_that_share_a_bucket_hash_share_its_count():
    limits = RateLimits()
    headers = {"x-ratelimit-bucket": "shared", "x-ratelimit-remaining": "0", "x-ratelimit-reset-after": "2"}
    limits.update("edit_message", "7", headers, 10.0)
    limits.update("delete_message", "7", headers, 10.0)
    assert limits.acquire("delete_message", "7", 10.5) == pytest.approx(1.5)
    assert limits.acquire("edit_message", "7", 10.5) == pytest.approx(1.5)


def test_an_answer_that_arrives_late_does_not_refill_a_bucket():
    limits = RateLimits()
    limits.update("create_message", "1", {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "3"}, 0.0)
    limits.update("create_message", "1", {"X-RateLimit-Remaining": "4", "X-RateLimit-Reset-After": "2"}, 0.0)
    assert limits.acquire("create_message", "1", 1.0) == pytest.approx(2.0)


def test_a_429_bans_its_bucket_and_a_global_429_bans_every_route():
    limits = RateLimits()
    limits.limited("create_message", "1", 1.5, False, 0.0)
    assert limits.acquire("create_message", "1", 0.5) == pytest.approx(1.0)
    assert limits.acquire("typing", "1", 0.5) == 0.0
    limits.limited("create_message", "1", 2.0, True, 1.0)
    assert limits.acquire("typing", "9", 1.5) == pytest.approx(1.5), "global: nothing of the bot leaves"
    assert limits.acquire("typing", "9", 3.0) == 0.0


# ----------------------------------------------------------------------------------- MESSAGE_CREATE -> event

def message(content="hello", channel_type=1, guild_id=None, author_id="500", **extra) -> dict:
    data = {"id": "1300000000000005000", "channel_id": "1300000000000000900", "content": content, "type": 0,
            "author": {"id": author_id, "username": "bo", "global_name": "Bo"}, "mentions": [],
            "channel_type": channel_type, **extra}
    if guild_id:
        data["guild_id"] = guild_id
    return data


def test_dm_guild_channel_and_thread_messages_map_to_their_chats():
    dm = event_from_message(message(), "discord", "work", BOT)
    assert (dm.source.chat_id, dm.source.chat_type, dm.source.thread_id) == ("1300000000000000900", "dm", None)
    assert dm.platform_message_id == "1300000000000005000" and dm.source.user_name == "Bo"
    assert dm.source.profile == "work" and dm.sent_at is not None and dm.sent_at > 1.4e9
    group = event_from_message(message(channel_type=0, guild_id="10", message_reference={"message_id": "77"}),
                               "discord", "default", BOT)
    assert group.source.chat_type == "group" and group.reply_to_message_id == "77"
    thread = event_from_message(message(channel_type=11, guild_id="10"), "discord", "default", BOT)
    assert (thread.source.chat_type, thread.source.thread_id) == ("thread", "1300000000000000900")
    assert len({session_key(e.source) for e in (dm, group, thread)}) == 3


def test_in_a_guild_only_a_mention_or_a_reply_to_the_bot_is_input_unless_configured_otherwise():
    with FakeDiscord() as dc:
        plain = dc.inject_message("anyone here?", GENERAL_CHANNEL_ID)
        mention = dc.inject_message("what is 2+2", GENERAL_CHANNEL_ID, mention_bot=True)
        dm = dc.inject_message("hi in private")
        with dc.mutate() as state:   # a message of the bot's, for a user to reply to
            bot_message = dc.route_create_message(state, {"channel_id": str(GENERAL_CHANNEL_ID)},
                                                  {"content": "I am here"})[1]
        reply = dc.inject_message("thanks", GENERAL_CHANNEL_ID, reply_to=int(bot_message["id"]), ping_reply=False)
        reply_to_other = dc.inject_message("and you?", GENERAL_CHANNEL_ID, reply_to=int(plain["id"]))
    assert not is_input("MESSAGE_CREATE", plain, BOT, True)
    assert is_input("MESSAGE_CREATE", mention, BOT, True) and addressed_to_bot(mention, BOT)
    assert is_input("MESSAGE_CREATE", dm, BOT, True), "a DM needs no mention"
    assert is_input("MESSAGE_CREATE", reply, BOT, True), "a reply to the bot, even without the ping"
    assert not is_input("MESSAGE_CREATE", reply_to_other, BOT, True)
    assert is_input("MESSAGE_CREATE", plain, BOT, False), "require_mention = false: every message"
    assert event_from_message(mention, "discord", "default", BOT).text == "what is 2+2"


@pytest.mark.parametrize("name, data", [
    ("MESSAGE_UPDATE", message()),
    ("MESSAGE_CREATE", message(author_id=BOT)),
    ("MESSAGE_CREATE", dict(message(), author={"id": "9", "username": "other", "bot": True})),
    ("MESSAGE_CREATE", message(content="")),                 # an attachment only, or content withheld
    ("MESSAGE_CREATE", dict(message(), type=7)),             # a member joined: a system message
])
def test_what_is_not_a_persons_new_message_is_skipped(name, data):
    assert not is_input(name, data, BOT, True)


@pytest.mark.parametrize("data, reason", [
    ([1], "not an object"),
    (dict(message(), id=5), "snowflake string"),
    (dict(message(), channel_id=None), "channel_id"),
    (dict(message(), content=42), "content must be a string"),
])
def test_malformed_messages_are_refused_with_a_reason(data, reason):
    assert is_input("MESSAGE_CREATE", data, BOT, True), "a malformed MESSAGE_CREATE is refused loudly, not skipped"
    with pytest.raises(MalformedPayload, match=reason):
        event_from_message(data, "discord", "default", BOT)


def test_the_bots_mention_is_taken_out_of_the_question():
    assert strip_mention(f"<@{BOT}> hi", BOT) == "hi"
    assert strip_mention(f"hey <@!{BOT}>, hi", BOT) == "hey , hi"
    assert strip_mention("<@123> hi", BOT) == "<@123> hi", "another user's mention stays"


# ------------------------------------------------------------------------------------------------ REST errors

@pytest.mark.parametrize("status, body, cls", [
    (429, {"message": "You are being rate limited.", "retry_after": 0.25, "global": False}, FloodError),
    (500, {"message": "500: Internal Server Error", "code": 0}, RetryableError),
    (404, {"message": "Unknown Message", "code": 10008}, MessageNotFoundError),
    (400, {"message": "Invalid Form Body", "code": 50035,
           "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000"}]}}},
     TooLongError),
    (401, {"message": "401: Unauthorized", "code": 0}, PermanentError),
    (403, {"message": "Missing Permissions", "code": 50013}, PermanentError),
    (404, {"message": "Unknown Channel", "code": 10003}, PermanentError),
])
def test_rest_errors_are_classified_by_what_the_caller_should_do(status, body, cls):
    error = classify_error("create_message", status, body)
    assert type(error) is cls
    if cls is FloodError:
        assert error.retry_after == 0.25


def test_the_registry_validates_the_discord_table():
    table = registry.validate_adapter("dc", {"type": "discord", "token": DEFAULT_TOKEN})
    assert table["intents"] == INTENTS["GUILDS"] | INTENTS["GUILD_MESSAGES"] | INTENTS["DIRECT_MESSAGES"] | \
        INTENTS["MESSAGE_CONTENT"] and table["require_mention"] is True
    assert registry.secret_values(table) == [DEFAULT_TOKEN]
    assert registry.pacing_of(table).text_limit == 2000 and registry.pacing_of(table).idempotent_send
    with pytest.raises(ConfigError, match="require_mention"):
        registry.validate_adapter("dc", {"type": "discord", "token": "t", "require_mention": "yes"})
    with pytest.raises(ConfigError, match="token"):
        registry.validate_adapter("dc", {"type": "discord"})


# ----------------------------------------------------------------------------------- REST against the fake

def test_a_send_repeated_with_its_nonce_returns_the_first_message():
    with FakeDiscord() as dc:
        async def main():
            rest = DiscordREST(dc.token, dc.api_url)
            try:
                first = await rest.create_message(str(GENERAL_CHANNEL_ID), "once", nonce="0123456789abcdef.0")
                again = await rest.create_message(str(GENERAL_CHANNEL_ID), "once", nonce="0123456789abcdef.0")
                other = await rest.create_message(str(GENERAL_CHANNEL_ID), "twice", nonce="0123456789abcdef.1")
                return first, again, other
            finally:
                await rest.close()
        first, again, other = asyncio.run(main())
        assert first["id"] == again["id"] != other["id"]
        assert dc.final_texts(GENERAL_CHANNEL_ID) == ["once", "twice"]
        assert dc.stats()["nonce_deduplicated"] == 1


def test_requests_wait_for_their_bucket_before_they_leave_and_never_meet_a_429():
    with FakeDiscord(route_limits={"create_message": [2, 0.5]}) as dc:
        async def main():
            rest = DiscordREST(dc.token, dc.api_url)
            try:
                start = time.monotonic()
                for i in range(5):
                    await rest.create_message(str(GENERAL_CHANNEL_ID), f"m{i}")
                return time.monotonic() - start
            finally:
                await rest.close()
        elapsed = asyncio.run(main())
        assert dc.stats()["rate_limited"] == 0, dc.ops(GENERAL_CHANNEL_ID)
        assert elapsed >= 2 * 0.5 - 0.05, "five sends at two per half second span two resets"
        assert len(dc.final_texts(GENERAL_CHANNEL_ID)) == 5


def test_after_a_429_the_next_request_waits_out_retry_after():
    with FakeDiscord() as dc:
        dc.set_faults(next=["flood"], flood_retry_after=0.4, methods=["create_message"])

        async def main():
            rest = DiscordREST(dc.token, dc.api_url)
            try:
                with pytest.raises(FloodError) as flood:
                    await rest.create_message(str(GENERAL_CHANNEL_ID), "refused")
                await rest.create_message(str(GENERAL_CHANNEL_ID), "later")
                return flood.value
            finally:
                await rest.close()
        flood = asyncio.run(main())
        assert flood.retry_after == pytest.approx(0.4, abs=0.01)
        first, second = dc.ops(GENERAL_CHANNEL_ID, "create_message")
        assert first["status"] == 429 and second["status"] == 200 and second["at"] - first["at"] >= 0.39
        assert dc.stats()["retry_after_violations"] == 0


def test_the_token_never_shows_in_a_client_repr():
    assert DEFAULT_TOKEN not in repr(DiscordREST(DEFAULT_TOKEN))


# ------------------------------------------------------------------------------------------------------ doctor

def test_doctor_checks_the_token_and_the_message_content_intent():
    from daemon.doctor_probes import probe_discord
    with FakeDiscord() as dc:
        table = registry.validate_adapter("dc", {"type": "discord", "token": dc.token, "api_base_url": dc.api_url})
        good = asyncio.run(probe_discord("dc", table))
        assert good.status == "ok" and "fake-gateway-bot" in good.detail
        wrong = asyncio.run(probe_discord("dc", dict(table, token="not-the-token")))
        assert wrong.status == "fail" and "refused the token" in wrong.detail and "not-the-token" not in wrong.detail
        dc.configure(privileged_intents=0)   # Message Content not enabled in the portal
        missing = asyncio.run(probe_discord("dc", table))
        assert missing.status == "fail" and "Message Content" in missing.detail
        without = asyncio.run(probe_discord("dc", dict(table, intents=4609)))
        assert without.status == "ok", "a bot that does not ask for it needs no grant"


def test_a_guild_message_carries_its_guild_and_whether_it_addresses_the_bot():
    plain = event_from_message(message(channel_type=0, guild_id="10"), "discord", "p", BOT)
    assert (plain.source.community, plain.addressed) == ("10", False)
    mention = event_from_message(message(channel_type=0, guild_id="10", mentions=[{"id": BOT}]), "discord", "p", BOT)
    assert mention.addressed is True
    dm = event_from_message(message(), "discord", "p", BOT)
    assert (dm.source.community, dm.addressed) == (None, True)


def test_a_route_answering_everything_lets_un_addressed_guild_messages_through():
    from actors.adapters.discord.adapter import DiscordAdapter
    adapter = DiscordAdapter()
    adapter.name, adapter.settings = "dc", {"type": "discord", "require_mention": True}
    adapter.config = {"adapters": {"dc": {"type": "discord", "token": "t"}}, "routes": []}
    assert not adapter.routes_want_all
    adapter.intake.addressing._routes = None
    adapter.config["routes"] = [{"adapter": "dc", "chat": "99", "respond": "all"}]
    assert adapter.routes_want_all
