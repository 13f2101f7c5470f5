"""Webhooks as LINE sends them to a channel's webhook URL ("Receive messages (webhook)", "Verify webhook
signature").

A delivery is one ``POST`` of ``{"destination": the bot's user id, "events": [...]}``, ``Content-Type:
application/json``, signed in ``X-Line-Signature`` (base64 of HMAC-SHA256 of the body bytes, keyed with the channel
secret). LINE waits ``answer_timeout`` for a 2xx; without one (a status, a refused connection, a timeout), and with
the channel's webhook redelivery on, it sends the same events again later, each with ``deliveryContext.isRedelivery``
true and its ``webhookEventId`` unchanged (the spacing is LINE's own: here ``retry_delays``). Each delivery is a
record in ``state["webhooks"]``: ``acked`` once a 2xx came, ``given_up`` after the last retry.

After a refused connection the fake asks ``url_source()`` (if set, in a thread) for the URL again: a gateway whose
adapter restarted may listen on a new port (tests bind port 0).
"""
from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import hmac
import json
import time
from typing import Callable, Optional

import aiohttp


def sign(secret: str, body: bytes) -> str:
    return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()


class WebhookMethods:
    """Mixin for FakeLine: needs ``channel_secret``, ``bot_user``, ``limits`` and the FakeServer state."""

    webhook_url: Optional[str] = None
    url_source: Optional[Callable[[], Optional[str]]] = None

    def body_of(self, events: list, redelivery: bool = False) -> bytes:
        events = copy.deepcopy(events)
        for event in events:
            event["deliveryContext"] = {"isRedelivery": redelivery}
        return json.dumps({"destination": self.bot_user, "events": events}, ensure_ascii=False).encode()

    def deliver(self, events: list, *, body: Optional[bytes] = None, signature: Optional[str] = None) -> str:
        """Queue one delivery of ``events`` (or of ``body`` as given, under ``signature``) and start it; returns
        its id."""
        with self.mutate() as state:
            delivery_id = f"wh{state['next_webhook']}"
            state["next_webhook"] += 1
            state["webhooks"].append({"id": delivery_id, "events": events, "forged": body is not None,
                                      "body": body.decode() if body is not None else None, "signature": signature,
                                      "attempts": [], "state": "pending"})
        self._loop.call_soon_threadsafe(self._spawn, self._deliver(delivery_id))
        return delivery_id

    def redeliver(self, delivery_id: str) -> str:
        """The same events again, as LINE's redelivery sends them: a new delivery record."""
        return self.deliver(self.webhook(delivery_id)["events"])

    def webhook(self, delivery_id: str) -> dict:
        return self.read(lambda s: next(w for w in s["webhooks"] if w["id"] == delivery_id))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, delivery_id: str) -> None:
        record = self.webhook(delivery_id)
        delays = list(self.limits["retry_delays"])
        redelivery = any(self._seen_before(e) for e in record["events"])
        for attempt in range(1 + int(self.limits["retries"])):
            if record["forged"]:
                body, signature = record["body"].encode(), record["signature"]
            else:
                body = self.body_of(record["events"], redelivery=redelivery or attempt > 0)
                signature = sign(self.channel_secret, body)
            status, failure, started = None, None, time.time()
            url = self.webhook_url
            if url is None:
                failure = "no webhook URL"
            else:
                try:
                    async with self._client().post(
                            url, data=body, headers={"Content-Type": "application/json",
                                                     **({"X-Line-Signature": signature} if signature else {})},
                            timeout=aiohttp.ClientTimeout(total=self.limits["answer_timeout"])) as resp:
                        status = resp.status
                        await resp.read()
                except asyncio.TimeoutError:
                    failure = "timeout"
                except aiohttp.ClientError as exc:
                    failure = f"connection: {type(exc).__name__}"
            ok = status is not None and 200 <= status < 300
            with self.mutate() as state:
                live = next(w for w in state["webhooks"] if w["id"] == delivery_id)
                live["attempts"].append({"at": started, "status": status, "failure": failure})
                state["stats"]["webhook_attempts"] += 1
                if ok:
                    live["state"] = "acked"
                    return
                if record["forged"]:   # a request LINE never sent: tried once, its answer kept
                    live["state"] = "refused" if status else "failed"
                    return
            if failure and failure.startswith("connection") and self.url_source is not None:
                fresh = await asyncio.to_thread(self.url_source)
                if fresh:
                    self.webhook_url = fresh
            if failure != "timeout":
                await asyncio.sleep(delays[min(attempt, len(delays) - 1)] if delays else 0.0)
        with self.mutate() as state:
            next(w for w in state["webhooks"] if w["id"] == delivery_id)["state"] = "given_up"

    def _seen_before(self, event: dict) -> bool:
        """An event some earlier delivery carried: this one is a redelivery of it."""
        key = event.get("webhookEventId")
        return self.read(lambda s: sum(1 for w in s["webhooks"] for e in w["events"]
                                       if e.get("webhookEventId") == key)) > 1

    def _client(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession()
        return self._http

    async def close_webhooks(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.close()
