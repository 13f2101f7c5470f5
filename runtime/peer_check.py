"""Every connection an actor or admin port accepts is checked before Thespian reads a byte of it.

Thespian's accept path (``TCPTransport._acceptNewIncoming``) is wrapped, not rewritten: the connection is accepted
here and given to the check ``install`` was handed (common/peer_credentials.py: the kernel's word on who owns the
other end), then handed to Thespian's own code through a stand-in listener. A refused connection is closed and
Thespian's loop goes on as if nothing had arrived (its own accept-error path would queue a bogus envelope that
crashes the actor). What a refused peer sees: the connection is accepted by the kernel's backlog and closed at once
(EOF); nothing it sent is read. The refusal is written to Thespian's log, ``<state>/thespian.log`` (at most once per
``LOG_EVERY_S`` per process, with a count).

``install()`` runs in the launcher (and in every admin command's client) before the actor system starts; actor
processes are forked from it and inherit the patched transport, as they inherit loopback.py's.

Thespian internals relied on (checked against Thespian 4.0.1: runtime/versions.py): ``TCPTransport.
_acceptNewIncoming(self)`` (wrapped) reading ``self.socket.accept()``; ``TCPTransport.close_oldest_idle_sockets(
self, num_to_close=1)`` and ``TCPTransport._check_indicators(self)``, called as Thespian's own accept path calls
them.
"""
from __future__ import annotations

import errno
import functools
import os
import socket
from typing import Callable, Optional

from runtime.shapes import need, tcp_transport
from runtime.thespian_log import RateLimitedWarning

LOG_EVERY_S = 10.0
# (the accepted connection) -> (admitted, the peer's uid if known)
Admits = Callable[[socket.socket], "tuple[bool, Optional[int]]"]

_refusals = RateLimitedWarning(LOG_EVERY_S)


class _OneAccept:
    """Stands in for the listening socket during one call of Thespian's accept path: its ``accept()`` returns the
    connection already accepted and checked here; everything else is the listening socket's."""

    def __init__(self, listener, accepted):
        self._listener, self._accepted = listener, accepted

    def accept(self):
        return self._accepted

    def __getattr__(self, name):
        return getattr(self._listener, name)


def _accept_checked(listener, make_room) -> Optional[tuple]:
    try:
        return listener.accept()
    except BlockingIOError:
        return None
    except OSError as exc:
        if exc.errno not in (errno.EMFILE, errno.ENFILE):
            return None
    make_room()                    # too many open files: let idle connections go, as Thespian does, and try once more
    try:
        return listener.accept()
    except OSError:
        return None


def _note_refusal(peer, uid: Optional[int]) -> None:
    _refusals.note("refused %d connection(s) to an actor port from another user or network (last: %s, uid %s); only "
                   "uid %d and root, and hosts on the private network of a convention, may talk to the gateway",
                   peer, "unknown" if uid is None else uid, os.geteuid())


def install(admits: Admits) -> None:
    """Patch Thespian's TCP transport so that every accepted connection is checked by ``admits`` before it is read.
    The first check installed in a process stays (actor processes inherit it)."""
    # Thespian's internals load when the patch is installed, not when this module is imported
    from thespian.system.transport.TCPTransport import TCPTransport
    if getattr(TCPTransport._acceptNewIncoming, "_checks_peers", False):
        return
    original = TCPTransport._acceptNewIncoming

    @functools.wraps(original)
    def _acceptNewIncoming(self):
        listener = self.socket
        accepted = _accept_checked(listener, lambda: self.close_oldest_idle_sockets(3))
        if accepted is None:
            self._check_indicators()
            return
        conn, peer = accepted
        admitted, uid = admits(conn)
        if not admitted:
            conn.close()
            _note_refusal(peer, uid)
            self._check_indicators()
            return
        self.socket = _OneAccept(listener, accepted)
        try:
            original(self)
        finally:
            self.socket = listener

    _acceptNewIncoming._checks_peers = True
    TCPTransport._acceptNewIncoming = _acceptNewIncoming


def missing() -> list[str]:
    problems: list[str] = []
    _tcp, transport = tcp_transport(problems)
    need(transport, "TCPTransport", "_acceptNewIncoming", problems, params=("self",), uses=("socket", "accept"))
    need(transport, "TCPTransport", "close_oldest_idle_sockets", problems, params=("self", "num_to_close"))
    need(transport, "TCPTransport", "_check_indicators", problems, params=("self",))
    return problems
