"""Reads of a worker host's database for an adapter's loop: the web chat's history of a chat whose session lives on
a worker's shard (docs/distribution.md), which the leader's database does not hold.

The loop asks (``read``); the actor thread sends the ``StoreRead`` to the key's shard (only the actor thread calls
Thespian, docs/design.md §4); the shard's ``StoreReadResult`` comes back to the actor thread (``answered``) and is
handed to the waiting future on the loop.

State (its fields are its own): the reads in flight, token -> the loop's future, at most MAX_IN_FLIGHT (a flood of
page reloads is refused past it, not queued without bound). Lifecycle: ``read`` runs on the adapter's loop,
``answered`` on its actor thread. What survives kill -9: nothing, and nothing needs to: a page whose read was lost
is told to retry, and asks again.
"""
from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from typing import Any, Callable

from actors.messages import StoreRead, StoreReadResult

MAX_IN_FLIGHT = 256


class RemoteReadFailed(Exception):
    pass


@dataclass(frozen=True)
class ReadWanted:
    """Loop -> actor thread: send ``read`` to the shard at ``address``."""
    address: Any
    read: StoreRead


class RemoteReads:
    def __init__(self, post: Callable[[Any], None], call_on_loop: Callable):
        self.post, self.call_on_loop = post, call_on_loop
        self.waiting: dict[str, asyncio.Future] = {}
        self._tokens = itertools.count(1)

    async def read(self, address, action: str, args: tuple, timeout: float) -> dict:
        """On the loop: the shard's result; RemoteReadFailed (with why) if it had none or did not answer in time."""
        if len(self.waiting) >= MAX_IN_FLIGHT:
            raise RemoteReadFailed(f"{MAX_IN_FLIGHT} reads of other hosts already in flight")
        token = f"read-{next(self._tokens)}"
        future = asyncio.get_running_loop().create_future()
        self.waiting[token] = future
        try:
            self.post(ReadWanted(address, StoreRead(action, args, token)))
            answer = await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise RemoteReadFailed(f"no answer within {timeout:g}s") from None
        finally:
            self.waiting.pop(token, None)
        if answer.error is not None:
            raise RemoteReadFailed(answer.error)
        return answer.result

    def answered(self, answer: StoreReadResult) -> None:
        """On the actor thread: hand the answer to the loop (one that came after its read gave up is dropped)."""
        self.call_on_loop(self._resolve, answer)

    def _resolve(self, answer: StoreReadResult) -> None:
        future = self.waiting.get(answer.token)
        if future is not None and not future.done():
            future.set_result(answer)
