"""The conformance harness for the Google Chat adapter: the in-process fake Google Chat (tests/fakes/googlechat),
which signs interaction events and POSTs them to the adapter's endpoint, and serves the Chat API, the token endpoint
and the published signing keys the adapter uses.

The suite names its chats ("ops-1a2b3c4d"); each becomes the DM space of a user of that name with the app. The
adapter listens on port 0 (a port picked free here could be taken by the other worker's daemon first): its endpoint
URL is read from ``status`` before the first message, and again whenever a delivery finds the port closed (a
restarted adapter listens on a new one). Google Chat posts an event once; the fake here posts it again while it is
not answered 2xx, so a restart under test loses nothing on the fake's side (docs/googlechat.md says what a real
outage loses). A handle is a delivery's id; "acknowledged" is a 2xx answer to it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from actors.messages import Source
from tests.actor_system import wait_for
from tests.adapters.server_harness import ServerHarness
from tests.fakes.googlechat import DEFAULT_AUDIENCE, FakeGoogleChat, service_account_file

METHODS = {"send": "create", "edit": "patch", "delete": "delete"}


class GoogleChatHarness(ServerHarness):
    not_applicable = {
        "freeze": ("Google Chat calls the adapter's endpoint: no inbound connection of its own to freeze; its "
                   "loop's liveness tick is tested in tests/actors/adapters/test_liveness.py"),
    }
    adapter_type = "googlechat"
    adapter_name = "googlechat"
    adapter_kind = "GoogleChatAdapter"
    text_limit = 4096

    state_name = "googlechat.json"
    send_method = "create"

    def __init__(self, workdir: Path):
        super().__init__(workdir)
        self.url: Optional[str] = None
        self.key_file = workdir / "googlechat-service-account.json"

    def make_server(self):
        server = FakeGoogleChat(port=self.port, state_file=self.state_file, webhook_url=self.url, retries=10,
                                retry_delays=[0.5, 1.0, 2.0], answer_timeout=5.0)
        server.url_source = self.served_url
        return server

    def adapter_toml(self, extra: str = "") -> str:
        # Paced faster than the platform row (the suite's chats send a handful each, far from the fake's 60 a
        # minute); the wait after a 429 (Google names none) just over the 0.4 s the flood test's fake bans a space.
        base = self.server.base_url
        self.key_file.write_text(service_account_file(self.server.token_url))
        return (self.table_head() +
                f'audience = "{DEFAULT_AUDIENCE}"\nservice_account_file = "{self.key_file}"\n'
                f'certs_url = "{base}/certs/x509"\napi_base_url = "{base}"\noauth_url = "{self.server.token_url}"\n'
                f'webhook_port = 0\nrate_limit_wait_s = 0.5\n'
                f'pacing = {{ per_chat_ops_per_s = 4.0, per_chat_burst = 3 }}\n' + extra)

    def webhook_ready(self) -> None:
        if self.server.webhook_url is None:
            self.server.webhook_url = wait_for(self.served_url, 60, 0.2, "the endpoint URL in status")

    # -- inbound
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        self.webhook_ready()
        return self.server.inject_text(self.server.dm(chat), text, chat)

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        self.webhook_ready()
        return self.server.inject_file(self.server.dm(chat), data, caption, chat)

    def platform_message_id(self, handle: str) -> str:
        return self.server.event_of(handle)["message"]["name"]

    def replay(self, handle: str) -> str:
        return self.server.redeliver(handle)

    def inject_malformed(self) -> tuple[str, str]:
        self.webhook_ready()
        event = self.server.message_event(self.server.dm("malformed"), "x")
        del event["message"]["sender"], event["user"]
        return self.server.deliver_event(event), "no sender (users/*)"

    def acknowledged(self, handle: str) -> bool:
        return self.server.delivery(handle)["state"] == "acked"

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=self.server.dm(chat), chat_type="dm",
                      user_id=self.server.user(chat))

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": m["name"], "text": m["text"], "deleted": m["deleted"]}
                for m in self.server.messages(self.server.dm(chat))]

    def attempts(self, chat: str, op: str) -> list[dict]:
        method = METHODS.get(op)
        if method is None:
            return []
        return [{"at": o["at"], "status": o["status"]} for o in self.server.ops(self.server.dm(chat), method)]

    def script_floods(self, count: int, retry_after: float) -> None:
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after, methods=tuple(METHODS.values()))

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        stats = self.server.stats()
        return stats["retry_after_violations"] + stats["pace_violations"]


HARNESS = GoogleChatHarness
