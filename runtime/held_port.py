"""The admin port is held from the moment it is found free until the gateway's own admin listens on it.

Without this, the launcher checked that the port was free, imported every actor module, then let Thespian start:
Thespian's ``systemBase`` asks ``TCPTransport.probeAdmin`` whether the port is taken and, if it is, assumes an admin
of its own runs there, connects to it and unpickles its answer. Another user who started listening on the port in
that window (a few hundred milliseconds, on every restart) ran code as the gateway's user.

Now the check *is* the hold. ``hold(host, port)`` listens on the port with ``SO_REUSEPORT`` (and ``SO_REUSEADDR``,
as Thespian's own bind, so a restart is not refused by its predecessor's connections in TIME_WAIT). While a socket
listens there, the kernel refuses the port to every other socket except one that also sets ``SO_REUSEPORT`` and
belongs to the same effective uid: the admin's, which ``install`` makes set it (``_SharingSocket``). Nothing ever
accepts on the hold; what connects to it before the admin listens waits in its backlog and is reset when it closes.

``install`` also makes ``probeAdmin`` answer "no admin here" in this process: the launcher (and a worker's ``join``)
always starts its own admin and never attaches to a listener it did not create. The hold passes to the admin with
the fork that starts it: the launcher closes its copy as soon as the admin process exists (Thespian's
``connectEndpoint``, called right after that fork), the admin closes its inherited copy once its own socket listens
(the end of its ``TCPTransport.__init__``), so some socket of the gateway's uid listens on the port at every moment.
``release`` closes this process's copy and puts Thespian's module back as it was.

Before the hold, a plain bind (without ``SO_REUSEPORT``) checks that nobody listens at all: the hold alone would
share the port with another gateway of the same user, whose admin socket sets ``SO_REUSEPORT`` too.

Even a listener that got there before the hold gains nothing: the launcher then refuses to start with a clear
message (or, with ``admin_port = 0``, takes another port), and every frame is checked by its MAC (frame_mac.py).

Thespian internals relied on (checked against Thespian 4.0.1: runtime/versions.py; frame_mac.check_thespian refuses
any other version): ``TCPTransport.probeAdmin(addr)`` a static method (replaced); ``multiprocessCommon._startAdmin``
forking the admin, then calling ``connectEndpoint(self, endPoint)`` (wrapped); the admin's transport binding its
listening socket in ``TCPTransport.__init__(self, initType, *args)`` (wrapped) through the module global ``socket``
of ``thespian.system.transport.TCPTransport`` (replaced) and keeping it as ``self.socket``.
"""
from __future__ import annotations

import functools
import socket
import types
from typing import Optional

from runtime.shapes import TCP_MODULE, module as load_module, need, tcp_transport

_held: Optional[socket.socket] = None
_held_port = 0
_originals: dict = {}


def hold(host: str, port: int) -> Optional[socket.socket]:
    """A socket listening on (host, port) that keeps every other user off it, or None if the port is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if not _free_for_anyone(family, host, port):
        return None
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind((host, port))
        s.listen(1)
    except OSError:
        s.close()
        return None
    return s


def _free_for_anyone(family: int, host: str, port: int) -> bool:
    """Whether a socket *without* ``SO_REUSEPORT`` may bind the port. The hold itself sets it, so by itself it
    would share the port with any listener of our uid that set it too: the admin of another gateway run by the same
    user (its socket is a ``_SharingSocket``). Two admins on one port would each get half the connections."""
    probe = socket.socket(family, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # TIME_WAIT of a predecessor is no holder
        probe.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def install(held: socket.socket) -> None:
    """From now on in this process (and the admin forked from it): start an admin of our own on the held port."""
    global _held, _held_port
    # Thespian's transport loaded where it is patched: importing this module alone must not load it
    from thespian.system.transport import TCPTransport as module
    release()
    _held, _held_port = held, held.getsockname()[1]
    cls = module.TCPTransport
    _originals.update(socket=module.socket, probe=cls.__dict__["probeAdmin"], init=cls.__init__,
                      connect=cls.connectEndpoint)
    shared = types.SimpleNamespace(**{name: getattr(socket, name) for name in dir(socket) if not name.startswith("__")})
    shared.socket = _SharingSocket
    module.socket = shared
    _no_admin_of_ours_yet.__wrapped__ = _originals["probe"].__func__   # the shape the self-test checks is Thespian's
    cls.probeAdmin = staticmethod(_no_admin_of_ours_yet)
    original_init, original_connect = _originals["init"], _originals["connect"]

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        if _held is not None and self.socket.getsockname()[1] == _held_port:
            release()          # this is the admin, listening on the port now: the hold has done its work

    @functools.wraps(original_connect)
    def connectEndpoint(self, endpoint):
        _close_hold()          # the admin process exists and holds its own copy (see the module docstring)
        return original_connect(self, endpoint)

    cls.__init__ = __init__
    cls.connectEndpoint = connectEndpoint


def _close_hold() -> None:
    global _held
    if _held is not None:
        _held.close()
        _held = None


def release() -> None:
    """Close this process's copy of the hold and restore Thespian's module."""
    global _held_port
    _close_hold()
    _held_port = 0
    if _originals:
        # Thespian's transport loaded where it is patched: importing this module alone must not load it
        from thespian.system.transport import TCPTransport as module
        module.socket = _originals["socket"]
        module.TCPTransport.probeAdmin = _originals["probe"]
        module.TCPTransport.__init__ = _originals["init"]
        module.TCPTransport.connectEndpoint = _originals["connect"]
        _originals.clear()


def _no_admin_of_ours_yet(_addr) -> bool:
    return False


class _SharingSocket(socket.socket):
    """A socket that, bound to the held port, shares it with the hold (same uid, SO_REUSEPORT on both)."""

    def bind(self, address):
        if _held_port and isinstance(address, tuple) and len(address) >= 2 and address[1] == _held_port:
            self.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        return super().bind(address)


def missing() -> list[str]:
    problems: list[str] = []
    tcp, transport = tcp_transport(problems)
    need(tcp, TCP_MODULE, "socket", problems)
    need(transport, "TCPTransport", "probeAdmin", problems, kind=staticmethod, params=("addr",))
    need(transport, "TCPTransport", "__init__", problems, params=("self", "initType"), uses=("socket", "bind"))
    need(transport, "TCPTransport", "connectEndpoint", problems, params=("self", "endPoint"))
    common = load_module("thespian.system.multiprocCommon", problems)
    starter = need(common, "thespian.system.multiprocCommon", "multiprocessCommon", problems, kind=type)
    need(starter, "multiprocessCommon", "_startAdmin", problems, uses=("connectEndpoint",))
    return problems
