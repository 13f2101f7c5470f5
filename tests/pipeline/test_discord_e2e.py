"""The Discord adapter in the real daemon against the fake Discord (tests/fakes/discord): a send whose answer
never came back because the daemon was killed -9 is repeated with its nonce and makes no second message; a gateway
connection dropped mid-answer is resumed (no second Identify) and the answer completes; an invalidated session
is followed by a fresh Identify and the bot answers again.

One fake and one daemon serve the gateway tests (module scope); the kill -9 test has its own of each.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
from pathlib import Path

import pytest

from actors.adapters.discord.platform import DISCORD_INTENTS
from actors.adapters.pacing import DEFAULT_RESENT_MARKER as RESENT_MARKER
from tests.actor_system import wait_for
from tests.gateway import Gateway
from tests.fakes.discord import DEFAULT_TOKEN, INTENTS, FakeDiscord
from tests.pipeline.harness import CURSOR

pytestmark = pytest.mark.timeout(120)
TIME_SCALE = 0.2       # the fake's windows 5x shorter: identify once a second, the nonce remembered for 60 s
ANSWER_MARK = "api_key_env"   # the offline agent's answer ends with its configuration help


def discord_gateway(tmp_path: Path, dc: FakeDiscord, adapter: str = "") -> Gateway:
    return Gateway(tmp_path, extra_toml=f"""
[adapters.discord]
type = "discord"
access = "open"
token = "{DEFAULT_TOKEN}"
api_base_url = "{dc.api_url}"
{adapter}
[agent]
chunk_delay_s = 0.0
""")


def stop(gw: Gateway) -> None:
    gw.cli("stop")
    gw.kill_everything()


def shown(dc: FakeDiscord, user_id: int) -> list[str]:
    channel = dc.dm_channel_id(user_id)
    return [] if channel is None else dc.final_texts(channel)


def final_answer(dc: FakeDiscord, user_id: int, gw: Gateway, timeout: float = 60) -> list[str]:
    """Every message the bot shows the user, once the newest is a final answer (no cursor, the whole text)."""
    def done():
        texts = shown(dc, user_id)
        return texts and CURSOR not in texts[-1] and ANSWER_MARK in texts[-1] and texts
    try:
        return wait_for(done, timeout, 0.05, f"the final answer to user {user_id}")
    except AssertionError as exc:
        tail = [line for line in gw.log().splitlines() if " INFO root" not in line][-30:]
        raise AssertionError(f"{exc}\nshown: {shown(dc, user_id)}\ngateway: {dc.gateway_log()[-6:]}\n"
                             + "\n".join(tail)) from None


# The chats' own budgets lifted far above Discord's limits: what keeps the requests inside them is the REST client's
# rate-limit buckets alone (actors/adapters/discord/ratelimits.py).
UNPACED = ("pacing = { per_chat_ops_per_s = 100.0, per_chat_burst = 50, edit_interval_s = 0.05, "
           "min_edit_delta_chars = 1 }")


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    with FakeDiscord(time_scale=TIME_SCALE, heartbeat_interval=2000) as dc:
        gw = discord_gateway(tmp_path_factory.mktemp("discord-e2e"), dc, adapter=UNPACED)
        try:
            gw.start()
            gw.wait_ready()
            wait_for(lambda: dc.gateway_log("identify"), 30, 0.05, "the adapter's Identify")
            yield dc, gw
        finally:
            stop(gw)


def streaming(dc: FakeDiscord, user_id: int) -> bool:
    texts = shown(dc, user_id)
    return bool(texts) and CURSOR in texts[0]


def test_a_connection_dropped_mid_answer_is_resumed_and_the_answer_completes(rig):
    dc, gw = rig
    identifies = len(dc.gateway_log("identify"))
    question = dc.inject_message("echo a long answer #slow 0.15", user_id=1400000000000000001)
    wait_for(lambda: streaming(dc, 1400000000000000001), 30, 0.02, "the answer streaming")
    assert dc.drop_gateway() == 1
    assert streaming(dc, 1400000000000000001), "the answer was still under way at the drop"
    dc.inject_message("echo sent while the connection was down", user_id=1400000000000000002)
    [answer] = final_answer(dc, 1400000000000000001, gw)
    assert RESENT_MARKER not in answer
    [reply] = dc.messages(int(question["channel_id"]))
    assert reply["reference"]["message_id"] == int(question["id"]), "the answer replies to the question"
    final_answer(dc, 1400000000000000002, gw)   # the missed message came with the Resume's replay
    assert len(dc.gateway_log("identify")) == identifies, "resumed, not identified again"
    assert dc.gateway_log("resume") and dc.gateway_log("resume")[-1]["replayed"] >= 1


def test_an_invalid_session_is_followed_by_a_fresh_identify_and_nothing_is_lost(rig):
    dc, gw = rig
    identifies = len(dc.gateway_log("identify"))
    dc.inject_message("echo answer me across an invalid session #slow 0.15", user_id=1400000000000000003)
    wait_for(lambda: streaming(dc, 1400000000000000003), 30, 0.02, "the answer streaming")
    dc.send_invalid_session(resumable=False)
    wait_for(lambda: len(dc.gateway_log("identify")) > identifies, 30, 0.05, "a fresh Identify")
    [answer] = final_answer(dc, 1400000000000000003, gw)
    assert RESENT_MARKER not in answer
    dc.inject_message("echo and after it", user_id=1400000000000000004)
    final_answer(dc, 1400000000000000004, gw)


def test_twenty_chats_streaming_at_once_stay_within_discords_rate_limits(rig):
    """Every reply streams (a send, then edits) in 20 DMs at once, with the chats' budgets lifted (UNPACED): the
    REST client's buckets, learnt from the answers' headers, and its count of the global limit keep every request
    inside the fake's windows, so it never answers 429."""
    dc, gw = rig
    before = dict(dc.stats())
    users = [1400000000000000100 + i for i in range(20)]
    for user in users:
        dc.inject_message(f"echo streaming to {user} #slow 0.05", user_id=user)
    for user in users:
        [answer] = final_answer(dc, user, gw)
        assert f"streaming to {user}" in answer
    after = dc.stats()
    edits = sum(len(dc.ops(dc.dm_channel_id(user), "edit_message")) for user in users)
    assert edits >= len(users), "the replies were edited as they streamed"
    assert after["rate_limited"] == before["rate_limited"] and after["rate_limited_global"] == \
        before["rate_limited_global"], "no request met a 429"
    assert after["retry_after_violations"] == before["retry_after_violations"]


