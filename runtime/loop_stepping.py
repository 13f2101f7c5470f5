"""One asyncio loop pass at a time, on the caller's thread: what the stepped bridge (supervision/stepped_bridge.py)
needs of CPython's selector event loop, and all it touches of its internals.

CPython internals relied on (checked against CPython 3.11, 3.12 and 3.13: runtime/versions.py):
* ``BaseEventLoop._run_once(self)``: one pass of the loop (poll the selector, run what is ready). ``run_forever``
  calls it in a loop between its own setting-up and tearing-down; a pass per token of a streaming agent made that
  bookkeeping cost more than the pass, so the bridge enters it the way ``run_forever`` does, without the rest.
* ``asyncio.events._set_running_loop``: marks the loop running on this thread for the pass (``get_running_loop``
  inside a callback), as ``run_forever`` does; ``loop._thread_id``, which ``call_soon`` checks in debug mode and
  ``call_soon_threadsafe`` leaves alone, is set for the pass the same way.
* ``loop._ready``, a ``collections.deque`` of the callbacks due now; ``loop._scheduled``, a ``list`` used as a
  heap of timer handles (``when()``), earliest first.
* ``loop._selector``, the ``selectors`` object a pass waits on: its ``fileno()`` (epoll) is readable while any
  socket the loop watches is.
* ``BaseEventLoop._asyncgen_firstiter_hook`` / ``_asyncgen_finalizer_hook``: what ``run_forever`` installs with
  ``sys.set_asyncgen_hooks`` around each run, installed here once for the thread that runs only this loop.
"""
from __future__ import annotations

import asyncio
import collections
import sys
from asyncio import events
from typing import Optional

from runtime.shapes import need


def _nothing() -> None:
    """A callback that does nothing: with one ready, a pass polls its selector without waiting."""


def adopt(loop: asyncio.AbstractEventLoop) -> None:
    """Finalise this thread's async generators (an agent's stream is one) on ``loop``: the hooks ``run_forever``
    would set around each run, set once, for a thread that runs only this loop."""
    sys.set_asyncgen_hooks(firstiter=loop._asyncgen_firstiter_hook, finalizer=loop._asyncgen_finalizer_hook)


def selector_fileno(loop: asyncio.AbstractEventLoop) -> int:
    """The descriptor a pass of ``loop`` waits on (epoll, or poll): readable while any of its sockets is."""
    return loop._selector.fileno()


def has_ready(loop: asyncio.AbstractEventLoop) -> bool:
    """Callbacks due now (a pass would run them without waiting)."""
    return bool(loop._ready)


def run_passes(loop: asyncio.AbstractEventLoop, owner_thread: int, max_passes: int) -> bool:
    """Run passes of ``loop`` on this thread until nothing is ready, ``max_passes`` at most; never waits. True if
    callbacks are still ready after the last one (the caller steps again soon)."""
    events._set_running_loop(loop)
    loop._thread_id = owner_thread
    try:
        if not loop._ready:
            loop.call_soon(_nothing)
        for _ in range(max_passes):
            loop._run_once()
            if not loop._ready:
                return False
        return True
    finally:
        loop._thread_id = None
        events._set_running_loop(None)


def next_timer(loop: asyncio.AbstractEventLoop) -> Optional[float]:
    """Seconds until the loop's earliest timer is due, or None without one (a cancelled one may lead: the caller
    then wakes once for nothing)."""
    scheduled = loop._scheduled
    if not scheduled:
        return None
    return max(0.0, scheduled[0].when() - loop.time())


def missing() -> list[str]:
    problems: list[str] = []
    base = asyncio.BaseEventLoop
    need(base, "asyncio.BaseEventLoop", "_run_once", problems, params=("self",))
    need(base, "asyncio.BaseEventLoop", "_asyncgen_firstiter_hook", problems, params=("self", "agen"))
    need(base, "asyncio.BaseEventLoop", "_asyncgen_finalizer_hook", problems, params=("self", "agen"))
    if not callable(getattr(events, "_set_running_loop", None)):
        problems.append("asyncio.events._set_running_loop is missing")
    loop = asyncio.new_event_loop()   # a fresh one: its epoll and self-pipe, closed at once
    try:
        label = f"{type(loop).__name__}()"
        need(loop, label, "_ready", problems, kind=collections.deque)
        need(loop, label, "_scheduled", problems, kind=list)
        need(loop, label, "_thread_id", problems)
        selector = need(loop, label, "_selector", problems)
        if selector is not None and not callable(getattr(selector, "fileno", None)):
            problems.append(f"{label}._selector has no fileno()")
    finally:
        loop.close()
    return problems
