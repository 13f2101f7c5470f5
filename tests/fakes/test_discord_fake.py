"""The fake Discord on its own, through a minimal gateway client written here (aiohttp WebSocket) and plain HTTP:
the gateway handshake, heartbeats, resume and its replay, op 7 / op 9, close codes, intents, REST message
methods, their limits and error bodies, nonces, rate-limit buckets, faults, and the standalone process."""
from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
import zlib
from typing import Callable, Optional

import aiohttp
import pytest

from tests.fakes.discord import BOT_ID, DEFAULT_TOKEN, DEFAULT_USER_ID, GENERAL_CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.fakes.discord.protocol import INTENTS, NOT_RECONNECTABLE
from tests.fakes.harness import ControlClient, StandaloneFake

pytestmark = pytest.mark.timeout(30)

ALL_MESSAGES = INTENTS["GUILDS"] | INTENTS["GUILD_MESSAGES"] | INTENTS["DIRECT_MESSAGES"] | INTENTS["MESSAGE_CONTENT"]
ROOMY = {route: (100, 1.0) for route in ("create_message", "edit_message", "delete_message", "typing")}
WAIT = 5.0  # seconds any single frame may take to arrive on a loaded 2-core machine


@pytest.fixture
def dc():
    # Windows shrunk 20x (identify concurrency 0.25 s, reconnect grace 0.15 s) and roomy write buckets, so tests
    # that don't study rate limits never meet them.
    with FakeDiscord(time_scale=0.05, route_limits=ROOMY) as fake:
        yield fake


