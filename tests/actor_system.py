"""A real multiproc actor system for a test: unique admin port, loopback only, torn down with every process."""
from __future__ import annotations

import contextlib
import os
import time

from thespian.actors import ActorSystem

from runtime import loopback
from common import processes
from common.logging_setup import thespian_log_defs


PORT_BLOCK = 1500            # ports per test process, below the kernel's ephemeral range
PORTS_FROM = 20000
_next_port = None


def free_port() -> int:
    """A port for a test to hand to a daemon that binds it later. Not one the kernel picks (port 0): between this
    call and the daemon's bind, another xdist worker's daemon binding port 0, or any outgoing connection, may be
    given that very port. These come from a block of the worker's own below the ephemeral range (which port 0 and
    outgoing connections draw from), start where this process's id says inside it, are checked bindable, and are
    never handed out twice by one process."""
    import socket
    global _next_port
    low = _ephemeral_low()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    block = PORTS_FROM + (int(worker) if worker.isdigit() else 0) % 8 * PORT_BLOCK
    if block + PORT_BLOCK > low:          # an unusual port range: the kernel's pick, as before
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    if _next_port is None:
        _next_port = os.getpid() % PORT_BLOCK
    for _ in range(PORT_BLOCK):
        port, _next_port = block + _next_port, (_next_port + 1) % PORT_BLOCK
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {block}-{block + PORT_BLOCK - 1}")


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


@contextlib.contextmanager
def running_actor_system():
    loopback.install("127.0.0.1")
    processes.die_with_parent(subreaper=False)  # the test runner must not collect the daemons' zombies
    port = free_port()
    me = os.getpid()
    before = set(processes.descendants(me))
    asys = ActorSystem("multiprocTCPBase", {"Admin Port": port}, logDefs=thespian_log_defs("WARNING"),
                       transientUnique=True)
    try:
        yield asys
    finally:
        everything = set(processes.descendants(me)) - before
        asys.shutdown()
        processes.kill_all(everything)
        processes.wait_gone(everything, 5)
        processes.reap_zombies()


def wait_for(predicate, timeout: float, interval: float = 0.02, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