class HoldingDiscord(FakeDiscord):
    """The fake Discord, except that the first create_message makes its message and then holds the HTTP answer
    until ``released``: the message exists and the gateway cannot learn its id (the window a kill -9 must hit)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.holding, self.released = threading.Event(), threading.Event()

    async def _serve(self, request, name, needs_auth):
        answer = await super()._serve(request, name, needs_auth)
        if name == "create_message" and not self.holding.is_set():
            self.holding.set()
            while not self.released.is_set():
                await asyncio.sleep(0.02)
        return answer


def test_kill_9_between_a_send_and_its_id_leaves_one_message_found_by_its_nonce(tmp_path):
    """The daemon dies while Discord holds the answer to the first send. The resumed turn sends that part again
    with the same nonce: Discord answers with the message the first send made, the reply goes on editing it, and
    the chat holds one message, without the re-sent mark."""
    user = 1400000000000000005
    with HoldingDiscord(time_scale=TIME_SCALE, heartbeat_interval=2000) as dc:
        gw = discord_gateway(tmp_path, dc)
        try:
            gw.start()
            gw.wait_ready()
            wait_for(lambda: dc.gateway_log("identify"), 30, 0.05, "the adapter's Identify")
            dc.inject_message("echo a send nobody hears back about #slow 0.1", user_id=user)
            wait_for(dc.holding.is_set, 30, 0.01, "the first send made and its answer held")
            os.kill(gw.launcher_pid, signal.SIGKILL)
            gw.assert_no_process_left()
            dc.released.set()
            gw.start()
            [answer] = final_answer(dc, user, gw)
            assert RESENT_MARKER not in answer
            channel = dc.dm_channel_id(user)
            assert len(dc.messages(channel)) == 1, [m["content"][-40:] for m in dc.messages(channel)]
            sends = dc.ops(channel, "create_message")
            assert len(sends) >= 2 and sends[0]["nonce"] and {s["nonce"] for s in sends} == {sends[0]["nonce"]}
            assert [s["deduplicated"] for s in sends[1:] if s["status"] == 200] == [True] * (len(sends) - 1)
            assert len(dc.gateway_log("identify")) == 1, "the restarted adapter resumed its session"
        finally:
            dc.released.set()
            stop(gw)


def test_a_close_code_that_refuses_the_configuration_leaves_the_adapter_up_and_shown_refused(tmp_path):
    """GUILD_MEMBERS asked for and not enabled in the Developer Portal: the gateway closes with 4014. No retry soon
    can cure that: the adapter stays up (no restart loop), shows the refusal in status, and does not reconnect."""
    with FakeDiscord(time_scale=TIME_SCALE) as dc:
        gw = discord_gateway(tmp_path, dc, adapter=f"intents = {DISCORD_INTENTS | INTENTS['GUILD_MEMBERS']}")
        try:
            gw.start()
            gw.wait_ready()

            def refusal():
                result = gw.cli("status", "--json")
                rows = json.loads(result.stdout).get("adapters", []) if result.stdout.strip() else []
                return next((r for r in rows if r["name"] == "discord" and "refused" in r.get("error", "")), None)
            row = wait_for(refusal, 30, 0.1, "the adapter shown refused by the 4014 close")
            assert "4014" in row["error"] and "intents" in row["error"], row
            node = gw.node("discord")
            assert node["state"] == "running" and node["restarts"] == 0, node
            assert len(dc.gateway_log("connect")) == 1, "a refused configuration is not retried at once"
            for where, text in (("gateway.log", gw.log()), ("status", gw.cli("status").stdout)):
                assert DEFAULT_TOKEN not in text, f"the token appears in {where}"
        finally:
            stop(gw)
