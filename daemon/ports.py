"""Choosing the admin port when the config says 0 ("any free port").

The launcher cannot hand Thespian a bound socket: it checks a port is free, closes it, and Thespian's admin process
binds it a moment later (after the actor modules are imported: up to seconds on a loaded host). A port the kernel
picked (bind to port 0) comes from its ephemeral range, the same range every outgoing connection's local port is
drawn from, and Thespian opens connections between actors all the time: in that window any process on the host may
be given the very port, and a connected socket holding it makes the admin's bind fail even with SO_REUSEADDR. Thespian
then reports "not a valid or useable ActorSystem Admin" after trying for eleven seconds.

So the port comes from a band below the ephemeral range, where the kernel never assigns ports on its own: only a
program that names the port explicitly can take it in that window.
"""
from __future__ import annotations

import random
import socket

AUTO_PORTS = range(10000, 20000)   # documented in the config reference: [gateway] admin_port = 0
KEPT_OUT = {17811}                 # the default admin port: a gateway started with it must find it free
TRIES = 200
EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def any_free_admin_port(host: str) -> int:
    """A free port in AUTO_PORTS (or the kernel's pick, when its ephemeral range starts below that band)."""
    low = ephemeral_low()
    band = range(AUTO_PORTS.start, min(AUTO_PORTS.stop, low)) if low else AUTO_PORTS
    if len(band) >= 1000:
        for port in random.sample(band, min(TRIES, len(band))):
            if port not in KEPT_OUT and port_free(host, port):
                return port
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_free(host: str, port: int) -> bool:
    """Whether a listening socket could bind ``port`` now, with the options Thespian's own bind uses."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range; 0 where the host does not say (not Linux)."""
    try:
        with open(EPHEMERAL_RANGE_FILE) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
