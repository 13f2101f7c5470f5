"""The aiohttp session of a platform's API client: made on first use (on the loop that uses it: an aiohttp session
binds to the running loop), owned and closed by the client unless the caller gave one.

A base class of the API clients (telegram/api.py, fakeplatform_api.py); its fields are its own, the clients call
``self.session()`` and inherit ``close`` and the ``async with`` form.
"""
from __future__ import annotations

from typing import Optional

import aiohttp


class HttpSession:
    def __init__(self, session: Optional[aiohttp.ClientSession] = None, request_timeout: float = 30.0):
        self._session, self._owns_session = session, session is None
        self.request_timeout = request_timeout   # seconds a request may take beyond any long-poll wait it asks for

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None
