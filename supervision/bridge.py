"""The async bridge: long I/O for an actor without blocking its mailbox.

Thespian transmits what an actor sends only after ``receiveMessage`` returns, so a handler must never wait on the
network. An actor that does long I/O (a long poll, a websocket, a streaming model call) runs it as coroutines on an
asyncio loop in one background thread of its own process. The rules, kept everywhere:

1. Only the actor's own thread calls Thespian (send, createActor, wakeupAfter). The loop thread never does.
2. The loop thread hands results to the actor by appending to a deque and writing one byte to a socketpair; the
   actor returns ``ThespianWatch([fd])`` from *every* handler (the base actor does this), so Thespian wakes it with a
   ``WatchMessage`` when the byte arrives, and the actor drains the deque on its own thread.
3. Actors with a bridge are leaves: forking a process that has threads is unsafe, so they create no children.

A loop that dies (SystemExit or KeyboardInterrupt escaping a task or a callback: asyncio lets both out of
``run_forever``; any other exception out of it) would leave the actor answering mail with nothing serving its
connections. The loop thread posts ``LoopDied`` instead of ending in silence, and the actor crashes on it (let it
crash: its supervisor starts a fresh one). A loop that is alive but stuck is the watchdog's: a process actor with
this bridge answers its ``Ping`` through the loop (supervision/actor.py), so a stuck loop misses its pings.

Ordering: items are drained in the order they were posted. One wakeup byte announces any number of items: a post
writes one only when none is pending since the last drain (a streaming model posts an event per token, and every
byte written hands the GIL to the actor thread and back). A wakeup byte may arrive with nothing left to drain (the
previous drain took the item): harmless.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import socket
import threading
import traceback
from dataclasses import dataclass
from typing import Any, Awaitable, Optional

log = logging.getLogger("gateway.bridge")


@dataclass(frozen=True)
class TaskDone:
    """Posted when a coroutine submitted with a tag finishes: exactly one of result / error is meaningful."""
    tag: Any
    result: Any = None
    error: Optional[BaseException] = None
    cancelled: bool = False


@dataclass(frozen=True)
class LoopDied:
    """Posted by the loop thread as its last act when the loop stopped without ``close``: what stopped it."""
    reason: str
    trace: str = ""


async def reporting(coro: Awaitable, tag: Any, post) -> Any:
    """Await ``coro``; with a tag, ``post`` its outcome as a ``TaskDone`` (both bridges' ``submit``)."""
    try:
        result = await coro
    except asyncio.CancelledError:
        if tag is not None:
            post(TaskDone(tag, cancelled=True))
        raise
    except BaseException as exc:  # noqa: BLE001 - handed to the actor, which decides
        if tag is not None:
            post(TaskDone(tag, error=exc))
        else:
            log.exception("bridge task failed")
        return None
    if tag is not None:
        post(TaskDone(tag, result=result))
    return result


class AsyncBridge:
    steps_on_actor_thread = False   # its loop has a thread of its own (supervision/stepped_bridge.py: one that has not)

    def __init__(self, name: str = "bridge"):
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._items: collections.deque = collections.deque()
        self._wakeup_pending = False     # a byte is on its way that no drain has read yet
        self.loop = asyncio.new_event_loop()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"{name}-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        except BaseException as exc:  # noqa: BLE001 - the loop is dead: the actor must hear why, and crash
            if not self._closed:
                self.post(LoopDied(f"{type(exc).__name__}: {exc}", "".join(traceback.format_exception(exc))))
            return
        if not self._closed:
            self.post(LoopDied("the loop stopped"))

    # ----------------------------------------------------------------------------------- called from the actor
    def fileno(self) -> int:
        return self._reader.fileno()

    def submit(self, coro: Awaitable, tag: Any = None) -> concurrent.futures.Future:
        """Run ``coro`` on the loop. With a tag, its outcome comes back as a ``TaskDone`` item."""
        return asyncio.run_coroutine_threadsafe(reporting(coro, tag, self.post), self.loop)

    def call(self, fn, *args) -> None:
        """Run a plain callable on the loop thread (e.g. to cancel a task or feed a queue)."""
        self.loop.call_soon_threadsafe(fn, *args)

    def run_sync(self, coro: Awaitable, timeout: float):
        """Wait on the actor thread for a short coroutine run on the loop; TimeoutError past ``timeout`` (the
        coroutine may still finish later)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def drain(self) -> list:
        """Everything posted so far, in order. Reads the wakeup bytes, then clears the pending mark, then takes the
        items. In that order the mark is never left set with no byte on its way: a post that finds it set is
        appended before this drain takes the items, or announced by a byte this drain did not read."""
        try:
            while self._reader.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        self._wakeup_pending = False
        items = []
        while self._items:
            items.append(self._items.popleft())
        return items

    def close(self, timeout: float = 2.0) -> None:
        if self._closed:
            return
        self._closed = True

        def cancel_all():
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self.loop.call_later(0.05, self.loop.stop)
        try:
            self.loop.call_soon_threadsafe(cancel_all)
        except RuntimeError:
            pass
        self._thread.join(timeout)
        self._reader.close()
        self._writer.close()

    # ------------------------------------------------------------------------------- called from any thread
    def post(self, item: Any) -> None:
        self._items.append(item)
        if self._wakeup_pending:
            return   # appended before the drain that reads the pending byte takes the items
        self._wakeup_pending = True
        try:
            self._writer.send(b"\0")
        except (BlockingIOError, InterruptedError):
            pass  # the buffer is full of wakeups already: the actor will drain this item with them
        except OSError:
            if not self._closed:
                raise
