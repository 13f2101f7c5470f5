"""Webhooks as Meta sends them to a WhatsApp app's Callback URL (developers.facebook.com: Webhooks, Getting Started;
WhatsApp Cloud API > Webhooks > messages).

* ``verify_url(url)``: the check Meta makes when the Callback URL is saved: ``GET ?hub.mode=subscribe&
  hub.verify_token=<the app's verify token>&hub.challenge=<random>``; the URL passes if it answers 200 with the
  challenge as its body.
* An event: ``POST`` of the JSON body with ``X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body, keyed with the
  app secret>``. Meta treats any answer but 200 (or none within ``answer_timeout``) as undelivered and sends the
  same body again, with decreasing frequency, for up to 7 days; the fake retries ``retries`` times after
  ``retry_delays`` (its own spacing: a test cannot wait hours).
* Each delivery is a record in ``state["deliveries"]`` (its attempts: when, status or failure); ``acked`` once a
  200 came, ``given_up`` after the last retry.

After a refused connection the fake asks ``url_source()`` (if set, in a thread) for the URL again: a gateway whose
adapter restarted may listen on a new port (tests bind port 0).
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import time
from typing import Callable, Optional
from urllib.parse import urlencode

import aiohttp


def signature(body: bytes, app_secret: str) -> str:
    """The X-Hub-Signature-256 header Meta sends (written here from Meta's description, not shared with the
    adapter)."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def envelope(waba_id: str, phone_number_id: str, display_number: str, value: dict) -> dict:
    """One ``messages`` change for the phone number, as the webhook's JSON body."""
    return {"object": "whatsapp_business_account",
            "entry": [{"id": waba_id, "changes": [{"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": display_number, "phone_number_id": phone_number_id},
                **value}}]}]}


class WebhookMethods:
    """Mixin for FakeWhatsApp: needs ``app_secret``, ``verify_token``, ``limits`` and the FakeServer state."""

    webhook_url: Optional[str] = None
    url_source: Optional[Callable[[], Optional[str]]] = None

    def deliver(self, kind: str, body: dict, wamid: Optional[str], user: str,
                headers: Optional[dict] = None) -> str:
        """Queue one delivery of ``body`` (signed, unless ``headers`` are given) and start it; returns its id."""
        raw = json.dumps(body, separators=(",", ":")).encode()
        headers = headers if headers is not None else {"X-Hub-Signature-256": signature(raw, self.app_secret)}
        with self.mutate() as state:
            delivery_id = f"wh{state['next_delivery']}"
            state["next_delivery"] += 1
            state["deliveries"].append({"id": delivery_id, "kind": kind, "wamid": wamid, "user": user,
                                        "body": raw.decode(), "headers": headers, "attempts": [],
                                        "state": "pending"})
        self._loop.call_soon_threadsafe(self._spawn, self._deliver(delivery_id))
        return delivery_id

    def redeliver(self, delivery_id: str) -> str:
        """The same body again, as Meta's retry of an unacknowledged webhook is: a new delivery record."""
        record = self.delivery(delivery_id)
        return self.deliver(record["kind"], json.loads(record["body"]), record["wamid"], record["user"],
                            headers=record["headers"])

    def delivery(self, delivery_id: str) -> dict:
        return self.read(lambda s: next(d for d in s["deliveries"] if d["id"] == delivery_id))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, delivery_id: str) -> None:
        record = self.delivery(delivery_id)
        delays = list(self.limits["retry_delays"])
        for attempt in range(1 + int(self.limits["retries"])):
            url = self.webhook_url
            status, failure, started = None, None, time.time()
            if url is None:
                failure = "no webhook URL"
            else:
                status, failure = await self._post(url, record["body"].encode(), record["headers"],
                                                   self.limits["answer_timeout"])
            with self.mutate() as state:
                live = next(d for d in state["deliveries"] if d["id"] == delivery_id)
                live["attempts"].append({"at": started, "status": status, "failure": failure})
                state["stats"]["webhook_attempts"] += 1
                state["stats"]["webhook_retries"] += 1 if attempt else 0
                if status == 200:
                    live["state"] = "acked"
                    return
            if failure and failure.startswith("connection") and self.url_source is not None:
                fresh = await asyncio.to_thread(self.url_source)
                if fresh:
                    self.webhook_url = fresh
            await asyncio.sleep(delays[min(attempt, len(delays) - 1)] if delays else 0.0)
        with self.mutate() as state:
            next(d for d in state["deliveries"] if d["id"] == delivery_id)["state"] = "given_up"

    async def _post(self, url: str, body: bytes, headers: dict, timeout: float) -> tuple[Optional[int],
                                                                                         Optional[str]]:
        try:
            async with self._client().post(url, data=body, headers={"Content-Type": "application/json", **headers},
                                           timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                await resp.read()
                return resp.status, None
        except asyncio.TimeoutError:
            return None, "timeout"
        except aiohttp.ClientError as exc:
            return None, f"connection: {type(exc).__name__}"

    def post(self, body: bytes, headers: dict, url: Optional[str] = None) -> Optional[int]:
        """One request as given (no retries, no record), to forge what Meta never sends: its status."""
        coro = self._post(url or self.webhook_url, body, headers, 30.0)
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(40)[0]

    async def verify_url_async(self, url: str, verify_token: Optional[str] = None) -> dict:
        challenge = secrets.token_hex(8)
        query = {"hub.mode": "subscribe", "hub.verify_token": verify_token or self.verify_token,
                 "hub.challenge": challenge}
        try:
            async with self._client().get(url + "?" + urlencode(query),
                                          timeout=aiohttp.ClientTimeout(total=10)) as resp:
                status, answer = resp.status, await resp.text()
        except (asyncio.TimeoutError, aiohttp.ClientError) as exc:
            status, answer = None, type(exc).__name__
        verified = status == 200 and answer == challenge
        if verified and verify_token is None:
            self.webhook_url = url
        return {"verified": verified, "status": status, "answer": answer[:200]}

    def verify_url(self, url: str, verify_token: Optional[str] = None) -> dict:
        """The Callback URL check; on success (with the right token) webhooks go to ``url``."""
        return asyncio.run_coroutine_threadsafe(self.verify_url_async(url, verify_token), self._loop).result(30)

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
