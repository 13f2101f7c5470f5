"""Asking an actor from outside the actor system (launcher, admin CLI, tests).

An external ActorSystem handle receives every message addressed to it, in whatever order they arrive: a reply to
``ask`` may be preceded by something the actor sent earlier (e.g. ChildReady after Started). ``ask_for`` keeps the
first message of the wanted type and hands the others to ``other`` (or drops them). An actor may send several
messages as one ``Batch`` (supervision/batching.py); they are taken one by one here, in order, as actors take them.
"""
from __future__ import annotations

import collections
import time
from typing import Callable, Optional

from supervision.messages import Batch


def _received(asys, reply):
    """``reply`` as one message: the first item of a batch, the rest kept for the next listen on ``asys``."""
    if isinstance(reply, Batch):
        pending = _pending(asys)
        pending.extend(reply.items)
        return pending.popleft() if pending else None
    return reply


def _pending(asys) -> collections.deque:
    if not hasattr(asys, "_gateway_unbatched"):
        asys._gateway_unbatched = collections.deque()
    return asys._gateway_unbatched


def _listen(asys, timeout: float):
    pending = _pending(asys)
    if pending:
        return pending.popleft()
    return _received(asys, asys.listen(timeout))


def ask_for(asys, address, message, wanted: type | tuple, timeout: float,
            other: Optional[Callable] = None):
    deadline = time.monotonic() + timeout
    reply = _received(asys, asys.ask(address, message, timeout))
    while True:
        if isinstance(reply, wanted):
            return reply
        if reply is not None and other is not None:
            other(reply)
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        reply = _listen(asys, left)


def listen_for(asys, wanted: type | tuple, timeout: float, other: Optional[Callable] = None):
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        reply = _listen(asys, left)
        if isinstance(reply, wanted):
            return reply
        if reply is not None and other is not None:
            other(reply)
