"""The fake Mattermost holds to what the API reference and the server's behaviour say: tokens, AppErrors, the
rate limiter's 429, posts' rules, the WebSocket's authentication and seq (tests/fakes/mattermost)."""
from __future__ import annotations

import asyncio

import aiohttp
import pytest

from tests.fakes.mattermost import DEFAULT_TOKEN, FakeMattermost

pytestmark = pytest.mark.timeout(30)
AUTH = {"Authorization": f"Bearer {DEFAULT_TOKEN}"}


@pytest.fixture
def mm():
    with FakeMattermost() as fake:
        yield fake


def run(coro):
    return asyncio.run(coro)


async def call(mm, method, path, body=None, headers=AUTH):
    async with aiohttp.ClientSession() as http:
        async with http.request(method, mm.base_url + "/api/v4" + path, json=body, headers=headers) as resp:
            text = await resp.text()
            return resp.status, dict(resp.headers), text


def test_a_wrong_token_is_refused_with_an_app_error(mm):
    status, _headers, text = run(call(mm, "GET", "/users/me", headers={"Authorization": "Bearer nope"}))
    assert status == 401 and '"api.context.session_expired.app_error"' in text and '"status_code": 401' in text
    assert mm.stats()["unauthorized"] == 1


def test_the_rate_limiter_answers_429_with_its_headers_and_counts_who_came_back_early(mm):
    mm.configure(rate_per_s=1.0, rate_burst=2)
    dm = mm.direct_channel("alice")

    async def main():
        return [await call(mm, "POST", "/posts", {"channel_id": dm, "message": f"m{i}"}) for i in range(4)]

    answers = run(main())
    assert [a[0] for a in answers] == [201, 201, 429, 429]
    _status, headers, text = answers[2]
    assert text == "limit exceeded\n" and headers["Retry-After"] == "1" and headers["X-RateLimit-Remaining"] == "0"
    assert headers["X-RateLimit-Reset"] == "1"
    assert mm.stats()["retry_after_violations"] == 1, "the fourth came inside the window the third named"


def test_posts_keep_mattermost_s_rules(mm):
    dm, town = mm.direct_channel("alice"), mm.add_channel("ops", members=("alice",))
    theirs = mm.inject_post(dm, "alice", "mine, not the bot's")

    async def main():
        return {
            "too long": await call(mm, "POST", "/posts", {"channel_id": dm, "message": "x" * 16384}),
            "bad root": await call(mm, "POST", "/posts", {"channel_id": dm, "message": "x", "root_id": "r" * 26}),
            "not a member": await call(mm, "POST", "/posts", {"channel_id": "n" * 26, "message": "x"}),
            "someone else's": await call(mm, "PUT", f"/posts/{theirs['id']}/patch", {"message": "edited"}),
            "in a channel": await call(mm, "POST", "/posts", {"channel_id": town, "message": "hello ops"}),
        }

    answers = run(main())
    assert answers["too long"][0] == 400 and "message_length" in answers["too long"][2]
    assert answers["bad root"][0] == 400 and "root_id" in answers["bad root"][2]
    assert answers["not a member"][0] == 403 and answers["someone else's"][0] == 403
    assert answers["in a channel"][0] == 201
    assert [p["message"] for p in mm.posts(dm)] == ["mine, not the bot's"]


def test_the_websocket_authenticates_says_hello_and_counts_seq(mm):
    dm = mm.direct_channel("alice")

    async def main():
        async with aiohttp.ClientSession() as http:
            url = mm.base_url.replace("http", "ws") + "/api/v4/websocket"
            refused = await http.ws_connect(url)
            await refused.send_json({"seq": 1, "action": "authentication_challenge", "data": {"token": "nope"}})
            failed = await refused.receive_json()
            await refused.close()
            ws = await http.ws_connect(url)
            await ws.send_json({"seq": 1, "action": "user_typing", "data": {"channel_id": dm}})
            early = await ws.receive_json()
            await ws.send_json({"seq": 2, "action": "authentication_challenge", "data": {"token": DEFAULT_TOKEN}})
            frames = [await ws.receive_json(), await ws.receive_json()]
            mm.skip_events(1)
            mm.inject_post(dm, "alice", "lost")
            mm.inject_post(dm, "alice", "seen")
            frames.append(await ws.receive_json())
            await ws.close()
            return failed, early, frames

    failed, early, (ok, hello, posted) = run(main())
    assert failed["status"] == "FAIL" and failed["seq_reply"] == 1
    assert early["status"] == "FAIL" and "not_authenticated" in early["error"]["id"]
    assert ok == {"status": "OK", "seq_reply": 2} and hello["event"] == "hello" and hello["seq"] == 0
    assert posted["event"] == "posted" and posted["seq"] == 2, "seq 1 was spent on the lost event"
    assert '"seen"' in posted["data"]["post"] and posted["data"]["channel_type"] == "D"


def test_the_server_pings_its_websockets_at_its_interval_and_not_while_frozen():
    """The server's pings (the adapter's proof of life between events) come every ``ping_interval``; a frozen
    connection carries none."""
    interval = 0.2

    async def main(mm):
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(mm.base_url.replace("http", "ws") + "/api/v4/websocket", autoping=False)
            await ws.send_json({"seq": 1, "action": "authentication_challenge", "data": {"token": DEFAULT_TOKEN}})
            pings = []
            while len(pings) < 2:       # the OK and hello come first, then pings: each within 25 intervals
                try:
                    message = await asyncio.wait_for(ws.receive(), 25 * interval)
                except asyncio.TimeoutError:
                    raise AssertionError(f"no ping within {25 * interval}s; pings so far: {pings}") from None
                if message.type == aiohttp.WSMsgType.PING:
                    pings.append(message.data)
            mm.freeze_websockets()
            # A ping already on its way may still land; after it, five intervals pass with nothing.
            late = []
            try:
                while len(late) < 3:
                    late.append((await asyncio.wait_for(ws.receive(), 5 * interval)).type)
            except asyncio.TimeoutError:
                pass
            await ws.close()
            return pings, late

    with FakeMattermost(ping_interval=interval) as mm:
        pings, late = run(main(mm))
    assert pings == [b"fake-mattermost-ping"] * 2
    assert len(late) <= 1, f"pings went on while frozen: {late}"
