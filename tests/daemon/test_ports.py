"""The admin port chosen for ``admin_port = 0``: never one an outgoing connection can be given before the admin binds
it (daemon/ports.py), and a port taken anyway is given up for another (the launcher)."""
from __future__ import annotations

import logging
import os
import socket

import pytest

from common import processes
from common.config import defaults
from runtime import loopback
from daemon.launcher import Launcher
from daemon.ports import KEPT_OUT, any_free_admin_port, ephemeral_low, port_free

pytestmark = pytest.mark.timeout(90)


def _ephemeral_range() -> range:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low, high = (int(x) for x in f.read().split())
    return range(low, high + 1)


@pytest.mark.skipif(not ephemeral_low(), reason="the kernel's ephemeral range is read from /proc (Linux)")
def test_an_automatic_admin_port_is_never_one_the_kernel_assigns_on_its_own():
    kernel = _ephemeral_range()
    chosen = [any_free_admin_port("127.0.0.1") for _ in range(300)]
    inside = [p for p in chosen if p in kernel or p in KEPT_OUT]
    assert not inside, f"ports in the ephemeral range {kernel.start}-{kernel.stop - 1} or kept out: {inside[:10]}"
    assert len(set(chosen)) > 200, "the choice is spread over the band, so two gateways rarely try the same port"


def _held_by_an_outgoing_connection() -> tuple[int, list[socket.socket]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    return client.getsockname()[1], [client, accepted, server]


def test_a_port_an_outgoing_connection_holds_is_not_free():
    """Why the band exists: a connected socket's local port cannot be bound by a listener, SO_REUSEADDR or not."""
    port, sockets = _held_by_an_outgoing_connection()
    try:
        assert not port_free("127.0.0.1", port)
    finally:
        for s in sockets:
            s.close()


def test_the_launcher_gives_up_an_automatic_port_taken_before_the_admin_bound_it(tmp_path, caplog):
    config = defaults()
    config["gateway"].update(admin_port=0, state_dir=str(tmp_path))
    loopback.install("127.0.0.1")
    launcher = Launcher(config)
    port, sockets = _held_by_an_outgoing_connection()
    launcher.port = port      # an admin that cannot start there (the port is not held: run() would have held it)
    before = set(processes.descendants(os.getpid()))
    asys = None
    try:
        with caplog.at_level(logging.WARNING, logger="gateway.launcher"):
            asys = launcher._start_actor_system()
        assert launcher.port != port and port_free("127.0.0.1", launcher.port) is False, \
            f"the actor system should run on another port than {port}: it runs on {launcher.port}"
        assert f"did not start on admin port 127.0.0.1:{port}" in caplog.text, caplog.text
    finally:
        if asys is not None:
            asys.shutdown()
        processes.kill_all(set(processes.descendants(os.getpid())) - before)
        for s in sockets:
            s.close()
