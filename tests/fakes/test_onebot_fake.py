"""The fake OneBot v11 implementation on its own: the access token at the handshake, the lifecycle and heartbeat
meta events, actions answered by echo with OneBot's retcodes, the pace counter, and the reverse WebSocket against a
small server written here (no gateway)."""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import threading

import aiohttp
import pytest
from aiohttp import web

from tests.fakes.onebot import BOT_QQ, DEFAULT_TOKEN, FakeOneBot

pytestmark = pytest.mark.timeout(60)


@contextlib.contextmanager
def small_server(method: str, path: str, handle):
    """A server of the test's on 127.0.0.1, in a thread (the fake's reverse WebSocket and event POSTs reach it):
    yields its port."""
    async def serve():
        app = web.Application()
        app.router.add_route(method, path, handle)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return runner, runner.addresses[0][1]
    loop = asyncio.new_event_loop()
    runner, port = loop.run_until_complete(serve())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@pytest.fixture
def fake():
    with FakeOneBot(heartbeat_interval=0.2, pace_per_minute=3, pace_min_gap_s=0.3) as server:
        yield server


async def handshake_status(url: str, headers: dict) -> int:
    async with aiohttp.ClientSession() as http:
        try:
            async with http.ws_connect(url, headers=headers):
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


def test_the_access_token_is_checked_before_the_upgrade(fake):
    url = f"ws://127.0.0.1:{fake.port}/"
    assert asyncio.run(handshake_status(url, {})) == 401
    assert asyncio.run(handshake_status(url, {"Authorization": "Bearer wrong"})) == 403
    assert asyncio.run(handshake_status(url, {"Authorization": f"Bearer {DEFAULT_TOKEN}"})) == 101
    assert asyncio.run(handshake_status(url + f"?access_token={DEFAULT_TOKEN}", {})) == 101
    assert fake.stats()["refused"] == [401, 403]


async def session(fake: FakeOneBot, script):
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(f"ws://127.0.0.1:{fake.port}/",
                                   headers={"Authorization": f"Bearer {DEFAULT_TOKEN}"}) as ws:
            async def frame():
                return json.loads((await asyncio.wait_for(ws.receive(), 10)).data)

            async def answer(action, params, echo):
                await ws.send_json({"action": action, "params": params, "echo": echo})
                while True:
                    body = await frame()
                    if body.get("echo") == echo:
                        return body
            return await script(frame, answer)


def test_lifecycle_then_heartbeats_then_events_with_the_accounts_self_id(fake):
    async def script(frame, answer):
        first = await frame()
        assert (first["post_type"], first["meta_event_type"], first["sub_type"]) == ("meta_event", "lifecycle",
                                                                                     "connect")
        beat = await frame()
        assert beat["meta_event_type"] == "heartbeat" and beat["interval"] == 200 and beat["self_id"] == BOT_QQ
        await asyncio.to_thread(fake.inject_group, "team", "alice", "hello")
        while (event := await frame())["post_type"] != "message":
            pass
        return event
    event = asyncio.run(session(fake, script))
    assert event["message_type"] == "group" and event["self_id"] == BOT_QQ and event["group_id"] == fake.qq("team")
    assert event["message"][0] == {"type": "at", "data": {"qq": str(BOT_QQ)}}
    assert event["raw_message"] == f"[CQ:at,qq={BOT_QQ}] hello"


def test_actions_are_answered_by_echo_with_onebots_retcodes(fake):
    async def script(frame, answer):
        me = await answer("get_login_info", {}, "a")
        sent = await answer("send_private_msg", {"user_id": 42, "message": [
            {"type": "reply", "data": {"id": "7"}}, {"type": "text", "data": {"text": "hi"}}]}, {"n": 1})
        bad = await answer("send_group_msg", {"group_id": "not a number", "message": "x"}, "c")
        unknown = await answer("set_qq_avatar", {}, "d")
        await asyncio.sleep(0.3)    # the fake's pace: the next message is not the gap's violation
        gone = await answer("delete_msg", {"message_id": 999999}, "e")
        return me, sent, bad, unknown, gone
    me, sent, bad, unknown, gone = asyncio.run(session(fake, script))
    assert me == {"status": "ok", "retcode": 0, "data": {"user_id": BOT_QQ, "nickname": "gateway bot"}, "echo": "a"}
    assert sent["retcode"] == 0 and sent["echo"] == {"n": 1} and isinstance(sent["data"]["message_id"], int)
    assert fake.sent("private:42")[0]["text"] == "hi" and fake.sent("private:42")[0]["reply"] == "7"
    assert (bad["status"], bad["retcode"]) == ("failed", 1400)
    assert unknown["retcode"] == 1404 and gone["retcode"] == 100


