"""Who owns the other end of a loopback connection: the kernel's answer, by netlink and by /proc, and the bind rule."""
from __future__ import annotations

import os
import socket

import pytest

from common import config as config_mod
from common import peer_credentials as pc

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def pair():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
        yield client, server
        client.close()
        server.close()


def test_the_peer_of_a_loopback_connection_is_this_process_user(pair):
    _, server = pair
    assert pc.peer_uid(server) == os.geteuid()
    assert pc.admits(server) == (True, os.geteuid())


def test_netlink_and_proc_agree(pair):
    _, server = pair
    local, peer = server.getsockname(), server.getpeername()
    by_netlink = pc._uid_by_netlink(server.family, peer[0], peer[1], local[0], local[1])
    by_proc = pc._uid_by_proc(server.family, peer[0], peer[1], local[0], local[1])
    assert by_netlink == by_proc == os.geteuid()


def test_a_peer_that_is_gone_has_no_owner(pair):
    client, server = pair
    local, peer = server.getsockname(), server.getpeername()
    client.close()
    server.close()
    # Neither end exists as an established socket of that 4-tuple any more (at most a time-wait entry).
    assert pc._uid_by_netlink(socket.AF_INET, peer[0], peer[1], local[0], local[1]) is None
    assert pc._uid_by_proc(socket.AF_INET, peer[0], peer[1], local[0], local[1]) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as another uid")
def test_another_uid_is_refused(pair):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        child = os.fork()
        if child == 0:
            os.setuid(65534)
            conn = socket.create_connection(listener.getsockname())
            conn.recv(1)                           # held until the parent has looked
            os._exit(0)
        server, _ = listener.accept()
        try:
            assert pc.admits(server) == (False, 65534)
        finally:
            server.close()
            os.waitpid(child, 0)


@pytest.mark.parametrize("host, allowed, ok", [("127.0.0.1", False, True), ("localhost", False, True),
                                               ("::1", False, True), ("0.0.0.0", False, False),
                                               ("192.168.1.5", False, False), ("192.168.1.5", True, True)])
def test_a_bind_host_off_loopback_needs_an_explicit_allowance(host, allowed, ok):
    raw = {"gateway": {"bind_host": host, "allow_non_loopback": allowed}}
    if ok:
        assert config_mod.validate(raw, "gateway.toml")["gateway"]["bind_host"] == host
    else:
        with pytest.raises(config_mod.ConfigError, match="not a loopback address.*allow_non_loopback"):
            config_mod.validate(raw, "gateway.toml")


def test_a_bind_host_that_is_no_address_is_a_config_error():
    with pytest.raises(config_mod.ConfigError, match="must be an IP address"):
        config_mod.validate({"gateway": {"bind_host": "my laptop"}}, "gateway.toml")
