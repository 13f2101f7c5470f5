"""Limits per client address in the web chat, across all the visitors an address makes (any page load issues one):
new visitors, messages, and the media cache's byte quota. Real daemon, real sockets; each test speaks from its own
loopback address (127.0.0.0/8 is all ours), so the limits of one test do not spend another's."""
from __future__ import annotations

import asyncio
import json
import os
import time
import uuid

import aiohttp
import pytest

from tests.actor_system import free_port
from tests.webchat.helpers import served_port, webchat_gateway

pytestmark = pytest.mark.timeout(90)
QUOTA = 300_000
NEW_VISITORS = 20          # the web chat's default new_visitors_per_hour
ADDRESS_BURST = 20         # a third of the default messages_per_minute_per_address (60)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    gw = webchat_gateway(tmp_path_factory.mktemp("address-limits"), port=free_port(),
                         extra=f"[media]\ncache_max_bytes = {QUOTA}\n")
    try:
        gw.start()
        gw.wait_ready()
        yield gw, f"http://127.0.0.1:{served_port(gw)}"
    finally:
        gw.cli("stop")
        gw.kill_everything()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def session_from(address: str) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=(address, 0), limit=0),
                                 cookie_jar=aiohttp.DummyCookieJar())


async def page_loads(base: str, address: str, count: int) -> list[tuple[int, str | None]]:
    """``count`` fresh page loads (no cookie sent): each one's status and the visitor cookie it was issued."""
    found = []
    async with session_from(address) as session:
        for _ in range(count):
            async with session.get(f"{base}/") as page:
                await page.read()
                cookie = page.cookies.get("gw_visitor")
                found.append((page.status, cookie.value if cookie else None))
    return found


def test_one_address_is_issued_a_bounded_number_of_new_visitors(served):
    _, base = served
    loads = run(page_loads(base, "127.0.7.1", NEW_VISITORS + 5))
    issued = [cookie for status, cookie in loads if cookie]
    assert len(issued) == NEW_VISITORS and [s for s, _ in loads[:NEW_VISITORS]] == [200] * NEW_VISITORS, loads
    assert [s for s, _ in loads[NEW_VISITORS:]] == [429] * 5, loads
    [(status, cookie)] = run(page_loads(base, "127.0.7.2", 1))     # another address has its own
    assert status == 200 and cookie


async def messages_from_many_visitors(base: str, address: str, visitors: int, each: int) -> tuple[int, list]:
    """Each of ``visitors`` fresh visitors of one address sends ``each`` messages: (acks, errors) over all."""
    cookies = [c for _, c in await page_loads(base, address, visitors)]
    assert all(cookies), cookies
    acks, errors = 0, []
    async with session_from(address) as session:
        sockets = [await session.ws_connect(f"{base}/ws", headers={"Cookie": f"gw_visitor={c}"}) for c in cookies]
        for ws in sockets:
            assert json.loads((await ws.receive()).data)["type"] == "hello"
        for ws in sockets:
            for n in range(each):
                await ws.send_str(json.dumps({"type": "message", "id": f"m{n}-{uuid.uuid4().hex[:6]}",
                                              "text": f"message {n}"}))
                while True:    # the answer to this frame (operations pushed meanwhile are skipped)
                    frame = json.loads((await ws.receive(timeout=20)).data)
                    if frame["type"] == "ack":
                        acks += 1
                        break
                    if frame["type"] == "error":
                        errors.append(frame["error"])
                        break
        for ws in sockets:
            await ws.close()
    return acks, errors


def test_messages_are_limited_across_all_the_visitors_of_an_address(served):
    _, base = served
    # 12 visitors, 4 messages each: every visitor within its own limit (a burst of 10), the address over its burst
    # of 20, refilled at a message a second while they are sent.
    started = time.monotonic()
    acks, errors = run(messages_from_many_visitors(base, "127.0.8.1", 12, 4))
    refilled = int(time.monotonic() - started) + 1
    assert ADDRESS_BURST <= acks <= ADDRESS_BURST + refilled and acks + len(errors) == 48, (acks, errors, refilled)
    assert all("your address sent more than 60 messages a minute" in e for e in errors), errors


async def uploads(base: str, address: str, files: list[bytes]) -> list[int]:
    [(_, cookie)] = await page_loads(base, address, 1)
    statuses = []
    async with session_from(address) as session:
        for data in files:
            form = aiohttp.FormData()
            form.add_field("file", data, filename="blob.bin", content_type="application/octet-stream")
            async with session.post(f"{base}/upload", data=form, headers={"Cookie": f"gw_visitor={cookie}"}) as r:
                await r.read()
                statuses.append(r.status)
    return statuses


def test_the_media_cache_keeps_to_its_byte_quota_by_evicting_the_oldest(served):
    gw, base = served
    files = [os.urandom(100_000) for _ in range(6)]
    assert run(uploads(base, "127.0.9.1", files)) == [200] * 6
    media = gw.state / "media"
    kept = {p.name: p.stat().st_size for p in media.glob("??/*")}
    assert sum(kept.values()) <= QUOTA, kept
    from storage.media import content_key
    assert content_key(files[-1]) in kept and content_key(files[0]) not in kept, (kept, [content_key(f) for f in files])


async def cookie_header(base: str, address: str, headers: dict) -> str:
    async with session_from(address) as session:
        async with session.get(f"{base}/", headers=headers) as page:
            await page.read()
            return next(v for v in page.headers.getall("Set-Cookie") if v.startswith("gw_visitor="))


def test_the_visitor_cookie_is_secure_when_the_request_came_over_tls(served):
    _, base = served
    # The TLS-terminating proxy the docs recommend runs on this host: a loopback peer saying https.
    assert "Secure" in run(cookie_header(base, "127.0.10.1", {"X-Forwarded-Proto": "https"}))
    plain = run(cookie_header(base, "127.0.10.1", {}))
    assert "Secure" not in plain and "HttpOnly" in plain and "SameSite=Strict" in plain
