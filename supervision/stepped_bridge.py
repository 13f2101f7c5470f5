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
"""
from __future__ import annotations

import asyncio
import collections
import logging
import sys
import threading
from asyncio import events
from typing import Any, Awaitable, Optional

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
        # Async generators (an agent's stream is one) are finalised by the loop that runs them: the hooks
        # ``run_forever`` would set around each run are set once, for this thread, which runs only this loop.
        sys.set_asyncgen_hooks(firstiter=self.loop._asyncgen_firstiter_hook,
                               finalizer=self.loop._asyncgen_finalizer_hook)
        self._items: collections.deque = collections.deque()
        self._closed = False
        self.busy = False   # the last step ended with callbacks still ready (MAX_PASSES reached)

    def fileno(self) -> int:
        return self.loop._selector.fileno()   # CPython's selector loop: the epoll (or poll) object it waits on

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
        return bool(self._items) or self.busy or bool(self.loop._ready)

    def step(self) -> None:
        """Run what is ready, and what that makes ready, up to MAX_PASSES loop passes. Never waits.

        A pass is CPython's ``_run_once``, entered the way ``run_forever`` enters it (this loop marked running on
        this thread) but without ``run_forever``'s setting up and tearing down around every pass: a streaming
        agent makes a pass per token, and that bookkeeping cost more than the pass."""
        loop = self.loop
        if self._closed or loop.is_running():
            return
        events._set_running_loop(loop)
        loop._thread_id = self._owner
        try:
            if not loop._ready:            # CPython's callbacks due now: with one, a pass polls without waiting
                loop.call_soon(_nothing)
            for _ in range(MAX_PASSES):
                loop._run_once()
                if not loop._ready:
                    self.busy = False
                    return
            self.busy = True
        finally:
            loop._thread_id = None
            events._set_running_loop(None)

    def next_timer(self) -> Optional[float]:
        """Seconds until the loop's earliest timer is due, or None without one."""
        scheduled = self.loop._scheduled   # CPython's heap of timer handles (a cancelled one may lead: one wakeup)
        if not scheduled:
            return None
        return max(0.0, scheduled[0].when() - self.loop.time())

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
