"""The async bridge on its own: coroutines on the loop thread, results handed back in order through the socket."""
from __future__ import annotations

import asyncio
import select
import threading

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


def test_cancelled_task_reports_cancellation_and_close_stops_the_thread():
    bridge = AsyncBridge("t")
    future = bridge.submit(asyncio.sleep(30), tag="long")
    future.cancel()
    [item] = collect(bridge, 1)
    assert item.tag == "long" and item.cancelled
    bridge.close()
    assert not bridge._thread.is_alive()
