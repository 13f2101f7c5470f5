"""A real multiproc actor system for a test: unique admin port, loopback only, torn down with every process."""
from __future__ import annotations

import contextlib
import os
import time

from thespian.actors import ActorSystem

from daemon import loopback
from common import processes
from common.logging_setup import thespian_log_defs


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
