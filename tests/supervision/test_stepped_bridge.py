"""The stepped bridge on its own: the loop runs only when stepped, on the caller's thread, and says when to step."""
from __future__ import annotations

import asyncio
import select
import threading
import time

import pytest

from supervision.bridge import TaskDone
from supervision.stepped_bridge import SteppedBridge

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
def bridge():
    b = SteppedBridge("t")
    yield b
    b.close()


def step_until(bridge: SteppedBridge, count: int, timeout: float = 5.0) -> list:
    """Step as an actor would: when the selector is readable or the loop's next timer is due."""
    items, deadline = [], time.monotonic() + timeout
    while True:
        bridge.step()
        items += bridge.drain()
        if len(items) >= count:
            return items
        left = deadline - time.monotonic()
        assert left > 0, f"only {items} came back"
        wait = bridge.next_timer()
        select.select([bridge.fileno()], [], [], min(left, wait if wait is not None else left))


def test_nothing_runs_until_stepped_and_a_step_runs_a_whole_stream(bridge):
    ran = []

    async def stream():
        for n in range(50):
            ran.append(n)
            bridge.post(n)
            await asyncio.sleep(0)
        return "done"

    bridge.submit(stream(), tag="s")
    assert ran == [] and bridge.drain() == []
    bridge.step()
    assert bridge.drain() == [*range(50), TaskDone("s", "done")], "one step did not run the stream to its end"


def test_timers_are_reported_and_fire_when_stepped_after_them(bridge):
    bridge.submit(asyncio.sleep(0.2, result="late"), tag="sleep")
    bridge.step()
    wait = bridge.next_timer()
    assert wait is not None and 0.1 < wait <= 0.2
    started = time.monotonic()
    assert step_until(bridge, 1) == [TaskDone("sleep", "late")]
    assert time.monotonic() - started < 2.0, "the timer fired only when the wait gave up, not when it was due"


def test_work_from_another_thread_makes_the_selector_readable(bridge):
    async def in_a_thread():
        return await asyncio.to_thread(lambda: threading.get_ident())

    bridge.submit(in_a_thread(), tag="thread")
    [done] = step_until(bridge, 1)
    assert done.tag == "thread" and done.result != threading.get_ident()
    threading.Thread(target=bridge.post, args=("from a thread",)).start()
    ready, _, _ = select.select([bridge.fileno()], [], [], 5)
    assert ready, "a post from another thread did not wake the selector"
    bridge.step()
    assert bridge.drain() == ["from a thread"]


def test_errors_and_cancellation_come_back_tagged(bridge):
    async def fail():
        raise ValueError("boom")

    bridge.submit(fail(), tag="bad")
    task = bridge.submit(asyncio.sleep(30), tag="slow")
    bridge.step()
    task.cancel()
    bridge.step()
    items = {i.tag: i for i in bridge.drain()}
    assert isinstance(items["bad"].error, ValueError)
    assert items["slow"].cancelled


def test_a_task_cancelled_before_any_step_still_runs_its_own_cancellation(bridge):
    seen = []

    async def turn():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")   # a session posts AgentCancelled here
            raise

    bridge.submit(turn()).cancel()   # a turn and its /stop in one run of the cells
    bridge.step()
    assert seen == ["cancelled"]


def test_run_sync_returns_the_result_and_close_cancels_what_runs(bridge):
    assert bridge.run_sync(asyncio.sleep(0.01, result=7), timeout=5) == 7
    cancelled = []

    async def forever():
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    bridge.submit(forever())
    bridge.step()
    bridge.close()
    assert cancelled == [True]
