"""Hosts on one machine for the convention tests: each a network namespace, all on one bridge.

A "switch" namespace holds a bridge; every host namespace has one veth into it and one address on 10.77.0.0/24 (a
private range, as a real convention needs). Names carry the test process's pid, so xdist workers (and a leftover
of a killed run) never collide; ``down()`` kills every process left in the namespaces and deletes them.
Needs root and ``ip`` (iproute2); ``skip_reason()`` says what is missing.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess

SUBNET = "10.77.0"


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
