"""runtime/poll_selector.py: Thespian's select loop waits with poll(2), and still sees what is readable."""
from __future__ import annotations

import selectors
import socket

from thespian.system.transport import TCPTransport as transport_module

from runtime import poll_selector


def test_thespians_transport_makes_poll_selectors_and_they_see_a_readable_socket():
    poll_selector.install()
    poll_selector.install()   # twice is once
    sel = transport_module.selectors.DefaultSelector()
    assert isinstance(sel, selectors.PollSelector)
    assert transport_module.selectors.EVENT_READ == selectors.EVENT_READ
    a, b = socket.socketpair()
    try:
        sel.register(a.fileno(), transport_module.selectors.EVENT_READ)
        assert sel.select(0) == []
        b.send(b"x")
        [(key, events)] = sel.select(1.0)
        assert key.fd == a.fileno() and events & selectors.EVENT_READ
    finally:
        sel.close()
        a.close()
        b.close()
    assert selectors.DefaultSelector is not selectors.PollSelector or not hasattr(selectors, "EpollSelector"), \
        "the process's own selectors module is left as it was"
