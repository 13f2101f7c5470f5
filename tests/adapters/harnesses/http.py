"""The conformance harness of the HTTP adapter's signed webhook side."""
from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from actors.adapters.registry import pacing_for
from actors.messages import Source


class HttpApiHarness:
    """The http adapter's webhook side: the adapter is the server, the "platform" is a signed webhook sender
    (tests/http/fakes.py) plus a callback receiver in this process, which records what the bot sent."""
    adapter_type = "http"
    adapter_name = "http"
    adapter_kind = "HttpApiAdapter"
    text_limit = pacing_for("http").text_limit
    secret = "harness-webhook-secret"

    def __init__(self, workdir: Path):
        from tests.actor_system import free_port
        from tests.http.fakes import CallbackReceiver, WebhookSender
        self.port = free_port()
        self.receiver = CallbackReceiver(self.secret)
        self.sender = WebhookSender(f"http://127.0.0.1:{self.port}/webhook", self.secret)

    def start(self) -> None:
        self.receiver.start()

    def stop(self) -> None:
        self.receiver.stop()

    def drop_connection(self) -> None:
        self.receiver.stop()
        self.receiver.start()

    def hold_next_send(self, chat: str) -> None:
        self.receiver.hold_next_send(chat)

    def send_held(self) -> bool:
        return self.receiver.holding.is_set()

    def release_send(self) -> None:
        self.receiver.clear_faults()     # the held answer goes, and a hold not used yet is dropped

    def adapter_toml(self) -> str:
        return (f'[adapters.{self.adapter_name}]\ntype = "{self.adapter_type}"\nport = {self.port}\n'
                f'hmac_secret = "{self.secret}"\ncallback_url = "{self.receiver.url}"\n')

    # -- inbound: a handle is one delivery of a body
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        import uuid
        return self.sender.deliver({"conversation_id": chat, "user_id": user, "message_id": uuid.uuid4().hex,
                                    "text": text})

    def platform_message_id(self, handle: str) -> str:
        body = self.sender.bodies[handle]
        return f"{body['conversation_id']}/{body['message_id']}"

    def replay(self, handle: str) -> str:
        return self.sender.deliver(self.sender.bodies[handle])

    def inject_malformed(self) -> tuple[str, str]:
        body = {"conversation_id": None, "user_id": "mallory", "message_id": "m-bad", "text": 42}
        return self.sender.deliver(body), "conversation_id must be a non-empty string"

    def acknowledged(self, handle: str) -> bool:
        return self.sender.status(handle) is not None

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=chat, chat_type="dm", user_id=user, user_name=user)

    # -- outbound: what the callback receiver got
    def sent(self, chat: str) -> list[dict]:
        return [{k: m[k] for k in ("message_id", "text", "deleted")} for m in self.receiver.messages(chat)]

    def attempts(self, chat: str, op: str) -> list[dict]:
        return self.receiver.attempts(chat, op)

    def sent_files(self, chat: str) -> list[dict]:
        found = []
        for payload in self.receiver.received:
            for part in payload.get("content") or () if payload.get("conversation_id") == chat else ():
                url = (part.get("image_url") or {}).get("url") or (part.get("file") or {}).get("file_data", "")
                found.append({"message_id": payload["message_id"],
                              "kind": "photo" if part["type"] == "image_url" else "document",
                              "sha256": hashlib.sha256(base64.b64decode(url.split(",", 1)[1])).hexdigest()})
        return found

    def script_floods(self, count: int, retry_after: float) -> None:
        self.receiver.script_floods(count, retry_after)

    def clear_faults(self) -> None:
        self.receiver.clear_faults()

    def flood_violations(self) -> int:
        return self.receiver.flood_violations()


HARNESS = HttpApiHarness
