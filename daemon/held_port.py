"""The admin port is held by the launcher from the moment it is found free until the admin listens on it.

Without this, the launcher checked that the port was free, imported every actor module, then let Thespian start:
Thespian's ``systemBase`` asks ``TCPTransport.probeAdmin`` whether the port is taken and, if it is, assumes an admin
of its own runs there, connects to it and unpickles its answer. Another user who started listening on the port in
that window (a few hundred milliseconds, on every restart) ran code as the gateway's user.

Now the check *is* the hold: ``hold(host, port)`` binds a socket to the port with ``SO_REUSEPORT`` and without
``SO_REUSEADDR``, and never listens on it. While it is bound, the kernel refuses the port to every other socket,
except one that also sets ``SO_REUSEPORT`` and belongs to the same effective uid: the admin's, which ``install``
makes set it. ``install`` also makes ``probeAdmin`` answer "no admin here" in this process: the launcher (or a
worker's ``join``) always starts its own admin and never attaches to a listener it did not create. The admin process
(forked from the launcher) closes its inherited copy once it listens; the launcher closes its own copy once the
actor system has started (``release``), and puts Thespian's module back as it was.

Even a listener that got there first is harmless now: every frame is checked by its MAC (frame_mac.py), and the
launcher, finding the port taken at the hold, refuses to start with a clear message (or, with ``admin_port = 0``,
takes another port).

Checked against Thespian 4.0.1 (``probeAdmin`` a static method, the admin's transport binding its listening socket in
``TCPTransport.__init__`` through the module's ``socket``); frame_mac.check_thespian guards that version.
"""
from __future__ import annotations

import socket
import types
from typing import Optional

_held: Optional[socket.socket] = None
_held_port = 0
_originals: dict = {}


def hold(host: str, port: int) -> Optional[socket.socket]:
    """A socket bound to (host, port) that keeps every other user off it, or None if the port is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind((host, port))
    except OSError:
        s.close()
        return None
    return s


def install(held: socket.socket) -> None:
    """From now on in this process (and the admin forked from it): start an admin of our own on the held port."""
    global _held, _held_port
    from thespian.system.transport import TCPTransport as module
    release()
    _held, _held_port = held, held.getsockname()[1]
    _originals.update(socket=module.socket, probe=module.TCPTransport.__dict__["probeAdmin"],
                      init=module.TCPTransport.__init__)
    shared = types.SimpleNamespace(**{name: getattr(socket, name) for name in dir(socket) if not name.startswith("__")})
    shared.socket = _SharingSocket
    module.socket = shared
    module.TCPTransport.probeAdmin = staticmethod(_no_admin_of_ours_yet)
    original_init = _originals["init"]

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        if _held is not None and self.socket.getsockname()[1] == _held_port:
            release()          # this is the admin, listening on the port now: the hold has done its work here

    module.TCPTransport.__init__ = __init__


def release() -> None:
    """Close this process's copy of the held socket and restore Thespian's module."""
    global _held, _held_port
    if _held is not None:
        _held.close()
    _held, _held_port = None, 0
    if _originals:
        from thespian.system.transport import TCPTransport as module
        module.socket = _originals["socket"]
        module.TCPTransport.probeAdmin = _originals["probe"]
        module.TCPTransport.__init__ = _originals["init"]
        _originals.clear()


def _no_admin_of_ours_yet(_addr) -> bool:
    return False


class _SharingSocket(socket.socket):
    """A socket that, bound to the held port, shares it with the hold (same uid, SO_REUSEPORT on both)."""

    def bind(self, address):
        if _held_port and isinstance(address, tuple) and len(address) >= 2 and address[1] == _held_port:
            self.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        return super().bind(address)
