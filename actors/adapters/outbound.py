"""The pure parts of an adapter's outbound side: error classification, retry decisions, per-chat lanes.

They need no actor and no platform, so they are tested on their own (tests/adapters/test_base_units.py).
"""
from __future__ import annotations

import asyncio
import collections
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import aiohttp

from actors.adapters.errors import (FloodError, FormattingError, MessageNotFoundError, PermanentError,
                                    RetryableError, TooLongError)
from storage import StorageBusy, StorageFull, StorageUnavailable
from common.backoff import backoff_s  # noqa: F401 - adapters take it from here


def classify_error(exc: BaseException) -> tuple[str, float]:
    """(error kind, retry_after seconds) for an exception raised by a platform client."""
    retry_after = float(getattr(exc, "retry_after", None) or 0.0)
    for cls, kind in ((FloodError, "flood"), (RetryableError, "retryable"), (TooLongError, "too_long"),
                      (FormattingError, "formatting"), (MessageNotFoundError, "not_found"),
                      (PermanentError, "permanent")):
        if isinstance(exc, cls):
            return kind, retry_after
    # A full disk is transient for us: the same write succeeds once space is freed (retried with backoff, and the
    # platform is not acknowledged meanwhile, so nothing is lost). So is a database that cannot be reached (a host
    # cut off from PostgreSQL): the store reconnects at its next transaction.
    if isinstance(exc, (OSError, asyncio.TimeoutError, aiohttp.ClientError, StorageBusy, StorageFull,
                        StorageUnavailable)):
        return "retryable", 0.0
    return "permanent", 0.0


@dataclass(frozen=True)
class RetryPolicy:
    max_floods: int = 5            # 429s waited out per operation
    max_failures: int = 4          # other retryable failures per operation
    base_s: float = 0.2
    cap_s: float = 5.0
    default_flood_s: float = 1.0   # a 429 that names no retry_after


def after_failure(action: str, kind: str, retry_after: float, floods: int, failures: int,
                  policy: RetryPolicy) -> tuple[str, float]:
    """What to do once an attempt failed: ("done", 0) the goal is reached anyway, ("flood", s) block the chat for s
    and retry, ("retry", s) sleep s and retry, ("fail", 0) answer the error."""
    if kind == "not_modified" and action == "edit":
        return "done", 0.0
    if action in ("typing", "react"):
        return "fail", 0.0             # a hint, stale by the time a retry could go
    if kind == "flood" and floods < policy.max_floods:
        return "flood", retry_after if retry_after > 0 else policy.default_flood_s
    if kind == "retryable" and failures < policy.max_failures:
        return "retry", max(retry_after, backoff_s(failures + 1, policy.base_s, policy.cap_s))
    return "fail", 0.0


class ChatLanes:
    """One FIFO lane per chat on an asyncio loop: a chat's items run one at a time in submission order, chats run
    side by side. ``run(item)`` must handle its own errors. Call every method on the loop thread."""

    def __init__(self, run: Callable[[Any], Awaitable[None]]):
        self._run = run
        self._queues: dict[str, collections.deque] = {}
        self._tasks: dict[str, asyncio.Task] = {}

    def submit(self, chat: str, item: Any) -> None:
        self._queues.setdefault(chat, collections.deque()).append(item)
        if chat not in self._tasks:
            self._tasks[chat] = asyncio.get_running_loop().create_task(self._drain(chat))

    def busy(self, chat: str) -> bool:
        return chat in self._tasks

    def cancel(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()

    async def _drain(self, chat: str) -> None:
        queue = self._queues[chat]
        try:
            while queue:
                try:
                    await self._run(queue.popleft())
                except Exception:  # noqa: BLE001 - run() broke its promise; the chat's next items still go
                    logging.getLogger("gateway.adapters").exception("lane %s: an item failed", chat)
        finally:
            # No await between the last check of the queue and here: a submit() cannot slip in unnoticed.
            del self._tasks[chat]
            if not queue:
                self._queues.pop(chat, None)
