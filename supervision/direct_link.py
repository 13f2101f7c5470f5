"""Direct links: messages between two actor processes of one machine over a Unix socket, beside Thespian.

Why: a Thespian message between two actors costs each side several passes of Thespian's select loop (the data,
then the receiver's acknowledgement the sender waits for) and the transport's bookkeeping per transmit. A warm turn
carries three between an adapter and its session shard (the doorbell, the shard's operations, the adapter's
results); measured on the warm-turn benchmark they were a third of the adapter's CPU and a fifth of the shard's. A
link carries the same messages as length-prefixed pickles on a stream socket the two actor threads read and write
directly: one system call to send, one pass of the receiver's select to take any number of them.

How it is found: an actor with ``uses_links`` listens, for as long as it lives, on an abstract Unix socket named
after its own Thespian address (``link_name``: the user id, IP and port). An actor sending to an address it has no
link to connects to that name once; where nothing listens (the recipient has no links, or lives on another host or
network namespace, or is gone) the address is remembered as not linkable and the message goes by Thespian, as
every message did before. The kernel frees an abstract name when its process dies, so a stale name never lingers.

Who may use one: the same rule as every Thespian port (common/peer_credentials.py): the kernel's ``SO_PEERCRED``
of the other end must be the gateway's own uid or root, checked on both ends before a byte is read or written (a
listener on our name run by another user, or another user connecting to ours, is refused and closed). Pickles from
anyone else are never read.

What it promises, and what not: frames on one connection arrive in the order written. Nothing is promised between a
link and Thespian, as Thespian promises no order between two actors either (whoever needs order numbers its
messages). A message written to a link whose peer dies is lost, as one Thespian sends to an actor that dies: the
callers already cope (the doorbells' replay to a restarted shard, the consumers' operation timeouts, the inbox read
when a shard starts). What a kill -9 leaves: nothing; links hold no state that is not also in flight.

Bounds: a frame is at most MAX_FRAME bytes (a longer length prefix is a broken peer: the connection is closed);
bytes a busy peer has not read yet wait in memory up to MAX_PENDING per connection, past that the connection is
closed with a warning and later messages go by Thespian; at most MAX_UNLINKABLE addresses are remembered as not
linkable. Everything here runs on the owning actor's own thread (docs/design.md §4).
"""
from __future__ import annotations

import collections
import errno
import logging
import os
import pickle
import socket
import struct
from dataclasses import dataclass
from typing import Any, Optional

log = logging.getLogger("gateway.links")

MAX_FRAME = 64 * 1024 * 1024
MAX_PENDING = 64 * 1024 * 1024
MAX_UNLINKABLE = 4096
CONNECT_TIMEOUT_S = 1.0
RECV_BYTES = 64 * 1024   # below malloc's mmap threshold: a larger buffer is an mmap and munmap per read
_LENGTH = struct.Struct(">I")
_UCRED = struct.Struct("3i")   # pid, uid, gid


@dataclass(frozen=True)
class Hello:
    """The first frame a connecting actor writes: its own Thespian address, where the other end's replies go."""
    address: Any


def link_name(address) -> Optional[str]:
    """The abstract socket name of the actor at ``address``, or None for an address with no IP and port (a local
    address Thespian has not resolved yet)."""
    sockname = getattr(getattr(address, "addressDetails", None), "sockname", None)
    if not isinstance(sockname, tuple) or len(sockname) < 2:
        return None
    return f"\0agent-gateway-link/{os.getuid()}/{sockname[0]}/{sockname[1]}"


def peer_allowed(sock: socket.socket) -> bool:
    try:
        _pid, uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    except OSError:
        return False
    return uid in (os.getuid(), 0)


class _Connection:
    def __init__(self, sock: socket.socket, peer=None, peer_name: Optional[str] = None):
        self.sock, self.peer, self.peer_name = sock, peer, peer_name
        self.sock.setblocking(False)
        self.fd = sock.fileno()
        self.inbound = bytearray()
        self.outbound = bytearray()

    def write(self, data: bytes) -> None:
        """Send what the socket takes now; keep the rest, in order, for ``flush``. Raises OSError if the peer is
        gone, ``_Overflow`` if the peer has not read MAX_PENDING bytes."""
        if not self.outbound:
            try:
                sent = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            if sent == len(data):
                return
            data = data[sent:]
        self.outbound += data
        if len(self.outbound) > MAX_PENDING:
            raise _Overflow(len(self.outbound))

    def flush(self) -> None:
        while self.outbound:
            try:
                sent = self.sock.send(self.outbound)
            except (BlockingIOError, InterruptedError):
                return
            del self.outbound[:sent]

    def read(self) -> tuple[list, bool]:
        """The whole frames that arrived, unpickled, and whether the connection is still open."""
        open_ = True
        while True:
            try:
                chunk = self.sock.recv(RECV_BYTES)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                open_ = False
                break
            if not chunk:
                open_ = False
                break
            self.inbound += chunk
        frames, at = [], 0
        while len(self.inbound) - at >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(self.inbound, at)
            if size > MAX_FRAME:
                raise _BrokenPeer(f"a frame of {size} bytes")
            if len(self.inbound) - at - _LENGTH.size < size:
                break
            start = at + _LENGTH.size
            frames.append(pickle.loads(self.inbound[start:start + size]))
            at = start + size
        del self.inbound[:at]
        return frames, open_

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class _Overflow(Exception):
    pass


