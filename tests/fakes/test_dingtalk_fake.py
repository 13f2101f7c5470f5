"""The fake DingTalk open platform on its own, against a small Stream client written here (no gateway): a ticket
opens one connection; a robot message comes as a CALLBACK frame and, unanswered, again with a new messageId and the
same msgId; an answer settles it; SYSTEM pings carry data to echo; the robot sends need a live token and answer a
scripted flood the way the documentation describes."""
from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from tests.fakes.dingtalk import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, FakeDingTalk

pytestmark = pytest.mark.timeout(60)


async def open_ticket(session: aiohttp.ClientSession, fake: FakeDingTalk) -> tuple[str, str]:
    async with session.post(f"{fake.base_url}/v1.0/gateway/connections/open", json={
            "clientId": DEFAULT_CLIENT_ID, "clientSecret": DEFAULT_CLIENT_SECRET,
            "subscriptions": [{"type": "CALLBACK", "topic": "/v1.0/im/bot/messages/get"}]}) as resp:
        body = await resp.json()
    return body["endpoint"], body["ticket"]


async def next_callback(ws) -> dict:
    while True:
        frame = json.loads((await ws.receive(timeout=10)).data)
        if frame["type"] == "CALLBACK":
            return frame


def test_an_unanswered_callback_comes_again_and_an_answered_one_does_not():
    with FakeDingTalk(ack_timeout=0.5, ping_interval=0.2) as fake:
        async def scenario():
            async with aiohttp.ClientSession() as session:
                endpoint, ticket = await open_ticket(session, fake)
                async with session.ws_connect(f"{endpoint}?ticket={ticket}") as ws:
                    handle = fake.inject_text("alice", "hello")
                    first = await next_callback(ws)           # not answered: it must come again
                    again = await next_callback(ws)
                    await ws.send_str(json.dumps({"code": 200, "headers": {"messageId": again["headers"]["messageId"],
                                                                          "contentType": "application/json"},
                                                  "message": "OK", "data": "{}"}))
                    ping = None
                    while ping is None:
                        frame = json.loads((await ws.receive(timeout=10)).data)
                        ping = frame if frame["headers"]["topic"] == "ping" else None
                    with pytest.raises(aiohttp.WSServerHandshakeError):   # a ticket opens one connection
                        await session.ws_connect(f"{endpoint}?ticket={ticket}")
                    return handle, first, again, ping
        handle, first, again, ping = asyncio.run(scenario())
        assert first["headers"]["topic"] == "/v1.0/im/bot/messages/get"
        assert first["headers"]["messageId"] != again["headers"]["messageId"]
        assert json.loads(first["data"])["msgId"] == json.loads(again["data"])["msgId"]
        assert fake.callback(handle)["status"] == "acked" and len(fake.callback(handle)["attempts"]) == 2
        assert ping["type"] == "SYSTEM" and "opaque" in json.loads(ping["data"])
        assert fake.stats()["connections_refused"] == 1


def test_robot_sends_need_a_live_token_and_a_flood_is_a_qps_limit_or_130101():
    with FakeDingTalk() as fake:
        async def scenario():
            async with aiohttp.ClientSession() as session:
                async def send(token: str) -> tuple:
                    async with session.post(f"{fake.base_url}/v1.0/robot/oToMessages/batchSend", json={
                            "robotCode": DEFAULT_CLIENT_ID, "userIds": ["staff1"], "msgKey": "sampleText",
                            "msgParam": json.dumps({"content": "hi"})},
                            headers={"x-acs-dingtalk-access-token": token}) as resp:
                        return resp.status, await resp.json()
                refused = await send("no-token")
                async with session.post(f"{fake.base_url}/v1.0/oauth2/accessToken", json={
                        "appKey": DEFAULT_CLIENT_ID, "appSecret": DEFAULT_CLIENT_SECRET}) as resp:
                    token = (await resp.json())["accessToken"]
                fake.set_faults(next=["flood"], flood_retry_after=5.0)
                flooded = await send(token)
                banned = await send(token)                      # inside the ban: refused again, counted
                data = fake.message_data("bob", "hello")
                async with session.post(data["sessionWebhook"], json={"msgtype": "text",
                                                                       "text": {"content": "by session"}}) as resp:
                    by_session = await resp.json()
                return refused, flooded, banned, by_session
        refused, flooded, banned, by_session = asyncio.run(scenario())
        assert refused == (401, {"code": "InvalidAuthentication", "message": "access token is invalid or expired"})
        assert flooded[0] == 403 and "QpsLimit" in flooded[1]["code"] and banned[0] == 403
        assert fake.stats()["retry_after_violations"] == 1
        assert by_session == {"errcode": 0, "errmsg": "ok"}
        assert [m["text"] for m in fake.messages(fake.staff("bob"))] == ["by session"]


def test_card_calls_past_the_apps_qps_within_a_second_are_refused_and_counted():
    with FakeDingTalk(card_qps=3) as fake:
        async def scenario():
            async with aiohttp.ClientSession() as session:
                async with session.post(f"{fake.base_url}/v1.0/oauth2/accessToken", json={
                        "appKey": DEFAULT_CLIENT_ID, "appSecret": DEFAULT_CLIENT_SECRET}) as resp:
                    token = (await resp.json())["accessToken"]
                answers = []
                for n in range(4):   # well within one second: the fourth is one too many
                    async with session.post(f"{fake.base_url}/v1.0/card/instances/createAndDeliver", json={
                            "cardTemplateId": fake.card_template, "outTrackId": f"track-{n}", "userIdType": 1,
                            "cardData": {"cardParamMap": {"content": "hi"}}, "openSpaceId": "dtv1.card//IM_ROBOT.s1",
                            "imRobotOpenDeliverModel": {"spaceType": "IM_ROBOT", "robotCode": DEFAULT_CLIENT_ID}},
                            headers={"x-acs-dingtalk-access-token": token}) as resp:
                        answers.append((resp.status, await resp.json()))
                return answers
        answers = asyncio.run(scenario())
        assert [status for status, _ in answers] == [200, 200, 200, 403], answers
        assert "QpsLimit" in answers[-1][1]["code"]
        assert fake.stats()["card_qps_violations"] == 1 and len(fake.cards("s1")) == 3