class Gateway:
    """A minimal gateway client: JSON frames (optionally zlib-stream), one receive at a time."""

    def __init__(self, http: aiohttp.ClientSession, url: str, *, compress: bool = False):
        self.http, self.url, self.compress = http, url, compress
        self.inflator, self.buffer = zlib.decompressobj(), bytearray()
        self.ws: Optional[aiohttp.ClientWebSocketResponse] = None
        self.seq: Optional[int] = None
        self.hello: Optional[dict] = None

    async def connect(self, query: str = "v=10&encoding=json") -> dict:
        if self.compress:
            query += "&compress=zlib-stream"
        self.ws = await self.http.ws_connect(f"{self.url}?{query}", autoclose=False)
        self.hello = await self.recv()
        return self.hello

    async def recv(self, timeout: float = WAIT) -> dict:
        """The next payload; a close frame comes back as {"close": code}."""
        while True:
            message = await asyncio.wait_for(self.ws.receive(), timeout)
            if message.type == aiohttp.WSMsgType.BINARY:
                self.buffer.extend(message.data)
                if not message.data.endswith(b"\x00\x00\xff\xff"):
                    continue
                text, self.buffer = self.inflator.decompress(bytes(self.buffer)).decode(), bytearray()
            elif message.type == aiohttp.WSMsgType.TEXT:
                text = message.data
            else:
                if message.type == aiohttp.WSMsgType.CLOSE:
                    await self.ws.close()
                return {"close": self.ws.close_code if message.type != aiohttp.WSMsgType.CLOSE else message.data}
            payload = json.loads(text)
            if payload.get("s") is not None:
                self.seq = payload["s"]
            return payload

    async def until(self, predicate: Callable[[dict], bool], timeout: float = WAIT) -> dict:
        deadline = time.monotonic() + timeout
        seen = []
        while True:
            try:
                payload = await self.recv(max(0.01, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                raise AssertionError(f"no matching payload within {timeout} s; saw {seen}") from None
            seen.append({k: payload.get(k) for k in ("op", "t", "s", "close")})
            if predicate(payload):
                return payload

    async def send(self, op: int, d) -> None:
        await self.ws.send_str(json.dumps({"op": op, "d": d}))

    async def identify(self, token: str = DEFAULT_TOKEN, intents: int = ALL_MESSAGES, **extra) -> dict:
        await self.send(2, {"token": token, "intents": intents,
                            "properties": {"os": "linux", "browser": "test", "device": "test"}, **extra})
        return await self.recv()

    async def resume(self, session_id: str, seq: int, token: str = DEFAULT_TOKEN) -> None:
        await self.send(6, {"token": token, "session_id": session_id, "seq": seq})

    async def close(self, code: int = 4000) -> None:
        await self.ws.close(code=code)


async def identify_when_allowed(gw: Gateway, **kw) -> dict:
    """Identify, backing off while the fake answers op 9 for the identify concurrency window (max_concurrency 1
    per 5 s, 0.25 s here), as Discord asks a client to."""
    deadline = time.monotonic() + WAIT
    while True:
        answer = await gw.identify(**kw)
        if answer.get("t") == "READY" or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.1)  # the client's back-off between Identify attempts


def run(fake: FakeDiscord, scenario):
    """Run ``scenario(http, gateway_factory)`` in a fresh loop with one HTTP session."""
    async def main():
        async with aiohttp.ClientSession() as http:
            return await scenario(http, lambda url=fake.gateway_url, **kw: Gateway(http, url, **kw))
    return asyncio.run(main())


async def call(http: aiohttp.ClientSession, fake: FakeDiscord, method: str, path: str, body=None,
               token: Optional[str] = DEFAULT_TOKEN):
    headers = {"Authorization": f"Bot {token}"} if token else {}
    async with http.request(method, fake.api_url + path, json=body, headers=headers) as response:
        payload = await response.json() if response.status != 204 else None
        return response.status, response.headers, payload


def rest(fake: FakeDiscord, method: str, path: str, body=None, token: Optional[str] = DEFAULT_TOKEN):
    """One plain synchronous call; returns (status, headers, JSON body or None)."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bot {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(fake.api_url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            raw = response.read()
            return response.status, response.headers, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        return error.code, error.headers, json.loads(error.read() or b"null")


def send(fake, channel_id, content, **extra):
    return rest(fake, "POST", f"/channels/{channel_id}/messages", {"content": content, **extra})


# -- the handshake
def test_hello_identify_ready_and_guild_create(dc):
    async def scenario(http, gateway):
        status, _, info = await call(http, dc, "GET", "/gateway", token=None)
        status_bot, _, bot_info = await call(http, dc, "GET", "/gateway/bot")
        gw = gateway(info["url"])
        hello = await gw.connect()
        ready = await gw.identify()
        guild_create = await gw.recv()
        return status, status_bot, bot_info, hello, ready, guild_create

    status, status_bot, bot_info, hello, ready, guild_create = run(dc, scenario)
    assert (status, status_bot) == (200, 200) and bot_info["url"] == dc.gateway_url
    assert bot_info["session_start_limit"]["max_concurrency"] == 1 and bot_info["shards"] == 1
    assert hello["op"] == 10 and hello["d"]["heartbeat_interval"] == 41250 and hello["s"] is None
    assert (ready["op"], ready["t"], ready["s"]) == (0, "READY", 1)
    d = ready["d"]
    assert d["v"] == 10 and d["user"]["id"] == str(BOT_ID) and d["user"]["bot"] is True
    assert d["guilds"] == [{"id": str(GUILD_ID), "unavailable": True}]
    assert d["resume_gateway_url"] == dc.resume_gateway_url and len(d["session_id"]) == 32
    assert d["application"]["id"] == str(BOT_ID)
    assert (guild_create["t"], guild_create["s"]) == ("GUILD_CREATE", 2)
    assert guild_create["d"]["id"] == str(GUILD_ID) and guild_create["d"]["unavailable"] is False
    assert [(c["name"], c["type"]) for c in guild_create["d"]["channels"]] == [("general", 0)]
    assert [m["user"]["id"] for m in guild_create["d"]["members"]][0] == str(BOT_ID)
    assert dc.stats()["identifies"] == 1 and dc.sessions()[0]["seq"] == 2


def test_heartbeats_are_acked_and_the_gateway_can_ask_for_one(dc):
    async def scenario(http, gateway):
        gw = gateway()
        await gw.connect()
        await gw.send(1, None)  # allowed before Identify
        first_ack = await gw.recv()
        await gw.identify()
        await gw.recv()  # GUILD_CREATE
        await gw.send(1, gw.seq)
        second_ack = await gw.recv()
        assert dc.request_heartbeat() == 1
        request = await gw.recv()
        return first_ack, second_ack, request

    first_ack, second_ack, request = run(dc, scenario)
    assert first_ack == second_ack == {"op": 11, "d": None, "s": None, "t": None}
    assert request == {"op": 1, "d": None, "s": None, "t": None}
    assert dc.stats()["heartbeats"] == 2


def test_a_missed_heartbeat_closes_with_4009_and_the_session_stays_resumable():
    with FakeDiscord(time_scale=0.05, heartbeat_interval=100) as fake:
        async def scenario(http, gateway):
            gw = gateway()
            await gw.connect()
            ready = await gw.identify()
            closed = await gw.until(lambda p: "close" in p)  # never heartbeats
            again = gateway(ready["d"]["resume_gateway_url"])
            await again.connect()
            await again.resume(ready["d"]["session_id"], gw.seq)
            resumed = await again.recv()
            await again.close()
            return closed, resumed

        closed, resumed = run(fake, scenario)
        assert closed == {"close": 4009} and resumed["t"] == "RESUMED"
        assert fake.gateway_log("closed")[0]["by"] == "fake"


def test_zombied_connection_gets_no_acks_when_configured(dc):
    dc.configure(ack_heartbeats=False)

    async def scenario(http, gateway):
        gw = gateway()
        await gw.connect()
        await gw.send(1, None)
        with pytest.raises(asyncio.TimeoutError):
            await gw.recv(timeout=0.3)  # an ACK would arrive in milliseconds
        await gw.close()

    run(dc, scenario)
    assert dc.stats()["heartbeats"] == 1


# -- resume, reconnect, invalid session
def test_resume_after_a_drop_replays_missed_dispatches_in_order(dc):
    async def scenario(http, gateway):
        gw = gateway()
        await gw.connect()
        ready = await gw.identify()
        await gw.recv()  # GUILD_CREATE
        dc.inject_message("before the drop", GENERAL_CHANNEL_ID)
        before = await gw.recv()
        assert dc.drop_gateway() == 1
        assert "close" in await gw.recv()  # no close frame: the TCP connection just ends
        dc.inject_message("missed one", GENERAL_CHANNEL_ID)
        dc.inject_message("missed two")  # a DM
        again = gateway(ready["d"]["resume_gateway_url"])
        await again.connect()
        await again.resume(ready["d"]["session_id"], before["s"])
        replayed = [await again.recv() for _ in range(3)]
        dc.inject_message("after the resume", GENERAL_CHANNEL_ID)
        live = await again.recv()
        await again.close()
        return before, replayed, live

    before, replayed, live = run(dc, scenario)
    assert [(p["t"], p["s"]) for p in replayed] == [("MESSAGE_CREATE", 4), ("MESSAGE_CREATE", 5), ("RESUMED", 6)]
    assert [p["d"]["content"] for p in replayed[:2]] == ["missed one", "missed two"]
    assert (live["s"], live["d"]["content"]) == (7, "after the resume") and before["s"] == 3
    assert dc.stats()["identifies"] == 1 and dc.stats()["resumes"] == 1
    assert [e["via"] for e in dc.gateway_log("connect")] == ["url", "resume_gateway_url"]


def test_unknown_session_and_a_session_ended_by_op9_get_invalid_session_false(dc):
    async def scenario(http, gateway):
        gw = gateway()
        await gw.connect()
        await gw.resume("no-such-session", 3)
        unknown = await gw.recv()
        ready = await gw.identify()  # the same connection may still identify
        await gw.recv()
        assert dc.send_invalid_session(resumable=False) == 1
        op9 = await gw.recv()
        closed = await gw.recv()  # the fake closes after the grace period
        again = gateway(ready["d"]["resume_gateway_url"])
        await again.connect()
        await again.resume(ready["d"]["session_id"], gw.seq)
        refused = await again.recv()
        fresh = gateway()
        await fresh.connect()
        new_ready = await identify_when_allowed(fresh)
        await fresh.close()
        return unknown, op9, closed, refused, ready, new_ready

    unknown, op9, closed, refused, ready, new_ready = run(dc, scenario)
    assert unknown == op9 == refused == {"op": 9, "d": False, "s": None, "t": None}
    assert closed == {"close": 4000}
    assert new_ready["t"] == "READY" and new_ready["d"]["session_id"] != ready["d"]["session_id"]
    assert dc.stats()["resumes_refused"] == 2 and dc.stats()["identifies"] == 2


def test_op7_reconnect_then_resume_and_a_client_that_stays_is_closed(dc):
    async def scenario(http, gateway):
        gw = gateway()
        await gw.connect()
        ready = await gw.identify()
        await gw.recv()
        assert dc.send_reconnect() == 1
        op7 = await gw.recv()
        await gw.close(4000)  # any code but 1000/1001 keeps the session
        again = gateway(ready["d"]["resume_gateway_url"])
        await again.connect()
        await again.resume(ready["d"]["session_id"], gw.seq)
        resumed = await again.recv()
        dc.send_reconnect()
        await again.recv()
        stayed = await again.recv()  # ignores op 7: closed by the fake after reconnect_grace
        return op7, resumed, stayed

    op7, resumed, stayed = run(dc, scenario)
    assert op7 == {"op": 7, "d": None, "s": None, "t": None}
    assert (resumed["t"], resumed["s"]) == ("RESUMED", 3) and stayed == {"close": 4000}
    assert dc.stats()["identifies"] == 1


def test_a_session_left_too_long_or_resumed_from_beyond_the_buffer_is_refused():
    with FakeDiscord(time_scale=0.05, resume_buffer=2) as fake:
        async def scenario(http, gateway):
            gw = gateway()
            await gw.connect()
            ready = await gw.identify()
            await gw.recv()
            for text in ("one", "two", "three"):
                fake.inject_message(text)
            while gw.seq < 5:
                await gw.recv()
            await gw.close(4000)
            beyond = gateway()
            await beyond.connect()
            await beyond.resume(ready["d"]["session_id"], 2)  # seq 3 is no longer buffered
            trimmed = await beyond.recv()
            fake.configure(session_timeout=0.0)
            late = gateway()
            await late.connect()
            await late.resume(ready["d"]["session_id"], 5)
            return trimmed, await late.recv()

        assert run(fake, scenario) == ({"op": 9, "d": False, "s": None, "t": None},) * 2


def test_dispatches_follow_the_shard_formula_and_dms_go_to_shard_0(dc):
    guild_shard = (GUILD_ID >> 22) % 2

    async def scenario(http, gateway):
        shards = [gateway(), gateway()]
        for number, gw in enumerate(shards):
            await gw.connect()
            ready = await identify_when_allowed(gw, shard=[number, 2])
            assert ready["d"]["shard"] == [number, 2]
        dc.inject_message("guild message", GENERAL_CHANNEL_ID)
        dc.inject_message("direct message")
        received = []
        for number, gw in enumerate(shards):
            expected = (number == guild_shard) + (number == 0) + (number == guild_shard)  # + GUILD_CREATE
            received.append([(await gw.recv())["t"] for _ in range(expected)])
            with pytest.raises(asyncio.TimeoutError):
                await gw.recv(timeout=0.2)  # nothing else for this shard
        return received

    received = run(dc, scenario)
    assert received[guild_shard][:2] == ["GUILD_CREATE", "MESSAGE_CREATE"]
    assert sum(len(r) for r in received) == 3


def test_user_edits_deletes_and_new_threads_are_dispatched(dc):
    message = dc.inject_message("first draft", GENERAL_CHANNEL_ID)

    async def scenario(http, gateway):
        gw = gateway()
        await gw.connect()
        await gw.identify()
        await gw.recv()
        dc.inject_edit(GENERAL_CHANNEL_ID, int(message["id"]), "second draft")
        dc.inject_delete(GENERAL_CHANNEL_ID, int(message["id"]))
        dc.add_thread(GENERAL_CHANNEL_ID, name="side talk")
        return [await gw.recv() for _ in range(3)]

    update, delete, thread = run(dc, scenario)
    assert (update["t"], update["d"]["id"], update["d"]["content"]) == ("MESSAGE_UPDATE", message["id"], "second draft")
    assert update["d"]["edited_timestamp"] and delete["t"] == "MESSAGE_DELETE"
    assert (thread["t"], thread["d"]["name"], thread["d"]["newly_created"]) == ("THREAD_CREATE", "side talk", True)
    (record,) = dc.messages(GENERAL_CHANNEL_ID, incoming=True)
    assert [h["content"] for h in record["history"]] == ["first draft", "second draft"] and record["deleted"]


def test_closing_with_1000_ends_the_session(dc):
    async def scenario(http, gateway):
        gw = gateway()
        await gw.connect()
        ready = await gw.identify()
        await gw.close(1000)
        await asyncio.get_running_loop().run_in_executor(
            None, dc.wait_for, lambda: dc.gateway_log("closed"))
        again = gateway()
        await again.connect()
        await again.resume(ready["d"]["session_id"], 1)
        return await again.recv()

    assert run(dc, scenario) == {"op": 9, "d": False, "s": None, "t": None}


@pytest.mark.parametrize("name, frames, code", [
    ("bad token", [{"op": 2, "d": {"token": "nope", "intents": 1, "properties": {}}}], 4004),
    ("intents outside the known bits", [{"op": 2, "d": {"token": DEFAULT_TOKEN, "intents": 1 << 30,
                                                        "properties": {}}}], 4013),
    ("intents missing", [{"op": 2, "d": {"token": DEFAULT_TOKEN, "properties": {}}}], 4013),
    ("privileged intent not enabled", [{"op": 2, "d": {"token": DEFAULT_TOKEN, "intents": INTENTS["GUILD_MEMBERS"],
                                                       "properties": {}}}], 4014),
    ("shard out of range", [{"op": 2, "d": {"token": DEFAULT_TOKEN, "intents": 1, "shard": [2, 2],
                                            "properties": {}}}], 4010),
    ("second identify", [{"op": 2, "d": {"token": DEFAULT_TOKEN, "intents": 1, "properties": {}}},
                         {"op": 2, "d": {"token": DEFAULT_TOKEN, "intents": 1, "properties": {}}}], 4005),
    ("payload before identifying", [{"op": 3, "d": {"status": "online"}}], 4003),
    ("unknown opcode", [{"op": 5, "d": None}], 4001),
    ("not JSON", ["{nope"], 4002),
    ("over 4096 bytes", [{"op": 1, "d": None, "pad": "x" * 4096}], 4002),
    ("resume with a seq ahead of the session", "resume-ahead", 4007),
])
def test_close_codes(dc, name, frames, code):
    async def scenario(http, gateway):
        if frames == "resume-ahead":
            first = gateway()
            await first.connect()
            ready = await first.identify()
            await first.close(4000)
            gw = gateway()
            await gw.connect()
            await gw.resume(ready["d"]["session_id"], 99)
        else:
            gw = gateway()
            await gw.connect()
            for frame in frames:
                await gw.ws.send_str(frame if isinstance(frame, str) else json.dumps(frame))
        return await gw.until(lambda p: "close" in p)

    assert run(dc, scenario) == {"close": code}


def test_version_sharding_and_send_rate_close_codes(dc):
    async def scenario(http, gateway):
        old = gateway()
        old.ws = await http.ws_connect(f"{dc.gateway_url}?v=6&encoding=json", autoclose=False)
        version = await old.recv()
        dc.configure(sharding_required=True)
        unsharded = gateway()
        await unsharded.connect()
        sharding = await unsharded.identify(intents=1)
        dc.configure(sharding_required=False, gateway_send_limit=5)
        chatty = gateway()
        await chatty.connect()
        for _ in range(6):
            await chatty.send(1, None)
        flooded = await chatty.until(lambda p: "close" in p)
        return version, sharding, flooded

    assert run(dc, scenario) == ({"close": 4012}, {"close": 4011}, {"close": 4008})
    assert NOT_RECONNECTABLE == {4004, 4010, 4011, 4012, 4013, 4014}


# -- intents and content
def test_without_message_content_guild_content_is_empty_except_dms_mentions_and_own(dc):
    async def scenario(http, gateway):
        gw = gateway()
        await gw.connect()
        await gw.identify(intents=ALL_MESSAGES & ~INTENTS["MESSAGE_CONTENT"])
        await gw.recv()
        dc.inject_message("plain guild talk", GENERAL_CHANNEL_ID)
        dc.inject_message("hey bot", GENERAL_CHANNEL_ID, mention_bot=True)
        dc.inject_message("a DM")
        await call(http, dc, "POST", f"/channels/{GENERAL_CHANNEL_ID}/messages", {"content": "the bot speaks"})
        return [(await gw.recv())["d"]["content"] for _ in range(4)]

    assert run(dc, scenario) == ["", f"<@{BOT_ID}> hey bot", "a DM", "the bot speaks"]


def test_intents_choose_which_messages_arrive(dc):
    async def scenario(http, gateway):
        gw = gateway()
        await gw.connect()
        await gw.identify(intents=INTENTS["DIRECT_MESSAGES"])  # no GUILDS: no GUILD_CREATE either
        dc.inject_message("in the guild", GENERAL_CHANNEL_ID)
        dc.inject_message("in a DM")
        return await gw.recv()

    first = run(dc, scenario)
    assert (first["t"], first["d"]["content"], first["s"]) == ("MESSAGE_CREATE", "in a DM", 2)
    assert "guild_id" not in first["d"] and first["d"]["channel_type"] == 1


def test_zlib_stream_transport_compression_and_json_in_binary_frames(dc):
    async def scenario(http, gateway):
        gw = gateway(compress=True)
        hello = await gw.connect()
        await gw.ws.send_bytes(json.dumps({"op": 2, "d": {"token": DEFAULT_TOKEN, "intents": 1,
                                                          "properties": {}}}).encode())
        ready = await gw.recv()
        return hello, ready

    hello, ready = run(dc, scenario)
    assert hello["op"] == 10 and ready["t"] == "READY"
    assert dc.gateway_log("connect")[0]["query"]["compress"] == "zlib-stream"


# -- REST messages
def test_create_edit_delete_typing_and_their_dispatches(dc):
    incoming = dc.inject_message("question", GENERAL_CHANNEL_ID)

    async def scenario(http, gateway):
        gw = gateway()
        await gw.connect()
        await gw.identify()
        await gw.recv()
        path = f"/channels/{GENERAL_CHANNEL_ID}/messages"
        created = await call(http, dc, "POST", path, {
            "content": "answer", "message_reference": {"message_id": incoming["id"]}})
        mid = created[2]["id"]
        edited = await call(http, dc, "PATCH", f"{path}/{mid}", {"content": "better answer"})
        typing = await call(http, dc, "POST", f"/channels/{GENERAL_CHANNEL_ID}/typing")
        deleted = await call(http, dc, "DELETE", f"{path}/{mid}")
        again = await call(http, dc, "DELETE", f"{path}/{mid}")
        events = [await gw.recv() for _ in range(3)]
        return created, edited, typing, deleted, again, events

    created, edited, typing, deleted, again, events = run(dc, scenario)
    message = created[2]
    assert created[0] == 200 and message["author"]["id"] == str(BOT_ID) and message["type"] == 19
    assert message["message_reference"] == {"type": 0, "message_id": incoming["id"],
                                            "channel_id": str(GENERAL_CHANNEL_ID), "guild_id": str(GUILD_ID)}
    assert message["referenced_message"]["content"] == "question" and message["edited_timestamp"] is None
    assert int(message["id"]) > int(incoming["id"])  # snowflakes increase
    assert edited[0] == 200 and edited[2]["content"] == "better answer" and edited[2]["edited_timestamp"]
    assert (typing[0], typing[2], deleted[0], deleted[2]) == (204, None, 204, None)
    assert again[:1] == (404,) and again[2] == {"message": "Unknown Message", "code": 10008}
    assert [e["t"] for e in events] == ["MESSAGE_CREATE", "MESSAGE_UPDATE", "MESSAGE_DELETE"]
    assert events[0]["d"]["guild_id"] == str(GUILD_ID) and "member" in events[0]["d"]
    assert events[2]["d"] == {"id": message["id"], "channel_id": str(GENERAL_CHANNEL_ID), "guild_id": str(GUILD_ID)}
    (record,) = dc.messages(GENERAL_CHANNEL_ID)
    assert [h["content"] for h in record["history"]] == ["answer", "better answer"] and record["deleted"]
    assert [o["route"] for o in dc.ops(GENERAL_CHANNEL_ID)] == ["create_message", "edit_message", "typing",
                                                                "delete_message", "delete_message"]


def test_content_limit_is_2000_characters_with_discords_error_body(dc):
    assert send(dc, GENERAL_CHANNEL_ID, "é" * 2000)[0] == 200
    status, _, body = send(dc, GENERAL_CHANNEL_ID, "a" * 2001)
    assert status == 400 and body == {"message": "Invalid Form Body", "code": 50035, "errors": {"content": {
        "_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]}}}
    mid = dc.messages(GENERAL_CHANNEL_ID)[0]["id"]
    assert rest(dc, "PATCH", f"/channels/{GENERAL_CHANNEL_ID}/messages/{mid}", {"content": "b" * 2001})[0] == 400
    assert send(dc, GENERAL_CHANNEL_ID, "  ")[2] == {"message": "Cannot send an empty message", "code": 50006}
    assert dc.final_texts(GENERAL_CHANNEL_ID) == ["é" * 2000]


def test_another_users_message_cannot_be_edited_or_deleted(dc):
    guild_message = dc.inject_message("mine", GENERAL_CHANNEL_ID)["id"]
    dm = dc.inject_message("also mine")
    path = f"/channels/{GENERAL_CHANNEL_ID}/messages/{guild_message}"
    assert rest(dc, "PATCH", path, {"content": "edited by the bot"})[::2] == (
        403, {"message": "Cannot edit a message authored by another user", "code": 50005})
    assert rest(dc, "DELETE", path)[::2] == (403, {"message": "Missing Permissions", "code": 50013})
    assert rest(dc, "DELETE", f"/channels/{dm['channel_id']}/messages/{dm['id']}")[::2] == (
        403, {"message": "Cannot execute action on a DM channel", "code": 50003})
    assert rest(dc, "PATCH", f"/channels/{GENERAL_CHANNEL_ID}/messages/1", {"content": "x"})[::2] == (
        404, {"message": "Unknown Message", "code": 10008})
    assert send(dc, 42, "nowhere")[::2] == (404, {"message": "Unknown Channel", "code": 10003})
    dc.set_manage_messages(True)
    assert rest(dc, "DELETE", path)[0] == 204
    assert dc.messages(GENERAL_CHANNEL_ID, incoming=True)[0]["content"] == "mine"  # edits never landed


def test_enforce_nonce_returns_the_earlier_message_instead_of_a_second(dc):
    first = send(dc, GENERAL_CHANNEL_ID, "once", nonce="reply-17", enforce_nonce=True)[2]
    again = send(dc, GENERAL_CHANNEL_ID, "once", nonce="reply-17", enforce_nonce=True)[2]
    unenforced = send(dc, GENERAL_CHANNEL_ID, "twice", nonce="reply-18")[2]
    unenforced_again = send(dc, GENERAL_CHANNEL_ID, "twice", nonce="reply-18")[2]
    assert first["id"] == again["id"] and first["nonce"] == "reply-17"
    assert unenforced["id"] != unenforced_again["id"]
    assert dc.final_texts(GENERAL_CHANNEL_ID) == ["once", "twice", "twice"]
    assert [o.get("deduplicated") for o in dc.ops(GENERAL_CHANNEL_ID)] == [False, True, False, False]
    status, _, body = send(dc, GENERAL_CHANNEL_ID, "x", nonce="n" * 26)
    assert status == 400 and "nonce" in body["errors"]


def test_a_send_whose_answer_was_lost_is_not_repeated_when_retried_with_its_nonce(dc):
    dc.set_faults(next=["drop_after"], methods=["create_message"])
    with pytest.raises(OSError):  # the connection closes without an answer; the message exists
        urllib.request.urlopen(urllib.request.Request(
            f"{dc.api_url}/channels/{GENERAL_CHANNEL_ID}/messages", method="POST",
            data=json.dumps({"content": "hello", "nonce": "turn-9", "enforce_nonce": True}).encode(),
            headers={"Authorization": f"Bot {DEFAULT_TOKEN}", "Content-Type": "application/json"}), timeout=WAIT)
    status, _, retried = send(dc, GENERAL_CHANNEL_ID, "hello", nonce="turn-9", enforce_nonce=True)
    assert status == 200 and dc.final_texts(GENERAL_CHANNEL_ID) == ["hello"]
    assert retried["id"] == str(dc.messages(GENERAL_CHANNEL_ID)[0]["id"])


def test_replies_threads_dms_and_mentions(dc):
    thread_message = dc.inject_message("in a thread", GENERAL_CHANNEL_ID, thread_id=1300000000000000500)
    dm = dc.inject_message("private", user_id=1300000000000000200, username="bob")
    mention = dc.inject_message("ping", GENERAL_CHANNEL_ID, mention_bot=True)
    thread = dc.channel(1300000000000000500)
    assert thread["type"] == 11 and thread["parent_id"] == str(GENERAL_CHANNEL_ID)
    assert thread_message["channel_id"] == thread["id"] and thread_message["channel_type"] == 11
    assert thread_message["position"] == 0
    assert dm["channel_type"] == 1 and dc.channel(int(dm["channel_id"]))["recipients"][0]["username"] == "bob"
    assert [u["id"] for u in mention["mentions"]] == [str(BOT_ID)]
    status, _, answer = send(dc, thread["id"], "thread answer",
                             message_reference={"message_id": thread_message["id"]})
    assert status == 200 and answer["channel_id"] == thread["id"]
    assert dc.final_texts(int(thread["id"])) == ["thread answer"]
    reply = dc.inject_message("thanks", thread["id"], reply_to=int(answer["id"]))
    assert reply["referenced_message"]["id"] == answer["id"] and str(BOT_ID) in [u["id"] for u in reply["mentions"]]
    missing = send(dc, GENERAL_CHANNEL_ID, "to nothing", message_reference={"message_id": "1"})
    assert missing[0] == 400 and "message_reference" in missing[2]["errors"]
    lenient = send(dc, GENERAL_CHANNEL_ID, "to nothing",
                   message_reference={"message_id": "1", "fail_if_not_exists": False})
    assert lenient[0] == 200 and lenient[2]["type"] == 0 and "message_reference" not in lenient[2]
    opened = rest(dc, "POST", "/users/@me/channels", {"recipient_id": "1300000000000000200"})[2]
    assert opened["id"] == dm["channel_id"]


def test_malformed_requests_get_discords_400s(dc):
    assert rest(dc, "GET", f"/channels/{GENERAL_CHANNEL_ID}/messages?limit=lots")[0] == 400
    assert send(dc, GENERAL_CHANNEL_ID, "x", allowed_mentions="everyone")[2]["code"] == 50035
    assert send(dc, GENERAL_CHANNEL_ID, 42)[2]["errors"]["content"]["_errors"][0]["code"] == "BASE_TYPE_STRING"
    request = urllib.request.Request(f"{dc.api_url}/channels/{GENERAL_CHANNEL_ID}/messages", data=b"{nope",
                                     method="POST", headers={"Authorization": f"Bot {DEFAULT_TOKEN}",
                                                             "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as bad_json:
        urllib.request.urlopen(request, timeout=WAIT)
    assert json.loads(bad_json.value.read()) == {"message": "The request body contains invalid JSON.", "code": 50109}
    assert dc.final_texts(GENERAL_CHANNEL_ID) == []


def test_authorization_me_and_application(dc):
    assert rest(dc, "GET", "/users/@me", token=None)[::2] == (401, {"message": "401: Unauthorized", "code": 0})
    assert rest(dc, "GET", "/users/@me", token="wrong")[0] == 401
    status, _, me = rest(dc, "GET", "/users/@me")
    assert status == 200 and me["id"] == str(BOT_ID) and me["bot"] is True and me["discriminator"] == "0"
    app = rest(dc, "GET", "/oauth2/applications/@me")[2]
    assert app["id"] == str(BOT_ID) and app["flags"] & (1 << 18)  # GATEWAY_MESSAGE_CONTENT enabled


# -- rate limits and faults
def test_rate_limit_headers_and_429_when_over_the_channel_bucket():
    with FakeDiscord() as fake:  # Discord's defaults: 5 messages per 5 s per channel
        other = fake.add_text_channel("other")
        answers = [send(fake, GENERAL_CHANNEL_ID, f"m{i}") for i in range(6)]
        early = send(fake, GENERAL_CHANNEL_ID, "again, too soon")
        elsewhere = send(fake, other["id"], "another channel, another bucket")
    assert [status for status, _, _ in answers] == [200] * 5 + [429]
    assert [h["X-RateLimit-Remaining"] for _, h, _ in answers[:5]] == ["4", "3", "2", "1", "0"]
    headers = answers[0][1]
    assert headers["X-RateLimit-Limit"] == "5" and 4.0 < float(headers["X-RateLimit-Reset-After"]) <= 5.0
    assert abs(float(headers["X-RateLimit-Reset"]) - time.time() - 5) < 2
    _, limited, body = answers[5]
    assert set(body) == {"message", "retry_after", "global"} and body["global"] is False
    assert 0 < body["retry_after"] <= 5 and limited["X-RateLimit-Scope"] == "user"
    assert limited["X-RateLimit-Bucket"] == headers["X-RateLimit-Bucket"] and int(limited["Retry-After"]) >= 1
    assert early[0] == 429 and elsewhere[0] == 200
    assert fake.stats()["rate_limited"] == 2 and fake.stats()["retry_after_violations"] == 1


def test_a_client_that_waits_retry_after_gets_through_and_the_global_limit():
    with FakeDiscord(route_limits={"create_message": (1, 1.0)}, global_limit=(3, 60.0)) as fake:
        assert send(fake, GENERAL_CHANNEL_ID, "one")[0] == 200
        status, _, body = send(fake, GENERAL_CHANNEL_ID, "two")
        assert status == 429
        time.sleep(body["retry_after"])  # what the protocol tells a client to do
        assert send(fake, GENERAL_CHANNEL_ID, "two")[0] == 200
        assert rest(fake, "GET", "/users/@me")[0] == 200  # third request of the global budget
        status, headers, body = rest(fake, "GET", "/users/@me")
        assert status == 429 and body["global"] is True and headers["X-RateLimit-Global"] == "true"
        assert headers["X-RateLimit-Scope"] == "global" and fake.stats()["retry_after_violations"] == 0


def test_a_client_pacing_itself_by_the_headers_never_meets_a_429():
    with FakeDiscord(route_limits={"create_message": (2, 0.3)}) as fake:
        for i in range(6):
            status, headers, _ = send(fake, GENERAL_CHANNEL_ID, f"paced {i}")
            assert status == 200
            if headers["X-RateLimit-Remaining"] == "0":
                time.sleep(float(headers["X-RateLimit-Reset-After"]))  # as the headers say
        assert fake.stats()["rate_limited"] == 0 and len(fake.final_texts(GENERAL_CHANNEL_ID)) == 6


def test_scripted_faults_on_rest_methods(dc):
    dc.set_faults(next=["error", "drop", "drop_after", "flood"], methods=["create_message"], flood_retry_after=2.5)
    error = send(dc, GENERAL_CHANNEL_ID, "a")
    for _ in range(2):  # the connection closes without an answer: before the send took effect, then after
        with pytest.raises(OSError):
            send(dc, GENERAL_CHANNEL_ID, "c")
    flood = send(dc, GENERAL_CHANNEL_ID, "b")
    assert error[::2] == (500, {"message": "500: Internal Server Error", "code": 0})
    assert flood[0] == 429 and flood[2]["retry_after"] == 2.5 and flood[1]["X-RateLimit-Remaining"] == "0"
    assert dc.final_texts(GENERAL_CHANNEL_ID) == ["c"]  # drop_after took effect, drop did not
    assert [o["status"] for o in dc.ops(GENERAL_CHANNEL_ID)] == [500, 599, 200, 429]
    assert send(dc, GENERAL_CHANNEL_ID, "while banned")[0] == 429  # the scripted 429 binds like a real one
    assert dc.stats()["retry_after_violations"] == 1

    def storm():
        dc.reset()
        dc.set_faults(p_flood=0.5, seed=3, methods=["typing"], flood_retry_after=0.0)  # each 429 is its own
        return [rest(dc, "POST", f"/channels/{GENERAL_CHANNEL_ID}/typing")[0] for _ in range(10)]

    first = storm()
    assert first == storm() and set(first) == {204, 429}


# -- control API and the standalone process
def test_control_api_over_http(dc):
    control = ControlClient(dc.base_url)
    injected = control.post("/_control/inject", [{"content": "a", "channel_id": GENERAL_CHANNEL_ID},
                                                 {"content": "b", "user_id": DEFAULT_USER_ID}])["messages"]
    assert [m["content"] for m in injected] == ["a", "b"]
    edited = control.post("/_control/inject_edit", {"channel_id": GENERAL_CHANNEL_ID, "message_id": injected[0]["id"],
                                                    "content": "a2"})
    assert edited["content"] == "a2" and edited["edited_timestamp"]
    thread = control.post("/_control/channels", {"kind": "thread", "parent_id": GENERAL_CHANNEL_ID, "name": "t"})
    control.post("/_control/config", {"content_limit": 5})
    control.post("/_control/block", {"channel_id": injected[1]["channel_id"]})
    assert send(dc, thread["id"], "123456")[0] == 400 and send(dc, thread["id"], "12345")[0] == 200
    assert send(dc, injected[1]["channel_id"], "x")[::2] == (403, {"message": "Cannot send messages to this user",
                                                                   "code": 50007})
    timeline = control.get(f"/_control/channels/{GENERAL_CHANNEL_ID}")
    assert [m["history"][-1]["content"] for m in timeline["messages"]] == ["a2"]
    assert control.get("/_control/stats")["requests"]["create_message"] == 3
    assert control.post("/_control/gateway/drop", {}) == {"closed": 0}
    with pytest.raises(urllib.error.HTTPError) as refused:
        control.post("/_control/config", {"no_such_limit": 1})
    assert refused.value.code == 400
    control.post("/_control/reset")
    assert [c["name"] for c in control.get("/_control/channels")["channels"]] == ["general"]


def test_standalone_process_keeps_messages_and_sessions_across_a_kill(tmp_path):
    with StandaloneFake("tests.fakes.discord", tmp_path / "discord.json",
                        args=("--config", json.dumps({"time_scale": 0.05}))) as fake:
        base = fake.base_url

        async def connect_and_identify(http):
            gw = Gateway(http, base.replace("http", "ws") + "/gateway")
            await gw.connect()
            ready = await gw.identify()
            await gw.recv()
            return gw, ready

        async def first_life():
            async with aiohttp.ClientSession() as http:
                gw, ready = await connect_and_identify(http)
                fake.control.post("/_control/inject", {"content": "before", "channel_id": GENERAL_CHANNEL_ID})
                await gw.recv()
                return ready["d"], gw.seq

        ready, seq = asyncio.run(first_life())
        fake.kill()
        fake.start()
        fake.control.post("/_control/inject", {"content": "while the bot was away", "channel_id": GENERAL_CHANNEL_ID})

        async def second_life():
            async with aiohttp.ClientSession() as http:
                gw = Gateway(http, ready["resume_gateway_url"])
                await gw.connect()
                await gw.resume(ready["session_id"], seq)
                return [await gw.recv() for _ in range(2)]

        replayed = asyncio.run(second_life())
        assert [(p["t"], p["d"].get("content")) for p in replayed] == [
            ("MESSAGE_CREATE", "while the bot was away"), ("RESUMED", None)]
        timeline = fake.control.get(f"/_control/channels/{GENERAL_CHANNEL_ID}")
        assert [m["content"] for m in timeline["messages"]] == ["before", "while the bot was away"]
