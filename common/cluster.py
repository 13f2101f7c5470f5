"""Facts about a convention of gateway hosts that need no actor system: pure functions, unit tested.

Several gateway hosts form one Thespian convention (docs/design.md §6, docs/distribution.md): the leader's actor system
keeps the adapters, the watchdog, the sweeper and the shard map; each worker joins it with
``run_gateway.py join LEADER:PORT`` and offers the ``gateway.shards`` capability.

Convention traffic is pickles, each frame signed with a key derived from the shared cluster secret
(runtime/frame_mac.py) but not encrypted, and a member that unpickles runs what it is sent. So a member binds one
interface only, and that interface must be on a private network (RFC 1918, RFC 4193, a WireGuard or
carrier-grade NAT range): ``join_refusal`` says why any other address is refused, unless the operator states that the
network is private (``--network-is-private``: a link the operator controls end to end, such as a VPN on public
addresses).

Failure detection: a member re-registers with the leader every ``CONVENTION_REREGISTRATION_PERIOD`` and is declared
dead after ``CONVENTION_REGISTRATION_MISS_MAX`` periods without one (Thespian's defaults, 7 min 22 s and 3, make
about 22 minutes). A member's admin also sleeps ``CONVENTION_RESTART_PERIOD`` (3 min 22 s) between looks at its
timer whenever it does not count itself active in the convention, which it does not between two registrations: set
alone, a short period is not kept (measured: one registration, then none for minutes), so ``detection_env`` sets
the restart period to the same value. A member then re-registers every one to two periods (measured 2.0 to 4.0 s
at a 2 s period), hence at least 2 misses, 3 by default. Thespian reads all three from the environment when its
convention module is first imported, the periods as ``M:SS``; ``daemon/convention.py`` applies them before the
actor system starts, on the leader (which expires members) and on every worker (which re-registers) alike.
"""
from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass

SHARDS_CAPABILITY = "gateway.shards"      # a system that runs session shards
HOST_CAPABILITY = "gateway.host"          # the member's name (shown in `tree` and `status`; placement targets it)
ROLE_CAPABILITY = "gateway.role"          # "leader" or "worker"
PERIOD_ENV = "CONVENTION_REREGISTRATION_PERIOD"
RESTART_ENV = "CONVENTION_RESTART_PERIOD"
MISSES_ENV = "CONVENTION_REGISTRATION_MISS_MAX"
MAX_HOST_NAME = 64
WORKER_STATE_ENV = "GATEWAY_WORKER_STATE_DIR"   # set by a worker: the state dir (database) of what runs there
WORKER_NAME_ENV = "GATEWAY_WORKER_HOST"         # set by a worker: its name, for what runs there to report

# Ranges that are private by convention but that ipaddress does not call private (RFC 6598 carrier-grade NAT, used by
# Tailscale and others for their overlay addresses).
_ALSO_PRIVATE = (ipaddress.ip_network("100.64.0.0/10"),)


class BadLeader(ValueError):
    """``LEADER_HOST:PORT`` cannot be read."""


@dataclass(frozen=True)
class Leader:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_leader(text: str) -> Leader:
    """``10.0.0.1:17811`` or ``[fd00::1]:17811``: the leader's address and admin port (its convention address)."""
    text = text.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        if not sep:
            raise BadLeader(f"{text!r}: an IPv6 address goes in brackets, e.g. [fd00::1]:17811")
    else:
        host, _, port = text.rpartition(":")
        if ":" in host:
            raise BadLeader(f"{text!r}: an IPv6 address goes in brackets, e.g. [fd00::1]:17811")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadLeader(f"{text!r}: expected LEADER_HOST:PORT, e.g. 10.0.0.1:17811 (the leader's admin port)")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise BadLeader(f"{text!r}: the leader must be given as an IP address, got {host!r}") from None
    return Leader(host, int(port))


def is_private_network(ip: str) -> bool:
    """True for an address a private network uses: RFC 1918, RFC 4193 (fc00::/7), link-local, carrier-grade NAT.
    Loopback is not a network between hosts and counts as not private here."""
    try:
        address = ipaddress.ip_address(ip.split("%")[0])
    except ValueError:
        return False
    if address.is_loopback or address.is_unspecified or address.is_multicast:
        return False
    return address.is_private or any(address in net for net in _ALSO_PRIVATE if net.version == address.version)


