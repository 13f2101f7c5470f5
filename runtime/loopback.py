"""Keep every actor socket on the configured interface.

Thespian binds the admin port and every actor's listening socket to all interfaces (``IPActorAddress`` sets
``bindname = ('', port)`` for "external" addresses) and those sockets carry pickles: the fewer hosts reach them,
the better, even with every frame signed (frame_mac.py). This module is the one place that fixes it.
``install(host)`` must run in the launcher before the actor system starts; actor processes are forked from it (and
from each other), so they inherit both the patched class and the environment variables set here.

``THESPIAN_BASE_IPADDR`` makes Thespian advertise the same host it binds, instead of guessing a "public" address by
routing towards 8.8.8.8.

Thespian internals relied on (checked against Thespian 4.0.1: runtime/versions.py): ``thespian.system.transport.
IPBase.IPActorAddress.__init__(self, af, socktype, proto, baseaddr, port, external=False)``, which sets
``self.bindname`` (replaced by a wrapper that rewrites an all-interfaces bindname), and the environment variable
``THESPIAN_BASE_IPADDR`` that module reads.
"""
from __future__ import annotations

import functools
import os

from runtime.shapes import module, need

BIND_ENV = "GATEWAY_BIND_HOST"


def install(host: str) -> None:
    os.environ[BIND_ENV] = host
    os.environ["THESPIAN_BASE_IPADDR"] = host
    # Thespian's internals load when the patch is installed, not when this module is imported
    from thespian.system.transport import IPBase
    original = IPBase.IPActorAddress.__init__
    if getattr(original, "_binds_configured_host", False):
        return

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        bind_host = os.environ.get(BIND_ENV)
        if bind_host and self.bindname and self.bindname[0] in ("", "0.0.0.0"):
            self.bindname = (bind_host,) + tuple(self.bindname[1:])

    __init__._binds_configured_host = True
    IPBase.IPActorAddress.__init__ = __init__


def missing() -> list[str]:
    problems: list[str] = []
    ip_base = module("thespian.system.transport.IPBase", problems)
    address = need(ip_base, "thespian.system.transport.IPBase", "IPActorAddress", problems, kind=type)
    need(address, "IPActorAddress", "__init__", problems,
         params=("self", "af", "socktype", "proto", "baseaddr", "port", "external"), uses=("bindname",))
    return problems
