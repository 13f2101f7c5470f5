"""Only the gateway's own user (and root) talks to its actor and admin ports.

Every Thespian port (the admin's and each actor's) carries pickles: whoever can send one runs code as the gateway's
user. Binding to loopback (``runtime/loopback.py``) keeps other hosts out; this module keeps other *local users* out. On
accept, before a byte is read (``runtime/peer_check.py`` calls ``admits`` from inside Thespian's accept path), it
asks the kernel who owns the other end of the connection and closes it unless that is the gateway's own uid or
root.

Why this way (docs/security.md): the kernel already knows the owner of both ends of a TCP connection between two
sockets of this host, whatever addresses they use, and the sock_diag netlink interface answers for one exact socket
in ~15 µs: nothing a peer can forge. It is the second wall: every frame is also checked by its MAC
(runtime/frame_mac.py).
Thespian keeps connections open between messages (``REUSE_SOCKETS``), so the check runs once per connection, not
once per message. Where netlink is unavailable,
``/proc/net/tcp`` and ``tcp6`` (the same facts as text) are read instead.

What a refused peer sees: the connection is accepted by the kernel's backlog and closed by us at once (EOF); nothing
it sent is read (runtime/peer_check.py says how, and logs the refusal).

``admission(allow_remote)`` is the check the launcher, a worker and every admin command's client install
(``peer_check.install``) before the actor system starts; actor processes are forked from them and inherit it.
"""
from __future__ import annotations

import errno
import functools
import ipaddress
import os
import socket
import struct
from typing import Callable, Optional

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
TCP_TIME_WAIT = 6          # a time-wait socket carries no owner: never taken as a proof of who connected
NO_COOKIE = 0xFFFFFFFF


def allowed_uids() -> frozenset[int]:
    return frozenset({os.geteuid(), 0})


def peer_uid(conn: socket.socket) -> Optional[int]:
    """The uid owning the other end of ``conn`` (an accepted TCP connection), or None when it cannot be told (the peer
    is on another host, gone, or the kernel will not say)."""
    try:
        local, peer = conn.getsockname(), conn.getpeername()
    except OSError:
        return None
    try:
        return _uid_by_netlink(conn.family, peer[0], peer[1], local[0], local[1])
    except OSError:
        return _uid_by_proc(conn.family, peer[0], peer[1], local[0], local[1])


def _padded(family: int, ip: str) -> bytes:
    raw = socket.inet_pton(family, ip)
    return raw + b"\0" * (16 - len(raw))


def _uid_by_netlink(family: int, src_ip: str, src_port: int, dst_ip: str, dst_port: int) -> Optional[int]:
    """inet_diag_req_v2 for the one socket whose local end is (src) and remote end is (dst): the peer's socket."""
    sockid = (struct.pack("!HH", src_port, dst_port) + _padded(family, src_ip) + _padded(family, dst_ip)
              + struct.pack("=III", 0, NO_COOKIE, NO_COOKIE))
    request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
    header = struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(1.0)
        nl.sendto(header + request, (0, 0))
        answer = nl.recv(8192)
    _, kind = struct.unpack_from("=IH", answer)
    if kind == NLMSG_ERROR:
        code = -struct.unpack_from("=i", answer, 16)[0]
        if code == errno.ENOENT:
            return None            # no such socket: the peer is gone (or on another host)
        raise OSError(code, "sock_diag refused the query")
    if kind != SOCK_DIAG_BY_FAMILY:
        raise OSError(errno.EPROTO, f"unexpected netlink answer type {kind}")
    state = answer[16 + 1]
    # inet_diag_msg: family, state, timer, retrans (4 bytes), sockid (48), expires, rqueue, wqueue, uid, inode
    uid = struct.unpack_from("=I", answer, 16 + 4 + 48 + 12)[0]
    return None if state == TCP_TIME_WAIT else uid


def _proc_address(family: int, ip: str, port: int) -> str:
    """An address as /proc/net/tcp{,6} prints it: the raw bytes in host order per 32-bit word, then the port."""
    raw = socket.inet_pton(family, ip)
    words = struct.unpack(f"={len(raw) // 4}I", raw)
    return "".join(f"{w:08X}" for w in words) + f":{port:04X}"


def _uid_by_proc(family: int, src_ip: str, src_port: int, dst_ip: str, dst_port: int) -> Optional[int]:
    path = "/proc/net/tcp6" if family == socket.AF_INET6 else "/proc/net/tcp"
    local, remote = _proc_address(family, src_ip, src_port), _proc_address(family, dst_ip, dst_port)
    try:
        with open(path) as table:
            next(table)
            for line in table:
                fields = line.split()
                if fields[1] == local and fields[2] == remote and int(fields[3], 16) != TCP_TIME_WAIT:
                    return int(fields[7])
    except OSError:
        return None
    return None


LOOPBACK_NAMES = ("localhost",)   # the one name [gateway] bind_host accepts (common/config.py)


def is_loopback(ip: str) -> bool:
    """Whether ``ip`` (an address, or the name ``localhost`` a bind_host may be) is a loopback address."""
    if ip.strip().lower().rstrip(".") in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(ip.split("%")[0]).is_loopback
    except ValueError:
        return False


def is_own_address(ip: str) -> bool:
    """Whether ``ip`` is an address of this host (of this network namespace): the kernel lets a socket bind only
    those. Anything that cannot be told counts as ours (the caller then refuses, never admits)."""
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((ip.split("%")[0], 0))
        return True
    except OSError as exc:
        return exc.errno != errno.EADDRNOTAVAIL


def admits(conn: socket.socket, allow_remote: "bool | Callable[[str], bool]" = False) -> tuple[bool, Optional[int]]:
    """(admitted, the peer's uid if known).

    The kernel is asked first, whatever the peer's address: a connection from a socket of this host, be it from
    127.0.0.1, from the host's LAN address or from any other of its addresses, is admitted only for the gateway's
    uid or root. Only a peer the kernel has no socket for is a remote peer, and only if its address is not one of
    this host's (a local socket that closed before we looked is refused, not taken for another host's). A remote
    peer is admitted only when the operator allowed non-loopback binding (a private network of the gateway's own
    hosts), and, where ``allow_remote`` is a predicate of the peer's address (a convention member:
    daemon/worker.py), only if that says yes."""
    try:
        peer_ip = conn.getpeername()[0]
    except OSError:
        return False, None
    uid = peer_uid(conn)
    if uid is not None:
        return uid in allowed_uids(), uid
    if is_loopback(peer_ip) or is_own_address(peer_ip):
        return False, None
    return (allow_remote(peer_ip) if callable(allow_remote) else allow_remote), None


def admission(allow_remote: "bool | Callable[[str], bool]" = False):
    """The check ``runtime.peer_check.install`` takes: ``admits`` with this ``allow_remote``."""
    return functools.partial(admits, allow_remote=allow_remote)
