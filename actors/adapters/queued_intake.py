"""The intake of a streaming adapter whose connection's reader queues what it receives (IRC, XMPP): the next batch
from that queue, or the connection's failure once it closed. A pure helper of the loop: no actor, no storage."""
from __future__ import annotations

import asyncio
from typing import Callable


async def next_batch(queue: asyncio.Queue, closed: asyncio.Event, failure: Callable[[], BaseException],
                     limit: int) -> list:
    """At least one item and at most ``limit`` of ``queue``, waiting for the first; raises ``failure()`` once
    ``closed`` is set while nothing is queued (what was queued before the close is taken first)."""
    taking = asyncio.ensure_future(queue.get())
    ended = asyncio.ensure_future(closed.wait())
    try:
        await asyncio.wait({taking, ended}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        got = taking.done()
        ended.cancel()
        if not got:
            taking.cancel()
    if not got:
        raise failure()
    batch = [taking.result()]
    while len(batch) < limit and not queue.empty():
        batch.append(queue.get_nowait())
    return batch
