"""Webhooks as LINE sends them to a channel's webhook URL ("Receive messages (webhook)", "Verify webhook
signature").

A delivery is one ``POST`` of ``{"destination": the bot's user id, "events": [...]}``, ``Content-Type:
application/json``, signed in ``X-Line-Signature`` (base64 of HMAC-SHA256 of the body bytes, keyed with the channel
secret). LINE waits ``answer_timeout`` for a 2xx; without one (a status, a refused connection, a timeout), and with
the channel's webhook redelivery on, it sends the same events again later, each with ``deliveryContext.isRedelivery``
true and its ``webhookEventId`` unchanged (the spacing is LINE's own: here ``retry_delays``). Each delivery is a
record in ``state["webhooks"]`` (the retries and the records: tests/fakes/deliveries.py).
"""
from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
from typing import Optional

from tests.fakes.deliveries import RetriedDeliveries


def sign(secret: str, body: bytes) -> str:
    return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()


class WebhookMethods(RetriedDeliveries):
    """Mixin for FakeLine: needs ``channel_secret``, ``bot_user``, ``limits`` and the FakeServer state."""

    records_key, counter_key, id_prefix, attempts_stat = "webhooks", "next_webhook", "wh", "webhook_attempts"

    @property
    def webhook_url(self) -> Optional[str]:
        return self.push_url

    @webhook_url.setter
    def webhook_url(self, url: Optional[str]) -> None:
        self.push_url = url

    def body_of(self, events: list, redelivery: bool = False) -> bytes:
        events = copy.deepcopy(events)
        for event in events:
            event["deliveryContext"] = {"isRedelivery": redelivery}
        return json.dumps({"destination": self.bot_user, "events": events}, ensure_ascii=False).encode()

    def deliver(self, events: list, *, body: Optional[bytes] = None, signature: Optional[str] = None) -> str:
        """Queue one delivery of ``events`` (or of ``body`` as given, under ``signature``) and start it; returns
        its id."""
        return self.queue_delivery({"events": events, "forged": body is not None,
                                    "body": body.decode() if body is not None else None, "signature": signature})

    def request_of(self, record: dict, attempt: int) -> tuple[bytes, dict]:
        if record["forged"]:
            body, signature = record["body"].encode(), record["signature"]
        else:
            redelivery = attempt > 0 or any(self._seen_before(e) for e in record["events"])
            body = self.body_of(record["events"], redelivery=redelivery)
            signature = sign(self.channel_secret, body)
        return body, {"Content-Type": "application/json", **({"X-Line-Signature": signature} if signature else {})}

    def redeliver(self, delivery_id: str) -> str:
        """The same events again, as LINE's redelivery sends them: a new delivery record."""
        return self.deliver(self.webhook(delivery_id)["events"])

    def webhook(self, delivery_id: str) -> dict:
        return self.delivery(delivery_id)

    def _seen_before(self, event: dict) -> bool:
        """An event some earlier delivery carried: this one is a redelivery of it."""
        key = event.get("webhookEventId")
        return self.read(lambda s: sum(1 for w in s["webhooks"] for e in w["events"]
                                       if e.get("webhookEventId") == key)) > 1
