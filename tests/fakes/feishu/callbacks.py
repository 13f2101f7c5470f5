"""Event callbacks as the open platform sends them to an app's Request URL (事件订阅: "接收事件", "加密策略").

A delivery is one ``POST`` of one event in the 2.0 schema, ``Content-Type: application/json``. With an Encrypt Key
the body is ``{"encrypt": base64(iv | AES-256-CBC(json))}`` keyed with the SHA-256 of the key, and the request
carries ``X-Lark-Request-Timestamp`` (seconds), ``X-Lark-Request-Nonce`` and ``X-Lark-Signature`` (hex SHA-256 of
timestamp + nonce + encrypt key + body); without one the body is the plain JSON. The platform waits
``answer_timeout`` for a 200; without one (a status, a refused connection, a timeout) it sends the same event again
later with the same ``event_id`` (the spacing is the platform's own: here ``retry_delays``), ``retries`` times.
Each delivery is a record in ``state["callbacks"]``: ``acked`` once a 200 came, ``given_up`` after the last retry;
a forged one (a body and headers given as they are) is tried once and its answer kept.

After a refused connection the fake asks ``url_source()`` (if set, in a thread) for the URL again: a gateway whose
adapter restarted may listen on a new port (tests bind port 0).
"""
from __future__ import annotations

import asyncio
import json
import secrets
import time
from typing import Callable, Optional

import aiohttp

from actors.adapters.feishu.crypto import encrypt, signature


def sealed(encrypt_key: str, event: dict, timestamp: Optional[int] = None) -> tuple[bytes, dict]:
    """The body and headers of one callback carrying ``event`` (encrypted and signed where there is a key)."""
    plain = json.dumps(event, ensure_ascii=False).encode()
    if not encrypt_key:
        return plain, {"Content-Type": "application/json"}
    body = json.dumps({"encrypt": encrypt(encrypt_key, plain)}).encode()
    stamp, nonce = str(int(time.time()) if timestamp is None else timestamp), secrets.token_hex(8)
    return body, {"Content-Type": "application/json", "X-Lark-Request-Timestamp": stamp,
                  "X-Lark-Request-Nonce": nonce, "X-Lark-Signature": signature(encrypt_key, stamp, nonce, body)}


class CallbackMethods:
    """Mixin for FakeFeishu: needs ``encrypt_key``, ``limits`` and the FakeServer state."""

    callback_url: Optional[str] = None
    url_source: Optional[Callable[[], Optional[str]]] = None

    def deliver(self, event: dict, *, body: Optional[bytes] = None, headers: Optional[dict] = None) -> str:
        """Queue one delivery of ``event`` (or of ``body`` under ``headers`` as given) and start it; returns its
        id."""
        with self.mutate() as state:
            delivery_id = f"cb{state['next_callback']}"
            state["next_callback"] += 1
            state["callbacks"].append({"id": delivery_id, "event": event, "forged": body is not None,
                                       "body": body.decode() if body is not None else None, "headers": headers,
                                       "attempts": [], "state": "pending"})
        self._loop.call_soon_threadsafe(self._spawn, self._deliver(delivery_id))
        return delivery_id

    def redeliver(self, delivery_id: str) -> str:
        """The same event again (same event_id), as the platform's retry sends it: a new delivery record."""
        return self.deliver(self.callback(delivery_id)["event"])

    def callback(self, delivery_id: str) -> dict:
        return self.read(lambda s: next(c for c in s["callbacks"] if c["id"] == delivery_id))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _post_once(self, body: bytes, headers: dict) -> tuple[Optional[int], Optional[str]]:
        if self.callback_url is None:
            return None, "no callback URL"
        try:
            async with self._client().post(self.callback_url, data=body, headers=headers,
                                           timeout=aiohttp.ClientTimeout(total=self.limits["answer_timeout"])) as r:
                await r.read()
                return r.status, None
        except asyncio.TimeoutError:
            return None, "timeout"
        except aiohttp.ClientError as exc:
            return None, f"connection: {type(exc).__name__}"

    async def _deliver(self, delivery_id: str) -> None:
        record = self.callback(delivery_id)
        delays = list(self.limits["retry_delays"])
        for attempt in range(1 + int(self.limits["retries"])):
            if record["forged"]:
                body, headers = record["body"].encode(), dict(record["headers"] or {})
            else:
                body, headers = sealed(self.encrypt_key, record["event"])
            started = time.time()
            status, failure = await self._post_once(body, headers)
            with self.mutate() as state:
                live = next(c for c in state["callbacks"] if c["id"] == delivery_id)
                live["attempts"].append({"at": started, "status": status, "failure": failure})
                state["stats"]["callback_attempts"] += 1
                if status == 200:
                    live["state"] = "acked"
                    return
                if record["forged"]:   # a request the platform never sent: tried once, its answer kept
                    live["state"] = "refused" if status else "failed"
                    return
            if failure and failure.startswith("connection") and self.url_source is not None:
                fresh = await asyncio.to_thread(self.url_source)
                if fresh:
                    self.callback_url = fresh
            if failure != "timeout":
                await asyncio.sleep(delays[min(attempt, len(delays) - 1)] if delays else 0.0)
        with self.mutate() as state:
            next(c for c in state["callbacks"] if c["id"] == delivery_id)["state"] = "given_up"

    def _client(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession()
        return self._http

    async def close_callbacks(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.close()