class _BrokenPeer(Exception):
    pass


def frame(message) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


class LinkHub:
    """One actor's links: its listener, its connections by peer address and by descriptor. Actor thread only.

    ``send`` is tried for every message the actor sends; ``fds`` are watched by Thespian beside the mailbox
    (ThespianWatch); ``readable(ready)`` takes the ready descriptors of a WatchMessage and returns the
    ``(message, sender address)`` pairs that arrived; ``flush`` retries bytes a busy peer had no room for."""

    def __init__(self, own_address, owner: str = "actor"):
        self.own_address, self.owner = own_address, owner
        self.listener: Optional[socket.socket] = None
        self.by_peer: dict[str, _Connection] = {}   # by the peer's link name (addresses are not hashable)
        self.by_fd: dict[int, _Connection] = {}
        self.unlinkable: collections.OrderedDict = collections.OrderedDict()
        self.own_name = name = link_name(own_address)
        if name is None:
            return
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(name)
            listener.listen(64)
        except OSError as exc:
            # Taken (another user squatting on our name, or a stale twin): we take no links; senders that reach
            # that listener refuse it by its owner, and every message to us still comes by Thespian.
            log.warning("%s: no direct link (%s); its messages go by Thespian", owner, exc)
            listener.close()
            return
        listener.setblocking(False)
        self.listener = listener

    # ------------------------------------------------------------------------------------------------ sending
    def send(self, address, message) -> bool:
        """Write ``message`` to the link to ``address``, connecting first if none is open; False if there is no
        link to that address (the caller sends it by Thespian instead)."""
        name = link_name(address)
        if name is None or name == self.own_name:
            return False
        conn = self.by_peer.get(name)
        if conn is None:
            conn = self._connect(address, name)
            if conn is None:
                return False
        try:
            conn.write(frame(message))
        except _Overflow as exc:
            log.warning("%s: the link to %s has %d bytes its peer has not read; closed, Thespian carries the rest",
                        self.owner, address, exc.args[0])
            self._drop(conn)   # what it held is lost, as to a peer that died (module docstring)
            self._remember_unlinkable(name)
            return False
        except OSError:
            self._drop(conn)
            return False
        return True

    def _connect(self, address, name: str) -> Optional[_Connection]:
        if name in self.unlinkable:
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(name)
            if not peer_allowed(sock):
                log.warning("%s: the link listener for %s belongs to another user; refused", self.owner, address)
                raise ConnectionRefusedError(errno.EACCES, "another user's listener")
            conn = _Connection(sock, peer=address, peer_name=name)
            conn.write(frame(Hello(self.own_address)))
        except (OSError, _Overflow):
            sock.close()
            self._remember_unlinkable(name)
            return None
        self._register(conn)
        return conn

    def _remember_unlinkable(self, name: str) -> None:
        self.unlinkable[name] = None
        while len(self.unlinkable) > MAX_UNLINKABLE:
            self.unlinkable.popitem(last=False)

    # ---------------------------------------------------------------------------------------------- receiving
    def fds(self) -> list[int]:
        return ([self.listener.fileno()] if self.listener is not None else []) + list(self.by_fd)

    def readable(self, ready) -> list[tuple[Any, Any]]:
        out = []
        for fd in ready:
            if self.listener is not None and fd == self.listener.fileno():
                self._accept()
            elif (conn := self.by_fd.get(fd)) is not None:
                out += self._read(conn)
        return out

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("%s: accepting a link failed: %s", self.owner, exc)
                return
            if not peer_allowed(sock):
                log.warning("%s: a link from another user was refused", self.owner)
                sock.close()
                continue
            self._register(_Connection(sock))

    def _read(self, conn: _Connection) -> list[tuple[Any, Any]]:
        try:
            frames, open_ = conn.read()
        except (_BrokenPeer, pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError) as exc:
            log.warning("%s: a link sent what is not a frame (%s); closed", self.owner, exc)
            frames, open_ = [], False
        out = []
        for item in frames:
            if isinstance(item, Hello):
                if conn.peer is None and (peer_name := link_name(item.address)) is not None:
                    conn.peer, conn.peer_name = item.address, peer_name
                    self.by_peer.setdefault(peer_name, conn)   # a link we opened to it stays the one we write
            elif conn.peer is not None:
                out.append((item, conn.peer))
        if not open_:
            self._drop(conn)
        return out

    # ------------------------------------------------------------------------------------------ housekeeping
    def flush(self) -> bool:
        """Write what waits; True while some link still has bytes its peer had no room for."""
        waiting = False
        for conn in list(self.by_fd.values()):
            if conn.outbound:
                try:
                    conn.flush()
                except OSError:
                    self._drop(conn)
                    continue
                waiting = waiting or bool(conn.outbound)
        return waiting

    def _register(self, conn: _Connection) -> None:
        self.by_fd[conn.fd] = conn
        if conn.peer_name is not None:
            self.by_peer[conn.peer_name] = conn

    def _drop(self, conn: _Connection) -> None:
        self.by_fd.pop(conn.fd, None)
        if conn.peer_name is not None and self.by_peer.get(conn.peer_name) is conn:
            del self.by_peer[conn.peer_name]
        conn.close()

    def close(self) -> None:
        for conn in list(self.by_fd.values()):
            self._drop(conn)
        if self.listener is not None:
            self.listener.close()
            self.listener = None
