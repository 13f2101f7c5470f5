"""Keep every actor socket on the configured interface.

Thespian binds the admin port and every actor's listening socket to all interfaces (``IPActorAddress`` sets
``bindname = ('', port)`` for "external" addresses) and those sockets carry pickles: the fewer hosts reach them,
the better, even with every frame signed (frame_mac.py). This module is the one place that fixes it.
``install(host)`` must run in the launcher before the actor system starts; actor processes are forked from it (and
from each other), so they inherit both the patched class and the environment variables set here.

``THESPIAN_BASE_IPADDR`` makes Thespian advertise the same host it binds, instead of guessing a "public" address by
routing towards 8.8.8.8.
"""
from __future__ import annotations

import os

from thespian.system.transport import IPBase

BIND_ENV = "GATEWAY_BIND_HOST"
_original_init = IPBase.IPActorAddress.__init__


def _bound_init(self, *args, **kwargs):
    _original_init(self, *args, **kwargs)
    host = os.environ.get(BIND_ENV)
    if host and self.bindname and self.bindname[0] in ("", "0.0.0.0"):
        self.bindname = (host,) + tuple(self.bindname[1:])


def install(host: str) -> None:
    os.environ[BIND_ENV] = host
    os.environ["THESPIAN_BASE_IPADDR"] = host
    IPBase.IPActorAddress.__init__ = _bound_init
