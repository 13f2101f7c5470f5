"""The conformance harness for the WhatsApp adapter: the in-process fake Cloud API (tests/fakes/whatsapp), which
signs and POSTs webhooks to the adapter's webhook server and serves the Graph API the adapter sends through.

The suite names its chats ("ops-1a2b3c4d"); on WhatsApp a chat is a user's WhatsApp id (digits), so each chat name
maps to a stable number, a user the fake knows and whose 24-hour window is open (they wrote just now). The adapter
listens on port 0 (a port picked free here could be taken by the other worker's daemon first): its webhook URL is
read from ``status`` and checked with Meta's hub.challenge handshake before the first message, and read again
whenever a delivery finds the port closed (a restarted adapter listens on a new one). Meta retries an unanswered
webhook for days; the fake here retries often enough that a slow restart on a loaded machine loses nothing on its
side. A handle is a webhook delivery's id; "acknowledged" is a 200 answer to it.
"""
from __future__ import annotations

import hashlib
import time

from actors.messages import Source
from tests.actor_system import wait_for
from tests.adapters.server_harness import ServerHarness
from tests.fakes.whatsapp import (DEFAULT_APP_SECRET, DEFAULT_PHONE_NUMBER_ID, DEFAULT_TOKEN, DEFAULT_VERIFY_TOKEN,
                                  FakeWhatsApp)
from tests.fakes.whatsapp.webhooks import envelope


def wa_id(chat: str) -> str:
    """A chat name as a WhatsApp id: digits, the same for the same name."""
    return "1555" + str(int(hashlib.sha256(chat.encode()).hexdigest()[:12], 16) % 10 ** 9).zfill(9)


class WhatsAppHarness(ServerHarness):
    not_applicable = {
        "freeze": ("Meta calls the adapter's webhook server: no inbound connection of its own to freeze; its "
                   "loop's liveness tick is tested in tests/actors/adapters/test_liveness.py"),
    }
    adapter_type = "whatsapp"
    adapter_name = "whatsapp"
    adapter_kind = "WhatsAppAdapter"
    text_limit = 4096

    state_name = "whatsapp.json"
    send_method = "messages"

    def make_server(self):
        server = FakeWhatsApp(port=self.port, state_file=self.state_file, webhook_url=self.url, retries=12,
                              retry_delays=[0.5, 1.0, 2.0])
        server.url_source = self.served_url
        return server

    def adapter_toml(self) -> str:
        # Paced faster than WhatsApp's one message every 6 s per user (the suite's chats send a handful each); the
        # wait after a 130429 just over the 0.4 s the flood test's fake holds the user banned.
        return (self.table_head() +
                f'phone_number_id = "{DEFAULT_PHONE_NUMBER_ID}"\naccess_token = "{DEFAULT_TOKEN}"\n'
                f'app_secret = "{DEFAULT_APP_SECRET}"\nverify_token = "{DEFAULT_VERIFY_TOKEN}"\n'
                f'base_url = "{self.server.base_url}"\nwebhook_port = 0\nrate_limit_wait_s = 0.5\n'
                f'pacing = {{ per_chat_ops_per_s = 4.0, per_chat_burst = 3 }}\n')

    def _checked_url(self) -> None:
        if self.server.webhook_url is None:
            url = wait_for(self.served_url, 60, 0.2, "the webhook URL in status")
            wait_for(lambda: self.server.verify_url(url)["verified"], 30, 0.2, "the handshake to pass")

    # -- inbound
    def user(self, chat: str) -> str:
        user = wa_id(chat)
        self.server.add_user(user, last_inbound=time.time())
        return user

    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        self._checked_url()
        return self.server.inject_text(self.user(chat), text)

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        self._checked_url()
        return self.server.inject_media(self.user(chat), "image", data, "image/png", caption)

    def platform_message_id(self, handle: str) -> str:
        return self.server.delivery(handle)["wamid"]

    def replay(self, handle: str) -> str:
        return self.server.redeliver(handle)

    def inject_malformed(self) -> tuple[str, str]:
        self._checked_url()
        user = self.user("malformed")
        message = {"from": user, "timestamp": str(int(time.time())), "type": "text", "text": {"body": "x"}}
        body = envelope("0", DEFAULT_PHONE_NUMBER_ID, "15550000000", {"messages": [message]})
        return self.server.deliver("text", body, None, user), "no message id (wamid)"

    def acknowledged(self, handle: str) -> bool:
        return self.server.delivery(handle)["state"] == "acked"

    def source(self, chat: str, user: str = "alice") -> Source:
        number = self.user(chat)
        return Source(platform=self.adapter_name, chat_id=number, chat_type="dm", user_id=number)

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": m["wamid"], "text": m["text"], "deleted": False}
                for m in self.server.messages(wa_id(chat)) if m["kind"] == "text"]

    def sent_files(self, chat: str) -> list[dict]:
        """The bot's media messages; an image is what WhatsApp shows inline (a photo)."""
        return [{"message_id": m["wamid"], "kind": "photo" if m["kind"] == "image" else "document",
                 "sha256": m["sha256"]} for m in self.server.messages(wa_id(chat)) if m["kind"] != "text"]

    def attempts(self, chat: str, op: str) -> list[dict]:
        if op != "send":
            return []
        return [{"at": o["at"], "status": o["status"]} for o in self.server.ops(wa_id(chat))]

    def bot_reactions(self, chat: str, handle: str) -> list[list[str]]:
        return self.server.reactions(wa_id(chat), self.platform_message_id(handle))

    def script_floods(self, count: int, retry_after: float) -> None:
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after)

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return self.server.stats()["retry_after_violations"]


HARNESS = WhatsAppHarness
