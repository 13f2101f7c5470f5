"""One client address holds at most [gateway] http_connections_per_client connections on each HTTP server: one
more is reset as it is accepted (before a byte of it is read), a freed slot is given again, another address is
not affected, and the refusal is said once. The server is the gateway's own (supervision/http_serving.serve) on a
real socket; the daemon's servers all start through it (tests/security/test_slow_clients.py runs them)."""
from __future__ import annotations

import asyncio
import socket

import pytest
from aiohttp import web

from supervision.http_serving import HttpLimits, serve

pytestmark = pytest.mark.timeout(60)
CAP = 3


def reset_or_closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True if the server ends the connection (reset or EOF) within ``timeout`` without answering."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def answered(port: int, source: str = "127.0.0.1") -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0)) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        return s.recv(64).startswith(b"HTTP/1.1 200")


def test_a_client_over_its_share_of_connections_is_reset_and_a_freed_slot_is_given_again():
    said = []

    async def hello(request):
        return web.Response(text="hi")

    async def main():
        app = web.Application()
        app.router.add_get("/", hello)
        runner, port = await serve(app, "127.0.0.1", 0, limits=HttpLimits(request_timeout_s=30.0,
                                                                           connections_per_client=CAP),
                                   on_refused=said.append)
        loop = asyncio.get_running_loop()
        try:
            held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(CAP)]
            assert await loop.run_in_executor(None, answered, port, "127.0.0.2"), "another address is served"
            extra = socket.create_connection(("127.0.0.1", port), timeout=5)
            assert await loop.run_in_executor(None, reset_or_closed, extra), "one more than its share is reset"
            extra.close()
            assert not await loop.run_in_executor(None, reset_or_closed, held[0], 0.3), "the others stay open"
            held.pop().close()

            def freed_slot_serves() -> bool:
                for _ in range(100):    # the server sees the close a moment later
                    try:
                        if answered(port):
                            return True
                    except (ConnectionResetError, BrokenPipeError):
                        pass
                return False
            assert await loop.run_in_executor(None, freed_slot_serves), "the freed slot is given again"
            for s in held:
                s.close()
        finally:
            await runner.cleanup()
        return said
    said = asyncio.run(main())
    assert len(said) == 1 and "http_connections_per_client" in said[0], said


def test_the_cap_is_checked_in_the_configuration():
    from common.config import ConfigError, validate
    with pytest.raises(ConfigError, match="between 0 and 100000"):
        validate({"gateway": {"http_connections_per_client": -1}}, "gateway.toml")
