"""Pushes a fake platform makes to a served adapter (LINE's webhooks, Feishu's event callbacks), retried the way
such platforms retry: a delivery not answered 2xx within ``answer_timeout`` (a status, a refused connection, a
timeout) is sent again after ``retry_delays``, ``retries`` times. Each delivery is a record in
``state[records_key]``: ``acked`` once a 2xx came, ``given_up`` after the last retry; a forged one (a request the
platform never sent, given as it is) is tried once and its answer kept (``refused`` or ``failed``).

After a refused connection the fake asks ``url_source()`` (if set, in a thread) for the URL again: a gateway whose
adapter restarted may listen on a new port (tests bind port 0).
"""
from __future__ import annotations

import asyncio
import time
from typing import Callable, Optional

import aiohttp


class RetriedDeliveries:
    """Mixin for a FakeServer with ``limits`` (``answer_timeout``, ``retries``, ``retry_delays``), ``_tasks`` (a set)
    and ``_http`` (None at first). A subclass names its records and builds each attempt's request."""

    records_key = "deliveries"       # state[records_key]: the delivery records
    counter_key = "next_delivery"    # state[counter_key]: the next record's number
    id_prefix = "d"
    attempts_stat = "delivery_attempts"
    push_url: Optional[str] = None
    url_source: Optional[Callable[[], Optional[str]]] = None

    def request_of(self, record: dict, attempt: int) -> tuple[bytes, dict]:
        """The body and headers of one attempt at ``record`` (a forged record's are its own)."""
        raise NotImplementedError

    def queue_delivery(self, record: dict) -> str:
        """Keep ``record`` (plus its id, attempts and state) and start delivering it; returns its id."""
        with self.mutate() as state:
            delivery_id = f"{self.id_prefix}{state[self.counter_key]}"
            state[self.counter_key] += 1
            state[self.records_key].append({"id": delivery_id, **record, "attempts": [], "state": "pending"})
        self._loop.call_soon_threadsafe(self._spawn, self._deliver(delivery_id))
        return delivery_id

    def delivery(self, delivery_id: str) -> dict:
        return self.read(lambda s: next(r for r in s[self.records_key] if r["id"] == delivery_id))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _post_once(self, body: bytes, headers: dict) -> tuple[Optional[int], Optional[str]]:
        if self.push_url is None:
            return None, "no URL to deliver to"
        try:
            async with self._client().post(self.push_url, data=body, headers=headers,
                                           timeout=aiohttp.ClientTimeout(total=self.limits["answer_timeout"])) as r:
                await r.read()
                return r.status, None
        except asyncio.TimeoutError:
            return None, "timeout"
        except aiohttp.ClientError as exc:
            return None, f"connection: {type(exc).__name__}"

    async def _deliver(self, delivery_id: str) -> None:
        record = self.delivery(delivery_id)
        delays = list(self.limits["retry_delays"])
        for attempt in range(1 + int(self.limits["retries"])):
            body, headers = self.request_of(record, attempt)
            started = time.time()
            status, failure = await self._post_once(body, headers)
            with self.mutate() as state:
                live = next(r for r in state[self.records_key] if r["id"] == delivery_id)
                live["attempts"].append({"at": started, "status": status, "failure": failure})
                state["stats"][self.attempts_stat] += 1
                if status is not None and 200 <= status < 300:
                    live["state"] = "acked"
                    return
                if record.get("forged"):   # a request the platform never sent: tried once, its answer kept
                    live["state"] = "refused" if status else "failed"
                    return
            if failure and failure.startswith("connection") and self.url_source is not None:
                fresh = await asyncio.to_thread(self.url_source)
                if fresh:
                    self.push_url = fresh
            if failure != "timeout":
                await asyncio.sleep(delays[min(attempt, len(delays) - 1)] if delays else 0.0)
        with self.mutate() as state:
            next(r for r in state[self.records_key] if r["id"] == delivery_id)["state"] = "given_up"

    def _client(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession()
        return self._http

    async def close_deliveries(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.close()