def test_the_pace_counter_counts_a_gap_too_short_and_a_minute_overfull(fake):
    async def script(frame, answer):
        for text in ("one", "two"):          # back to back: a gap under 0.3 s
            await answer("send_private_msg", {"user_id": 42, "message": text}, text)
        await asyncio.sleep(0.35)            # the gap the fake asks for: no violation
        await answer("send_private_msg", {"user_id": 42, "message": "three"}, "three")
        await asyncio.sleep(0.35)
        await answer("send_private_msg", {"user_id": 42, "message": "four"}, "four")   # the 4th within a minute
    asyncio.run(session(fake, script))
    assert fake.stats()["pace_violations"] == 2
    assert len(fake.gaps()) == 3 and fake.gaps()[0] < 0.3 <= min(fake.gaps()[1:])


def test_the_reverse_websocket_sends_the_token_and_reconnects_after_a_refusal():
    seen = []

    async def handle(request):
        seen.append(dict(request.headers))
        if request.headers.get("Authorization") != "Bearer right":
            return web.Response(status=403)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for _ in ws:
            pass
        return ws

    with small_server("GET", "/onebot/v11/ws", handle) as port:
        with FakeOneBot() as fake:
            fake.connect_reverse(f"ws://127.0.0.1:{port}/onebot/v11/ws", "wrong", reconnect_interval=0.05)
            fake.wait_for(lambda: fake.reverse_attempts.count(403) >= 2, timeout=10)
            assert fake.connected() == 0
        with FakeOneBot() as fake:
            fake.connect_reverse(f"ws://127.0.0.1:{port}/onebot/v11/ws", "right")
            fake.wait_for(fake.connected, timeout=10)
            assert fake.reverse_attempts[0] == 101
    assert seen[0]["X-Self-ID"] == str(BOT_QQ) and seen[0]["X-Client-Role"] == "Universal"


def test_the_http_api_takes_the_token_and_event_posts_are_signed(fake):
    async def api(action, params, token):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{fake.base_url}/{action}", json=params, headers=headers) as resp:
                return resp.status, (await resp.json() if resp.status == 200 else None)
    assert asyncio.run(api("get_login_info", {}, None))[0] == 401
    assert asyncio.run(api("get_login_info", {}, "wrong"))[0] == 403
    assert asyncio.run(api("set_qq_avatar", {}, DEFAULT_TOKEN))[0] == 404
    status, answer = asyncio.run(api("send_group_msg", {"group_id": 7, "message": "hi"}, DEFAULT_TOKEN))
    assert status == 200 and answer["retcode"] == 0 and fake.sent("group:7")[0]["text"] == "hi"

    posted = []

    async def handle(request):
        posted.append((await request.read(), dict(request.headers)))
        return web.Response(status=204)

    with small_server("POST", "/events", handle) as port:
        fake.post_events_to(f"http://127.0.0.1:{port}/events", "s3cret")
        event = fake.inject_private("alice", "posted")
        fake.wait_for(lambda: any(b'"posted"' in body for body, _ in posted) and 204 in fake.post_statuses, 10)
    body, headers = next((b, h) for b, h in posted if b'"posted"' in b)
    assert json.loads(body)["message_id"] == event["message_id"] and headers["X-Self-ID"] == str(BOT_QQ)
    assert headers["X-Signature"] == "sha1=" + hmac.new(b"s3cret", body, hashlib.sha1).hexdigest()
    assert any(json.loads(b).get("meta_event_type") == "heartbeat" for b, _ in posted), "heartbeats are POSTed too"
