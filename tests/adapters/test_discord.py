"""The Discord adapter's parts on their own: the rate-limit bookkeeping, MESSAGE_CREATE -> MessageEvent and the
mention rule, the REST error classes, the REST client and the gateway link against the fake Discord
(tests/fakes/discord), without a daemon. The adapter in the daemon: tests/adapters/test_conformance.py (the
suite) and tests/pipeline/test_discord_e2e.py (kill -9, dropped and invalidated sessions)."""
from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from actors.adapters import registry
from actors.adapters.base import MalformedPayload
from actors.adapters.discord.events import addressed_to_bot, event_from_message, is_input, strip_mention
from actors.adapters.discord.gateway import GatewayLink, gateway_address, heartbeat_interval_s
from actors.adapters.discord.ratelimits import RateLimits
from actors.adapters.discord.rest import DiscordREST, classify_error
from actors.adapters.errors import (FloodError, MessageNotFoundError, PermanentError, RetryableError,
                                    TooLongError)
from common.config import ConfigError
from storage import session_key
from tests.fakes.discord import BOT_ID, DEFAULT_TOKEN, GENERAL_CHANNEL_ID, FakeDiscord
from tests.fakes.discord.protocol import INTENTS

pytestmark = pytest.mark.timeout(30)
BOT = str(BOT_ID)
INTENTS_ALL = registry.DISCORD_INTENTS


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


# --------------------------------------------------------------------------------- the gateway link, alone

