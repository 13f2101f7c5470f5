"""Thespian's select loop waits with poll(2) instead of a fresh epoll instance per pass.

Each pass of Thespian's TCP transport (``_runWithExpiry``) builds a new ``selectors.DefaultSelector``, registers
every socket it watches, waits once and closes it (its own comment: "creates selector on each loop, perhaps this
could be optimized"). On Linux that is epoll: epoll_create1, one epoll_ctl per socket, epoll_wait and close, each a
system call, about 20 us a pass for the handful of sockets an actor has; poll(2) takes the same list in one call,
about 7 us. A turn makes ten or more passes in each of the shard and adapter processes that carry it. poll has no
descriptor limit (select's 1024 would be one) and, as a selector made for one wait, loses nothing epoll keeps
across waits.

``install()`` points the transport module's ``selectors`` at a copy whose DefaultSelector is PollSelector; nothing
else changes. Like the other transport adjustments (ack_wait.py, loopback.py, peer_check.py) it runs in the
launcher before the actor system starts, and the actor processes forked from it inherit it.

Thespian internals relied on (checked against Thespian 4.0.1: runtime/versions.py): the module global ``selectors``
of ``thespian.system.transport.TCPTransport`` (replaced), through which ``TCPTransport._runWithExpiry`` makes its
``DefaultSelector`` for each pass.
"""
from __future__ import annotations

import selectors
import types

from runtime.shapes import TCP_MODULE, need, tcp_transport


def install() -> None:
    # Thespian's internals load when the patch is installed, not when this module is imported
    from thespian.system.transport import TCPTransport as transport_module
    if getattr(transport_module.selectors, "_waits_with_poll", False):
        return
    if not hasattr(selectors, "PollSelector"):
        return   # no poll(2) on this platform: Thespian's own choice stands
    patched = types.SimpleNamespace(**{name: getattr(selectors, name) for name in dir(selectors)
                                       if not name.startswith("__")})
    patched.DefaultSelector = selectors.PollSelector
    patched._waits_with_poll = True
    transport_module.selectors = patched


def missing() -> list[str]:
    problems: list[str] = []
    tcp, transport = tcp_transport(problems)
    need(tcp, TCP_MODULE, "selectors", problems)
    need(transport, "TCPTransport", "_runWithExpiry", problems, uses=("selectors", "DefaultSelector"))
    return problems
