"""The stepped bridge: an actor's asyncio loop run on the actor's own thread, a step after every message.

The threaded bridge (supervision/bridge.py) runs the loop on a second thread, and every hand-over between the two
(a coroutine submitted, an item posted back) wakes the other thread and passes the GIL across: measured on a session
shard, about thirty futex waits and thirty loop wake-ups per warm turn, a streaming agent posting one item per
token and the actor thread waking for each. A shard's own work is on its thread anyway (its cells' handlers, their
inline storage), so its loop can run there too: nothing crosses a thread, and a whole burst of tokens is taken in
one go.

How it runs, on the actor's thread only:
* ``fileno()`` is the loop's own selector (an epoll descriptor is readable while any socket it watches is ready):
  Thespian watches it beside the mailbox (ThespianWatch), so network I/O of the loop wakes the actor as mail does.
  Work from other threads (``asyncio.to_thread``, a plugin's worker) ends in ``call_soon_threadsafe``, whose wake-up
  pipe is one of those sockets.
* ``step()`` runs the loop until nothing is ready (at most MAX_PASSES passes, each polling its sockets without
  waiting); the actor calls it after every message it handles, then drains what was posted. What a handler
  submits starts in the step after it.
* ``next_timer()`` is when the loop's earliest timer is due (an ``asyncio.sleep``, an HTTP timeout): the actor sets
  a Thespian wakeup for it, so the loop's timers fire though no mail comes.

The interface is the threaded bridge's (``submit``, ``call``, ``post``, ``drain``, ``loop``), so the code on it
does not change, with one rule more: nothing may block the actor thread waiting for the loop (``future.result()``
on a submitted coroutine would wait for a step that cannot come); ``run_sync`` runs a coroutine to its end instead.
A coroutine that blocks (a sync call on the loop) holds up the actor's mail too, as it would hold up a threaded
loop's cells; the shard's loop monitor and the watchdog's pings see it either way.

What this needs of CPython's private event-loop internals (a pass, the ready queue, the timer heap, the selector)
is in runtime/loop_stepping.py, with the versions it was checked against; the start-up self-test checks it.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import threading
from typing import Any, Awaitable, Optional

from runtime import loop_stepping
from supervision.bridge import reporting

log = logging.getLogger("gateway.bridge")

MAX_PASSES = 64   # loop passes per step: past them the actor takes its mail and steps again (a wakeup of 0 s)


def _nothing() -> None:
    """Posted from another thread: wakes the loop's selector, so the actor steps and drains."""


class Submitted:
    """What ``submit`` returns: the task, with a ``cancel`` that lets it start first.

    A task made and cancelled before the loop's next step (a turn started and /stop in the same run of a shard's
    cells) would be cancelled before its coroutine ran a line: its own ``except CancelledError`` (a session's
    AgentCancelled) would never run, and whoever waits for that would wait for ever. On the threaded bridge the
    task has always started by the time a cancel crosses the thread; here the cancel is queued behind the task's
    first step, which keeps that order."""

    def __init__(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task):
        self._loop, self.task = loop, task

    def cancel(self) -> bool:
        if self.task.done():
            return False
        self._loop.call_soon(self.task.cancel)
        return True

    def done(self) -> bool:
        return self.task.done()


class SteppedBridge:
    steps_on_actor_thread = True

    def __init__(self, name: str = "bridge"):
        self.name = name
        self.loop = asyncio.new_event_loop()
        self._owner = threading.get_ident()
        loop_stepping.adopt(self.loop)   # this thread's async generators are finalised by this loop
        self._items: collections.deque = collections.deque()
        self._closed = False
        self.busy = False   # the last step ended with callbacks still ready (MAX_PASSES reached)

    def fileno(self) -> int:
        return loop_stepping.selector_fileno(self.loop)

    def submit(self, coro: Awaitable, tag: Any = None) -> "Submitted":
        """Run ``coro`` on the loop from the next step. With a tag, its outcome comes back as a ``TaskDone``."""
        return Submitted(self.loop, self.loop.create_task(reporting(coro, tag, self.post)))

    def call(self, fn, *args) -> None:
        if threading.get_ident() == self._owner:
            self.loop.call_soon(fn, *args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def post(self, item: Any) -> None:
        self._items.append(item)
        if threading.get_ident() != self._owner and not self._closed:
            self.loop.call_soon_threadsafe(_nothing)

    def drain(self) -> list:
        items = list(self._items)
        self._items.clear()
        return items

    def has_items(self) -> bool:
        return bool(self._items)

    def has_work(self) -> bool:
        """Something to do at once: items to drain, or callbacks ready (a handler submitted work since the last step,
        or the last step stopped at MAX_PASSES)."""
        return bool(self._items) or self.busy or loop_stepping.has_ready(self.loop)

    def step(self) -> None:
        """Run what is ready, and what that makes ready, up to MAX_PASSES loop passes. Never waits.

        A pass is CPython's ``_run_once``, entered as ``run_forever`` enters it but without its setting up and
        tearing down around every pass (runtime/loop_stepping.py)."""
        if self._closed or self.loop.is_running():
            return
        self.busy = loop_stepping.run_passes(self.loop, self._owner, MAX_PASSES)

    def next_timer(self) -> Optional[float]:
        """Seconds until the loop's earliest timer is due, or None without one."""
        return loop_stepping.next_timer(self.loop)

    def run_sync(self, coro: Awaitable, timeout: float):
        """Run a short coroutine to its end on this thread (other tasks of the loop run meanwhile)."""
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))

    def close(self, timeout: float = 2.0) -> None:
        if self._closed:
            return
        self._closed = True
        tasks = [task for task in asyncio.all_tasks(self.loop) if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            try:
                self.loop.run_until_complete(asyncio.wait(tasks, timeout=timeout))
            except Exception:  # noqa: BLE001 - on the way out
                pass
        self.loop.close()
