"""Event callbacks as the open platform sends them to an app's Request URL (事件订阅: "接收事件", "加密策略").

A delivery is one ``POST`` of one event in the 2.0 schema, ``Content-Type: application/json``. With an Encrypt Key
the body is ``{"encrypt": base64(iv | AES-256-CBC(json))}`` keyed with the SHA-256 of the key, and the request
carries ``X-Lark-Request-Timestamp`` (seconds), ``X-Lark-Request-Nonce`` and ``X-Lark-Signature`` (hex SHA-256 of
timestamp + nonce + encrypt key + body); without one the body is the plain JSON. The platform waits
``answer_timeout`` for a 200; without one it sends the same event again later with the same ``event_id`` (the
spacing is the platform's own: here ``retry_delays``), ``retries`` times (tests/fakes/deliveries.py). Each delivery
is a record in ``state["callbacks"]``.
"""
from __future__ import annotations

import json
import secrets
import time
from typing import Optional

from actors.adapters.feishu.crypto import encrypt, signature
from tests.fakes.deliveries import RetriedDeliveries


def sealed(encrypt_key: str, event: dict, timestamp: Optional[int] = None) -> tuple[bytes, dict]:
    """The body and headers of one callback carrying ``event`` (encrypted and signed where there is a key)."""
    plain = json.dumps(event, ensure_ascii=False).encode()
    if not encrypt_key:
        return plain, {"Content-Type": "application/json"}
    body = json.dumps({"encrypt": encrypt(encrypt_key, plain)}).encode()
    stamp, nonce = str(int(time.time()) if timestamp is None else timestamp), secrets.token_hex(8)
    return body, {"Content-Type": "application/json", "X-Lark-Request-Timestamp": stamp,
                  "X-Lark-Request-Nonce": nonce, "X-Lark-Signature": signature(encrypt_key, stamp, nonce, body)}


class CallbackMethods(RetriedDeliveries):
    """Mixin for FakeFeishu: needs ``encrypt_key``, ``limits`` and the FakeServer state."""

    records_key, counter_key, id_prefix, attempts_stat = "callbacks", "next_callback", "cb", "callback_attempts"

    @property
    def callback_url(self) -> Optional[str]:
        return self.push_url

    @callback_url.setter
    def callback_url(self, url: Optional[str]) -> None:
        self.push_url = url

    def deliver(self, event: dict, *, body: Optional[bytes] = None, headers: Optional[dict] = None) -> str:
        """Queue one delivery of ``event`` (or of ``body`` under ``headers`` as given) and start it; returns its
        id."""
        return self.queue_delivery({"event": event, "forged": body is not None,
                                    "body": body.decode() if body is not None else None, "headers": headers})

    def request_of(self, record: dict, attempt: int) -> tuple[bytes, dict]:
        if record["forged"]:
            return record["body"].encode(), dict(record["headers"] or {})
        return sealed(self.encrypt_key, record["event"])

    def redeliver(self, delivery_id: str) -> str:
        """The same event again (same event_id), as the platform's retry sends it: a new delivery record."""
        return self.deliver(self.callback(delivery_id)["event"])

    def callback(self, delivery_id: str) -> dict:
        return self.delivery(delivery_id)
