"""Asking an actor from outside the actor system (launcher, admin CLI, tests).

An external ActorSystem handle receives every message addressed to it, in whatever order they arrive: a reply to
``ask`` may be preceded by something the actor sent earlier (e.g. ChildReady after Started). ``ask_for`` keeps the
first message of the wanted type and hands the others to ``other`` (or drops them).
"""
from __future__ import annotations

import time
from typing import Callable, Optional


def ask_for(asys, address, message, wanted: type | tuple, timeout: float,
            other: Optional[Callable] = None):
    deadline = time.monotonic() + timeout
    reply = asys.ask(address, message, timeout)
    while True:
        if isinstance(reply, wanted):
            return reply
        if reply is not None and other is not None:
            other(reply)
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        reply = asys.listen(left)


def listen_for(asys, wanted: type | tuple, timeout: float, other: Optional[Callable] = None):
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        reply = asys.listen(left)
        if isinstance(reply, wanted):
            return reply
        if reply is not None and other is not None:
            other(reply)