def join_refusal(ip: str, network_is_private: bool) -> str | None:
    """Why a member may not listen on ``ip`` for convention traffic, or None when it may."""
    try:
        address = ipaddress.ip_address(ip.split("%")[0])
    except ValueError:
        return f"{ip!r} is not an IP address: give the address of this host's private interface (--bind)"
    if address.is_unspecified:
        return (f"{ip} listens on every interface: give the one address of this host's private interface "
                "(--bind), e.g. its WireGuard address")
    if address.is_loopback:
        return (f"{ip} is loopback: hosts of a convention reach each other over a network; give this host's private "
                "interface address (--bind)")
    if is_private_network(ip) or network_is_private:
        return None
    return (f"{ip} is not a private network address: convention traffic is pickles, signed but not encrypted, "
            "and a port that accepts them is an attack surface. Put the hosts on a private network (a WireGuard "
            "tunnel: docs/distribution.md), or pass --network-is-private if this network is private already (a link "
            "or VPN you control end to end)")


def leader_refusal(ip: str, network_is_private: bool) -> str | None:
    """Why a worker may not join a leader at ``ip``, or None when it may: the same rule as its own ``--bind``
    (a private address, unless the operator says the network is private)."""
    refusal = join_refusal(ip, network_is_private)
    return None if refusal is None else "the leader's address " + refusal.replace("(--bind)", "(LEADER_HOST)")


def runs_here(capabilities: dict, requirements: dict | None) -> bool:
    """Thespian's ``actorSystemCapabilityCheck`` for an actor placed by host: one asked for on a named host runs
    only on that member (and only if it offers shards); one asked for on no host runs on the leader, never on a
    worker (the leader keeps the adapters and the shard map). A system of no convention has no role: the leader."""
    wanted = (requirements or {}).get(HOST_CAPABILITY)
    if wanted is not None:
        return capabilities.get(HOST_CAPABILITY) == wanted and bool(capabilities.get(SHARDS_CAPABILITY))
    return capabilities.get(ROLE_CAPABILITY, "leader") != "worker"


def on_worker() -> bool:
    """True in the processes of a worker host (``join``): what runs here keeps its records in this host's database,
    which the leader's adapters do not see."""
    return bool(os.environ.get(WORKER_NAME_ENV))


def host_name(config: dict) -> str:
    """This host's name in the convention: a worker's ``--name`` in the processes it runs, else the leader's
    ``[cluster] host_name``, else the machine's (its default, "", counts as not set, as a missing key does)."""
    named = (config.get("cluster") or {}).get("host_name")
    return os.environ.get(WORKER_NAME_ENV) or named or socket.gethostname()


def check_host_name(name: str) -> str | None:
    """Why ``name`` cannot name a member (it is shown in `tree` and keys the shard map), or None."""
    if not name or len(name) > MAX_HOST_NAME:
        return f"a host name has 1 to {MAX_HOST_NAME} characters, got {len(name)}"
    if not all(c.isalnum() or c in "-_." for c in name):
        return f"{name!r}: a host name has letters, digits, '-', '_' and '.' only"
    return None


def detection_env(period_s: int, misses: int) -> dict[str, str]:
    """The environment that makes Thespian re-register every ``period_s`` seconds and declare a member dead after
    ``misses`` silent periods. Thespian's format is ``M:SS``; it takes whole seconds."""
    if period_s < 1 or misses < 2:
        raise ValueError("the re-registration period is at least 1 s and the miss count at least 2 (a member "
                         "re-registers up to two periods apart)")
    period = f"{period_s // 60}:{period_s % 60:02d}"
    return {PERIOD_ENV: period, RESTART_ENV: period, MISSES_ENV: str(misses)}


def detection_bound_s(period_s: int, misses: int) -> float:
    """The longest a dead member stays listed: ``misses`` periods, plus up to one period before the leader's next
    look at its members (it checks them on its own re-registration timer)."""
    return float(period_s * (misses + 1))


