"""The per-chat budgets of one adapter, and the platform's 429 bans they must honour across the adapter's restarts.

Used by the base adapter on its bridge loop only. In memory, each chat has a ``ChatBudget`` on the monotonic clock.
Across a kill -9 of the adapter or of the whole daemon, two things bind the next life:

* a 429 ban still running: written to storage (``Store.pacing``, wall-clock end) when it is received, read back at
  start and converted to the monotonic clock; the first operation in that chat waits it out;
* the budget itself: never written. Every chat's bucket counts as spent at the moment the adapter started (see
  ``ChatBudget``), which no previous life's sending can make too generous, at no cost per operation.
"""
from __future__ import annotations

import asyncio
import time
from typing import Optional

from actors.adapters.pacing import ChatBudget, PlatformPacing, on_monotonic_clock


class ChatBudgets:
    """``started_at`` (monotonic) None: no earlier life to honour (an adapter driven without a store, in tests)."""

    def __init__(self, started_at: Optional[float] = None):
        self.started_at = started_at
        self._budgets: dict[str, ChatBudget] = {}   # kept for the actor's life: a few bytes per chat
        self._app_budget: Optional[ChatBudget] = None   # the app-wide one (app_turn), at its first use
        self._bans_at_start: dict[str, float] = {}  # chat id -> wall-clock end, until the chat's budget exists
        self._loaded = None if started_at is None else asyncio.Event()

    @property
    def loaded(self) -> bool:
        return self._loaded is None or self._loaded.is_set()

    async def ready(self) -> None:
        """Return once the bans of earlier lives are known: no operation may go before."""
        if self._loaded is not None:
            await self._loaded.wait()

    async def load(self, store, adapter_id: str) -> int:
        """Read the bans of ``adapter_id`` that still run; returns how many."""
        self._bans_at_start = await store.pacing.active(adapter_id, time.time())
        if self._loaded is not None:
            self._loaded.set()
        return len(self._bans_at_start)

    def of(self, chat_id: str, chat_type: str, pacing: PlatformPacing) -> ChatBudget:
        """The chat's budget, created at its first operation (sized by that operation's chat type)."""
        budget = self._budgets.get(chat_id)
        if budget is None:
            now = asyncio.get_running_loop().time()
            budget = ChatBudget.for_platform(pacing, chat_type, now, spent_at=self.started_at)
            banned_until = self._bans_at_start.pop(chat_id, None)
            if banned_until is not None:
                budget.flood(on_monotonic_clock(banned_until, time.time(), now))
            self._budgets[chat_id] = budget
        return budget

    async def app_turn(self, pacing: PlatformPacing) -> None:
        """Wait for the app-wide budget (pacing ``app_edit_ops_per_s``: calls the platform limits per app, not per
        chat, which no chat's lane can see alone), then spend it; at once where the pacing has none. Spent at
        start, like the chats' budgets: the previous life may have used it up just before dying."""
        rate = pacing.app_edit_ops_per_s
        if rate is None:
            return
        loop = asyncio.get_running_loop()
        if self._app_budget is None:
            self._app_budget = ChatBudget(rate, max(1, pacing.app_edit_burst), loop.time(), spent_at=self.started_at)
        while (wait := self._app_budget.wait_time(loop.time())) > 0:
            await asyncio.sleep(wait)
        self._app_budget.consume(loop.time())

    @staticmethod
    async def record_ban(store, adapter_id: str, chat_id: str, seconds: float) -> None:
        """Commit a ban of ``seconds`` from now; the caller has already blocked the chat's budget in memory."""
        await store.pacing.ban(adapter_id, chat_id, time.time() + seconds)
