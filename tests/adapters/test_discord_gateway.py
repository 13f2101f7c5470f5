"""The Discord gateway link (actors/adapters/gateway_link.py, Discord's protocol) on its own, against the fake Discord
(tests/fakes/discord): identify, heartbeats and their jitter, a drop resumed with the missed messages, op 7, op 9,
a zombie connection, a position restored at start, outages reported, and the close codes not retried."""
from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from actors.adapters.discord.platform import DISCORD_INTENTS
from actors.adapters.gateway_link import GatewayLink, gateway_address, heartbeat_interval_s
from actors.adapters.errors import PermanentError
from tests.fakes.discord import DEFAULT_TOKEN, FakeDiscord
from tests.fakes.discord.protocol import INTENTS

pytestmark = pytest.mark.timeout(30)
INTENTS_ALL = DISCORD_INTENTS


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
    from actors.adapters import gateway_link as gateway
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
