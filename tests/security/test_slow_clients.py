"""HTTP clients that never finish a request: each of the gateway's HTTP servers closes them within its request
timeout, and the serving process's memory comes back to where it was. Real daemon, real sockets."""
from __future__ import annotations

import json
import socket
import time

import psutil
import pytest

from tests.actor_system import wait_for
from tests.gateway import Gateway, nodes

CONNECTIONS = 500
TIMEOUT_S = 2.0
TABS_PER_CLIENT = 5
MAX_TABS = 8   # every visitor together: two client addresses reach it, a third is refused
pytestmark = pytest.mark.timeout(300)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    ports = {"web": free_port(), "api": free_port()}
    # No connection cap here (it would reset most of the 500 at once): this module is about the timeouts; the cap
    # has its own test (tests/security/test_connection_cap.py).
    gw = Gateway(tmp_path_factory.mktemp("slow-clients"),
                 gateway_toml=f"http_request_timeout_s = {TIMEOUT_S}\nhttp_connections_per_client = 0",
                 extra_toml=f"""
[adapters.web]
type = "webchat"
port = {ports["web"]}
max_tabs_per_client = {TABS_PER_CLIENT}
max_tabs = {MAX_TABS}
[adapters.api]
type = "http"
port = {ports["api"]}
api_tokens = ["a-token-for-the-tests-0123456789"]
""")
    gw.start()
    gw.wait_ready()
    runtime = json.loads((gw.state / "run" / "runtime.json").read_text())
    ports["metrics"] = runtime["metrics"]["port"]
    yield gw, ports
    gw.cli("stop", "--timeout", "20")
    gw.kill_everything()


def slow_header_clients(port: int, count: int) -> list[socket.socket]:
    clients = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")   # and never the rest of the headers
        clients.append(s)
    return clients


def closed_by_server(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(65536) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def rss_of_listener(gw, port: int) -> tuple[int, int]:
    """(pid, RSS in bytes) of the gateway process that listens on ``port``."""
    for node in nodes(gw.tree()):
        try:
            process = psutil.Process(node["pid"])
            if any(c.laddr.port == port and c.status == psutil.CONN_LISTEN for c in process.net_connections("tcp")):
                return process.pid, process.memory_info().rss
        except (psutil.NoSuchProcess, TypeError, ValueError):
            continue
    raise AssertionError(f"no gateway process listens on {port}")


@pytest.mark.parametrize("server", ["web", "api", "metrics"])
def test_slow_header_connections_are_closed_within_the_request_timeout(gateway, server):
    gw, ports = gateway
    port = ports[server]
    pid, before = rss_of_listener(gw, port)
    started = time.monotonic()
    clients = slow_header_clients(port, CONNECTIONS)
    try:
        wait_for(lambda: all(closed_by_server(s) for s in clients), TIMEOUT_S + 20, 0.2,
                 f"the {server} server closing {CONNECTIONS} unfinished requests")
        took = time.monotonic() - started
    finally:
        for s in clients:
            s.close()
    # The timer starts at each connection's start; the last ones opened up to a few seconds after the first.
    assert took < TIMEOUT_S + 15, f"closed after {took:.1f}s with a {TIMEOUT_S}s timeout"
    after = wait_for(lambda: (rss := psutil.Process(pid).memory_info().rss) <= before * 1.10 and rss, 30, 0.5,
                     f"the {server} server's RSS back within 10% of {before / 2**20:.1f} MiB")
    assert after <= before * 1.10
    # And it still serves a complete request.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.1 ")


def test_one_client_address_holds_at_most_its_share_of_web_chat_tabs(gateway):
    """Anyone may fetch the page for a fresh visitor: the share is per address, so making visitors gets no more."""
    import asyncio

    import aiohttp

    from tests.webchat.client import issued_cookie
    gw, ports = gateway
    base = f"http://127.0.0.1:{ports['web']}"
    url = f"{base}/ws"

    async def scenario():
        async with aiohttp.ClientSession() as http:
            tabs = [await http.ws_connect(url, headers=await issued_cookie(http, base))
                    for _ in range(TABS_PER_CLIENT)]
            for tab in tabs:
                assert (await tab.receive_json(timeout=10))["type"] == "hello"
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(url, headers=await issued_cookie(http, base))
            await tabs.pop().close()
            async def reopened():   # the server counts the closed tab out once its handler has ended
                for _ in range(200):
                    try:
                        return await http.ws_connect(url, headers=await issued_cookie(http, base))
                    except aiohttp.WSServerHandshakeError:
                        await asyncio.sleep(0.05)
                raise AssertionError("a slot freed by a closed tab was never given to a new one")
            again = await reopened()
            for tab in tabs + [again]:
                await tab.close()
            return refused.value.status
    assert asyncio.run(scenario()) == 503
    assert "already holds 5 open tabs" in wait_for(lambda: (log := gw.log()) and "max_tabs_per_client" in log
                                                   and log, 10, 0.05, "the refusal in the log")


def test_every_visitor_together_holds_at_most_max_tabs(gateway):
    """Many client addresses (a flood of visitors) meet the bound on every open tab together: 503, and a slot
    freed by a closed tab is given again. Clients on 127.0.0.2 and .3 reach the page on 127.0.0.1 (loopback)."""
    import asyncio

    import aiohttp

    from tests.webchat.client import issued_cookie
    _gw, ports = gateway
    base = f"http://127.0.0.1:{ports['web']}"

    async def scenario():
        sessions = [aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=(f"127.0.0.{n}", 0)))
                    for n in (1, 2, 3)]
        tabs = []
        try:
            async def open_tab(http):
                return await http.ws_connect(f"{base}/ws", headers=await issued_cookie(http, base))

            async def opened(http):   # a tab of an earlier test is counted out once its handler has ended
                for _ in range(200):
                    try:
                        return await open_tab(http)
                    except aiohttp.WSServerHandshakeError:
                        await asyncio.sleep(0.05)
                raise AssertionError("no slot came free for a tab under both bounds")
            for http, count in ((sessions[0], TABS_PER_CLIENT), (sessions[1], MAX_TABS - TABS_PER_CLIENT)):
                for _ in range(count):
                    tabs.append(await opened(http))
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await open_tab(sessions[2])
            await tabs.pop().close()
            tabs.append(await opened(sessions[2]))
            return refused.value.status, refused.value.message
        finally:
            for tab in tabs:
                await tab.close()
            for http in sessions:
                await http.close()
    status, _message = asyncio.run(scenario())
    assert status == 503
