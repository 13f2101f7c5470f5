"""Hosts on one machine for the convention tests: each a network namespace, all on one bridge.

A "switch" namespace holds a bridge; every host namespace has one veth into it and one address on 10.77.0.0/24 (a
private range, as a real convention needs). Names carry the test process's pid, so xdist workers (and a leftover
of a killed run) never collide; ``down()`` kills every process left in the namespaces and deletes them.
``cut_host`` / ``restore_host`` pull a host's cable at the switch and plug it back; ``connections_to``,
``retransmitting`` and ``ConnectionWatch`` read a host's TCP connections from inside its namespace (``ss``).
Needs root and ``ip`` (iproute2); ``skip_reason()`` says what is missing.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from typing import Iterable, Optional

SUBNET = "10.77.0"
OPEN_STATES = ("established", "syn-sent")   # a connection in use or being tried; closing ones are not
RETRANSMITTING = re.compile(r"\bretrans:(\d+)/(\d+)")   # ss -i: retransmissions pending now / in all


def skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root (the convention tests run as root in CI)"
    if shutil.which("ip") is None:
        return "the convention tests need `ip` (apt-get install iproute2)"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"`ip netns` does not work here: {probe.stderr.strip()}"
    return None


def _ip(*args: str, ns: str | None = None) -> None:
    command = (["ip", "netns", "exec", ns] if ns else []) + ["ip", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=20)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {result.stderr.strip()}")


class Lab:
    def __init__(self, tag: str = ""):
        self.prefix = f"gw{os.getpid()}{tag}"
        self.switch = f"{self.prefix}-sw"
        self.hosts: dict[str, str] = {}     # host name -> its address
        self.switch_ports: dict[str, str] = {}   # host name -> its veth's end on the bridge (in the switch namespace)
        self.namespaces: list[str] = []

    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def exec_prefix(self, host: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns(host)]

    def up(self) -> "Lab":
        self._add_ns(self.switch)
        _ip("link", "add", "br0", "type", "bridge", ns=self.switch)
        _ip("link", "set", "br0", "up", ns=self.switch)
        return self

    @classmethod
    def of_hosts(cls, tag: str, *hosts: str) -> "Lab":
        """A lab that is up, with these hosts added (the first is the leader's, by convention)."""
        lab = cls(tag).up()
        for host in hosts:
            lab.add_host(host)
        return lab

    def add_host(self, host: str) -> str:
        index = len(self.hosts) + 1
        address = f"{SUBNET}.{index}"
        ns = self.ns(host)
        self._add_ns(ns)
        inner, outer = f"h{os.getpid() % 100000}x{index}", f"s{os.getpid() % 100000}x{index}"
        _ip("link", "add", inner, "type", "veth", "peer", "name", outer)
        _ip("link", "set", inner, "netns", ns)
        _ip("link", "set", outer, "netns", self.switch)
        _ip("link", "set", outer, "master", "br0", ns=self.switch)
        _ip("link", "set", outer, "up", ns=self.switch)
        _ip("addr", "add", f"{address}/24", "dev", inner, ns=ns)
        _ip("link", "set", inner, "up", ns=ns)
        self.hosts[host] = address
        self.switch_ports[host] = outer
        return address

    def cut_host(self, host: str) -> None:
        """The host's cable pulled at the switch: its port on the bridge goes down. The host keeps its address and
        its routes and sees no error at once: what it sends is lost, nothing reaches it, as in a partition; its
        processes run on, and its own loopback (its admin port, its CLI) still answers."""
        _ip("link", "set", self.switch_ports[host], "down", ns=self.switch)

    def restore_host(self, host: str) -> None:
        """The cable back: the port up again, still on the bridge; the connections of before resume where TCP kept
        them (retransmissions reach the peer from now on)."""
        _ip("link", "set", self.switch_ports[host], "up", ns=self.switch)

    def connections_to(self, host: str, peer: str, states: Iterable[str] = ()) -> list[str]:
        """The TCP connections of ``host`` to the address ``peer`` as ``ss`` shows them, in ``states`` (ss's names:
        ``established``, ``syn-sent``, ``fin-wait-1``…; none given: any state). Whether a host still holds or tries
        a connection through a cut: ``connections_to(host, peer, OPEN_STATES)``."""
        state_filter = [word for state in states for word in ("state", state)]
        return [line for line in self._ss(host, "-Htn", *(state_filter or ["-a"]), "dst", peer).splitlines()
                if line.strip()]

    def retransmitting(self, host: str, peer: str) -> list[str]:
        """The TCP connections of ``host`` to the address ``peer`` whose data the peer has not acknowledged within
        a retransmission timeout (``ss -i``: ``retrans:`` now above 0): what one side of a cut sent into it. The
        bridge acknowledges within microseconds, long before a first timeout (200 ms at least)."""
        found, connection = [], ""
        for line in self._ss(host, "-Htni", "dst", peer).splitlines():
            if not line[:1].isspace():
                connection = line
            elif (match := RETRANSMITTING.search(line)) and int(match.group(1)) > 0:
                found.append(f"{' '.join(connection.split())} {match.group(0)}")
        return found

    def _ss(self, host: str, *args: str) -> str:
        result = subprocess.run([*self.exec_prefix(host), "ss", *args], capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            raise RuntimeError(f"ss in {host} exited {result.returncode}: {result.stderr.strip()}")
        return result.stdout

    def _add_ns(self, ns: str) -> None:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)   # a leftover of a killed run
        _ip("netns", "add", ns)
        self.namespaces.append(ns)
        _ip("link", "set", "lo", "up", ns=ns)

    def pids(self, host: str) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", self.ns(host)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def kill_host(self, host: str) -> list[int]:
        """kill -9 of every process of the host: a machine that lost power, as its peers see it."""
        pids = self.pids(host)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def down(self) -> None:
        for ns in reversed(self.namespaces):
            if ns != self.switch:
                self.kill_host(ns[len(self.prefix) + 1:])
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.namespaces.clear()


class ConnectionWatch:
    """``lab.connections_to(host, peer, OPEN_STATES)`` sampled every ``interval`` seconds in a thread (a context
    manager), each sample kept with its wall-clock time: when a host let go of its connections to a peer, seen
    from inside the host (through a cut, where the peer sees nothing). ``closed_since()`` errs late, never early:
    it is the first sample that showed none open."""

    def __init__(self, lab: Lab, host: str, peer: str, interval: float = 0.2):
        self.lab, self.host, self.peer, self.interval = lab, host, peer, interval
        self.samples: list[tuple[float, list[str]]] = []
        self.errors: list[str] = []     # samples that failed (an ``ss`` killed with the host's processes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch-{host}", daemon=True)

    def __enter__(self) -> "ConnectionWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                found = self.lab.connections_to(self.host, self.peer, OPEN_STATES)
            except (RuntimeError, subprocess.SubprocessError) as exc:
                self.errors.append(f"{time.time():.2f}: {exc}")
            else:
                # Stamped once ``ss`` has answered: what it showed held at some moment before the stamp.
                self.samples.append((time.time(), found))
            self._stop.wait(self.interval)

    def open_at(self, when: float) -> Optional[list[str]]:
        """The open connections of the last sample taken at or before ``when``; None without one."""
        before = [found for at, found in list(self.samples) if at <= when]
        return before[-1] if before else None

    def closed_since(self) -> Optional[float]:
        """When the host had no open connection to the peer left, for good: the time of the first sample of the
        last run of samples showing none; None while the last sample shows one (or before any sample)."""
        since = None
        for at, found in list(self.samples):
            since = None if found else (since or at)
        return since
