"""The conformance harness for the LINE adapter: the in-process fake LINE (tests/fakes/line), which signs and POSTs
webhooks to the adapter's webhook server and serves the Messaging API the adapter sends through.

The suite names its chats ("ops-1a2b3c4d"); on LINE a 1:1 chat is the user, so each chat name becomes a user id
(``U`` and 32 hex digits made from the name) and the user argument plays no part. The adapter listens on port 0 (a
port picked free here could be taken by the other worker's daemon first): its webhook URL is read from ``status``
before the first message, and read again whenever a delivery finds the port closed (a restarted adapter listens on
a new one). LINE redelivers a webhook not answered 2xx; the fake here does so more often and sooner, so a slow
restart on a loaded machine does not lose the message on the fake's side. A handle is a webhook delivery's id;
"acknowledged" is a 2xx answer to it.

The adapter's table leaves ``use_reply_tokens`` at its default (off): every answer is a push under its retry key,
the send the delivery case holds (tests/adapters/test_line.py covers reply tokens). Its ``public_url`` is an
https:// origin nothing listens at (LINE takes HTTPS URLs only): the fake fetches a sent file's URL path from the
webhook URL's origin instead when the chat is looked at (``sent_files``: the fake's ``view``).
"""
from __future__ import annotations


from actors.messages import Source
from tests.actor_system import wait_for
from tests.adapters.server_harness import ServerHarness
from tests.fakes.line import DEFAULT_ACCESS_TOKEN, DEFAULT_CHANNEL_SECRET, FakeLine

SEND_METHODS = ("push", "reply")
PUBLIC_URL = "https://line-gateway.invalid"   # what the files' URLs name; the fake fetches from the webhook's origin


class LineHarness(ServerHarness):
    not_applicable = {
        "freeze": ("LINE calls the adapter's webhook server: no inbound connection of its own to freeze; its "
                   "loop's liveness tick is tested in tests/actors/adapters/test_liveness.py"),
    }
    adapter_type = "line"
    adapter_name = "line"
    adapter_kind = "LineAdapter"
    text_limit = 5000

    state_name = "line.json"
    send_method = "push"

    def make_server(self):
        server = FakeLine(port=self.port, state_file=self.state_file, webhook_url=self.url, retries=10,
                          retry_delays=[0.5, 1.0, 2.0], answer_timeout=5.0)
        server.url_source = self.served_url
        return server

    def adapter_toml(self, extra: str = "") -> str:
        # Paced faster than the platform row (the suite's chats send a handful each); the wait after a 429 (LINE
        # names none) just over the 0.4 s the flood test's fake holds the chat banned.
        return (self.table_head() +
                f'channel_secret = "{DEFAULT_CHANNEL_SECRET}"\nchannel_access_token = "{DEFAULT_ACCESS_TOKEN}"\n'
                f'api_base_url = "{self.server.base_url}"\ndata_base_url = "{self.server.base_url}"\n'
                f'webhook_port = 0\nrate_limit_wait_s = 0.5\npublic_url = "{PUBLIC_URL}"\n'
                f'pacing = {{ per_chat_ops_per_s = 4.0, per_chat_burst = 3 }}\n' + extra)

    def webhook_ready(self) -> None:
        if self.server.webhook_url is None:
            self.server.webhook_url = wait_for(self.served_url, 60, 0.2, "the webhook URL in status")

    # -- inbound
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        self.webhook_ready()
        return self.server.inject_text(self.server.user(chat), text)

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        self.webhook_ready()
        return self.server.inject_file(self.server.user(chat), data)    # a LINE image message carries no text

    def platform_message_id(self, handle: str) -> str:
        return self.server.webhook(handle)["events"][0]["message"]["id"]

    def replay(self, handle: str) -> str:
        return self.server.redeliver(handle)

    def inject_malformed(self) -> tuple[str, str]:
        self.webhook_ready()
        event = self.server.message_event(self.server.user("malformed"), {"type": "text", "text": "x"})
        del event["source"]
        return self.server.deliver([event]), "no user, group or room source"

    def acknowledged(self, handle: str) -> bool:
        return self.server.webhook(handle)["state"] == "acked"

    def source(self, chat: str, user: str = "alice") -> Source:
        user_id = self.server.user(chat)
        return Source(platform=self.adapter_name, chat_id=user_id, chat_type="dm", user_id=user_id)

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": m["id"], "text": m["text"], "deleted": False}
                for m in self.server.messages(self.server.user(chat)) if m["type"] == "text"]

    def sent_files(self, chat: str) -> list[dict]:
        """The bot's image, video and audio messages, each as the bytes the fake fetched from its URL (an image is
        what LINE shows inline: a photo)."""
        self.webhook_ready()
        kinds = {"image": "photo", "video": "video", "audio": "audio"}
        return [{"message_id": m["id"], "kind": kinds[m["type"]], "sha256": m["fetched"]["originalContentUrl"]["sha256"]}
                for m in self.server.view(self.server.user(chat))]

    def attempts(self, chat: str, op: str) -> list[dict]:
        if op != "send":
            return []
        calls = [o for method in SEND_METHODS for o in self.server.ops(self.server.user(chat), method)]
        return [{"at": o["at"], "status": o["status"]} for o in sorted(calls, key=lambda o: o["at"])]

    def script_floods(self, count: int, retry_after: float) -> None:
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after, methods=SEND_METHODS)

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return self.server.stats()["retry_after_violations"]


HARNESS = LineHarness
