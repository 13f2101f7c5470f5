"""An app's access token, made from its credentials by the platform's token endpoint and kept: made once, made again
``margin_s`` before it expires or at once when an answer calls it invalid (``forget``), never once per request; one
request at a time makes it, so a burst of sends after its expiry makes one. Feishu's tenant access token, DingTalk's
access token. In memory only: a new life of the adapter makes a new one."""
from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, Optional

TOKEN_MARGIN_S = 300.0       # a token is made again this long before it expires


class AppToken:
    def __init__(self, make: Callable[[], Awaitable[tuple[str, float]]], clock: Callable[[], float] = time.monotonic,
                 margin_s: float = TOKEN_MARGIN_S):
        """``make()`` asks the platform: (the token, its lifetime in seconds), or raises its refusal."""
        self._make, self._clock, self._margin_s = make, clock, margin_s
        self.value: Optional[str] = None
        self._expires_at = 0.0
        self._lock = asyncio.Lock()
        self.made = 0

    async def get(self) -> str:
        async with self._lock:
            if self.value is None or self._clock() >= self._expires_at - self._margin_s:
                value, lifetime = await self._make()
                self.value, self._expires_at = value, self._clock() + lifetime
                self.made += 1
            return self.value

    def forget(self) -> None:
        """The platform called the token invalid: the next ``get`` makes a new one."""
        self.value = None
