"""The async bridge on its own: coroutines on the loop thread, results handed back in order through the socket."""
from __future__ import annotations

import asyncio
import select
import threading
import time

import pytest

from supervision.bridge import AsyncBridge, TaskDone

pytestmark = pytest.mark.timeout(20)


def wait_readable(bridge: AsyncBridge, timeout: float = 5.0) -> None:
    ready, _, _ = select.select([bridge.fileno()], [], [], timeout)
    assert ready, "the bridge never signalled its socket"


def collect(bridge: AsyncBridge, count: int) -> list:
    items = []
    while len(items) < count:
        wait_readable(bridge)
        items.extend(bridge.drain())
    return items


def test_results_come_back_tagged_with_errors_kept_apart():
    bridge = AsyncBridge("t")
    try:
        async def fail():
            raise ValueError("boom")
        bridge.submit(asyncio.sleep(0.01, result=42), tag="ok")
        bridge.submit(fail(), tag="bad")
        items = {i.tag: i for i in collect(bridge, 2)}
        assert items["ok"] == TaskDone("ok", 42)
        assert isinstance(items["bad"].error, ValueError)
    finally:
        bridge.close()


def test_posted_items_arrive_in_order_and_no_wakeup_is_lost():
    bridge = AsyncBridge("t")
    try:
        def producer(name):
            for i in range(5000):
                bridge.post((name, i))
        threads = [threading.Thread(target=producer, args=(name,)) for name in "ab"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        items = collect(bridge, 10000)
        assert len(items) == 10000
        for name in "ab":
            assert [i for n, i in items if n == name] == list(range(5000)), "one producer's items stay in order"
    finally:
        bridge.close()


class SlowReader:
    """The bridge's wakeup socket with a pause before each read: posts land while a drain is under way."""

    def __init__(self, sock):
        self.sock = sock

    def fileno(self):
        return self.sock.fileno()

    def recv(self, size):
        time.sleep(0.0005)
        return self.sock.recv(size)

    def close(self):
        self.sock.close()


def test_items_posted_while_the_actor_drains_are_all_announced():
    """Posts racing drains: whatever interleaving, every item is drained, each after a wakeup the actor saw."""
    bridge = AsyncBridge("t")
    bridge._reader = SlowReader(bridge._reader)
    try:
        count = 2000

        def producer():
            for i in range(count):
                bridge.post(i)
                time.sleep(0.0001)
        thread = threading.Thread(target=producer)
        thread.start()
        items = collect(bridge, count)   # waits for a wakeup before every drain: a lost one times out
        thread.join()
        assert items == list(range(count))
    finally:
        bridge.close()


def test_many_posts_before_a_drain_cost_one_wakeup():
    bridge = AsyncBridge("t")
    try:
        for i in range(1000):
            bridge.post(i)
        wait_readable(bridge)
        assert bridge._reader.recv(4096) == b"\0", "one byte announces every item posted since the last drain"
        assert bridge.drain() == list(range(1000))
        bridge.post("next")
        wait_readable(bridge)
        assert bridge.drain() == ["next"]
    finally:
        bridge.close()


def test_cancelled_task_reports_cancellation_and_close_stops_the_thread():
    bridge = AsyncBridge("t")
    future = bridge.submit(asyncio.sleep(30), tag="long")
    future.cancel()
    [item] = collect(bridge, 1)
    assert item.tag == "long" and item.cancelled
    bridge.close()
    assert not bridge._thread.is_alive()