class Run:
    """A GatewayLink serving in the background of one asyncio.run; what it delivered, and how it ended."""

    def __init__(self, dc: FakeDiscord, token: str = DEFAULT_TOKEN, intents: int = INTENTS_ALL, offset=None):
        self.dc, self.events, self.lines, self.reports = dc, [], [], []
        self.link = GatewayLink(token, intents, dc.gateway_url, self.say, reidentify_wait_s=(0.05, 0.1),
                                report=lambda up, error="", attempt=0: self.reports.append((up, error, attempt)))
        self.link.restore(offset)

    def say(self, level, fmt, *args):
        self.lines.append((level, fmt % args))

    async def deliver(self, name, data, seq):
        self.events.append((name, data, seq))

    def names(self, name):
        return [d for n, d, _ in self.events if n == name]

    async def until(self, predicate, what: str, timeout: float = 10.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.task.done():
                self.task.result()   # raises what ended it
            assert time.monotonic() < deadline, f"{what}: not seen in {timeout}s; log {self.dc.gateway_log()[-8:]}"
            await asyncio.sleep(0.02)

    def run(self, scenario) -> None:
        async def main():
            async with aiohttp.ClientSession() as http:
                self.task = asyncio.ensure_future(self.link.serve(http, self.deliver))
                try:
                    await scenario(self)
                finally:
                    self.task.cancel()
                    await asyncio.gather(self.task, return_exceptions=True)
        asyncio.run(main())


def fake(**limits) -> FakeDiscord:
    return FakeDiscord(time_scale=0.05, **limits)


def test_identify_then_heartbeats_acknowledged_and_a_drop_resumed_with_the_missed_messages():
    with fake(heartbeat_interval=300) as dc:
        async def scenario(r: Run):
            await r.until(lambda: r.names("READY"), "READY")
            await r.until(lambda: dc.stats()["heartbeats"] >= 2, "two heartbeats")
            dc.drop_gateway()
            dc.inject_message("while the connection was down")
            await r.until(lambda: r.names("RESUMED"), "RESUMED")
            await r.until(lambda: any(m["content"] == "while the connection was down"
                                      for m in r.names("MESSAGE_CREATE")), "the missed message")
        r = Run(dc)
        r.run(scenario)
        [identify] = dc.gateway_log("identify")
        assert identify["intents"] == INTENTS_ALL
        assert len(dc.gateway_log("resume")) == 1 and r.link.identifies == 1
        seqs = [s for _, _, s in r.events]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "each dispatch once, in order"


def test_the_first_heartbeat_goes_after_a_random_fraction_of_the_interval(monkeypatch):
    from actors.adapters.discord import gateway
    monkeypatch.setattr(gateway.random, "random", lambda: 0.01)   # the jitter drawn: 1% of the interval
    with fake(heartbeat_interval=60_000) as dc:
        async def scenario(r: Run):
            await r.until(lambda: dc.stats()["heartbeats"] >= 1, "the first heartbeat, long before one interval")
        Run(dc).run(scenario)
        [identify] = dc.gateway_log("identify")
        [first] = [e for e in dc.gateway_log("receive") if e["op"] == 1][:1]
        assert first["at"] - identify["at"] < 5.0


def test_op_7_reconnects_and_resumes():
    with fake() as dc:
        async def scenario(r: Run):
            await r.until(lambda: r.names("READY"), "READY")
            dc.send_reconnect()
            await r.until(lambda: r.names("RESUMED"), "RESUMED")
        r = Run(dc)
        r.run(scenario)
        assert len(dc.gateway_log("identify")) == 1 and len(dc.gateway_log("resume")) == 1
        assert r.reports == [], "a reconnect that resumes at once is no outage"


def test_a_gateway_that_cannot_be_reached_is_reported_down_until_a_connection_resumes(tmp_path):
    state = str(tmp_path / "discord.json")
    dc = FakeDiscord(time_scale=0.05, state_file=state).start()
    try:
        async def scenario(r: Run):
            await r.until(lambda: r.names("READY"), "READY")
            port = dc.port
            dc.stop()
            await r.until(lambda: r.reports, "the outage reported")
            restarted = FakeDiscord(time_scale=0.05, state_file=state, port=port).start()
            try:
                await r.until(lambda: r.names("RESUMED"), "RESUMED on the restarted fake", timeout=20)
            finally:
                restarted.stop()
        r = Run(dc)
        r.run(scenario)
    finally:
        dc.stop()
    down = [report for report in r.reports if not report[0]]
    assert down and down[0][2] == 1 and "gateway" in down[0][1], r.reports
    assert r.reports[-1] == (True, "", 0), "up again once resumed"


def test_an_invalid_session_is_followed_by_a_fresh_identify():
    with fake() as dc:
        async def scenario(r: Run):
            await r.until(lambda: r.names("READY"), "READY")
            first = r.link.session_id
            dc.send_invalid_session(resumable=False)
            await r.until(lambda: len(r.names("READY")) == 2, "a second READY")
            assert r.link.session_id != first
        r = Run(dc)
        r.run(scenario)
        assert dc.gateway_log("resume") == [] and len(dc.gateway_log("identify")) == 2


def test_a_zombie_connection_is_closed_and_resumed():
    with fake(heartbeat_interval=200, ack_heartbeats=False, heartbeat_timeout_factor=100) as dc:
        async def scenario(r: Run):
            await r.until(lambda: r.names("READY"), "READY")
            await r.until(lambda: dc.gateway_log("resume"), "a resume after the unacknowledged heartbeat")
        r = Run(dc)
        r.run(scenario)
        assert any("zombie" in line for _, line in r.lines)
        closes = [e for e in dc.gateway_log("closed") if e["by"] == "client"]
        assert closes and closes[0]["code"] == 4000, "closed with a code that keeps the session"


def test_a_restarted_link_resumes_the_position_it_is_given():
    with fake() as dc:
        async def first(r: Run):
            await r.until(lambda: r.names("READY"), "READY")
        r1 = Run(dc)
        r1.run(first)
        position = r1.link.position()
        dc.inject_message("while nobody was connected")

        async def second(r: Run):
            await r.until(lambda: r.names("MESSAGE_CREATE"), "the message replayed by the Resume")
        r2 = Run(dc, offset=position)
        r2.run(second)
        assert [m["content"] for m in r2.names("MESSAGE_CREATE")] == ["while nobody was connected"]
        assert len(dc.gateway_log("identify")) == 1


@pytest.mark.parametrize("token, intents, code", [
    ("wrong-token", INTENTS_ALL, 4004),
    (DEFAULT_TOKEN, INTENTS["GUILD_MEMBERS"], 4014),        # a privileged intent the portal does not grant
    (DEFAULT_TOKEN, 1 << 30, 4013),
])
def test_close_codes_that_refuse_the_configuration_raise_permanent_errors(token, intents, code):
    with fake() as dc:
        async def scenario(r: Run):
            with pytest.raises(PermanentError, match=str(code)):
                await asyncio.wait_for(asyncio.shield(r.task), 10)
        Run(dc, token=token, intents=intents).run(scenario)
        assert len(dc.gateway_log("connect")) == 1, "not retried"


def test_a_gateway_closing_before_hello_with_a_refusing_code_is_not_retried():
    """A gateway that closes with 4012 (invalid API version) before its Hello: refused, not retried."""
    from aiohttp import web
    connects = []

    async def refuse(request):
        connects.append(request.query_string)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.close(code=4012, message=b"Invalid API version")
        return ws

    async def main():
        app = web.Application()
        app.router.add_get("/gateway", refuse)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        link = GatewayLink(DEFAULT_TOKEN, INTENTS_ALL, f"ws://127.0.0.1:{port}/gateway", lambda *a: None)
        try:
            async with aiohttp.ClientSession() as http:
                with pytest.raises(PermanentError, match="4012"):
                    await asyncio.wait_for(link.serve(http, None), 10)
        finally:
            await runner.cleanup()
    asyncio.run(main())
    assert connects == ["v=10&encoding=json"]


def test_only_a_hello_with_a_positive_interval_gives_one():
    assert heartbeat_interval_s({"op": 10, "d": {"heartbeat_interval": 41250}}) == 41.25
    for payload in ({"op": 10, "d": {}}, {"op": 10, "d": {"heartbeat_interval": 0}}, {"op": 11, "d": None},
                    {"op": 10, "d": {"heartbeat_interval": True}}):
        assert heartbeat_interval_s(payload) is None


def test_the_gateway_address_asks_for_v10_json():
    assert gateway_address("wss://gateway.discord.gg") == "wss://gateway.discord.gg/?v=10&encoding=json"
    assert gateway_address("ws://127.0.0.1:1/gateway/resume").endswith("/gateway/resume?v=10&encoding=json")


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
