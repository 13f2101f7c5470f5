"""The conformance harness for the Teams adapter: the in-process fake Bot Connector (tests/fakes/teams), which signs
activities and POSTs them to the adapter's messaging endpoint, and serves the Connector REST API, the token endpoint,
the OpenID metadata and the signing keys the adapter uses.

The suite names its chats ("ops-1a2b3c4d"); each becomes the personal chat of a user of that name with the bot. The
adapter listens on port 0 (a port picked free here could be taken by the other worker's daemon first): its endpoint
URL is read from ``status`` before the first message, and again whenever a delivery finds the port closed (a
restarted adapter listens on a new one). The fake posts an activity again while it is not answered 2xx, as the
Connector does. A handle is a delivery's id; "acknowledged" is a 2xx answer to it.
"""
from __future__ import annotations

import hashlib

from actors.messages import Source
from tests.actor_system import wait_for
from tests.adapters.server_harness import ServerHarness
from tests.fakes.teams import DEFAULT_APP_ID, DEFAULT_PASSWORD, FakeTeams
from tests.fakes.teams.server import IMAGE_TYPES, image_bytes

METHODS = {"send": "send", "edit": "update", "delete": "delete"}


class TeamsHarness(ServerHarness):
    not_applicable = {
        "freeze": ("the Bot Connector calls the adapter's endpoint: no inbound connection of its own to freeze; its "
                   "loop's liveness tick is tested in tests/actors/adapters/test_liveness.py"),
    }
    adapter_type = "teams"
    adapter_name = "teams"
    adapter_kind = "TeamsAdapter"
    text_limit = 20000

    state_name = "teams.json"
    send_method = "send"
    # The Connector for a conversation no activity named one for (None: the fake's own). A test names one nobody
    # serves, so an answer that lands shows the adapter used the serviceUrl its activities taught it.
    default_service_url: str | None = None
    paced_as_the_platform = False   # True: the platform row's pacing, not the suite's faster one

    def make_server(self):
        server = FakeTeams(port=self.port, state_file=self.state_file, webhook_url=self.url, retries=10,
                           retry_delays=[0.5, 1.0, 2.0], answer_timeout=5.0)
        server.url_source = self.served_url
        return server

    def adapter_toml(self, extra: str = "") -> str:
        # Paced faster than the platform row (the suite's chats send a handful each, far from Teams' 7 a second);
        # the wait after a 429 that names none just over the 0.4 s the flood test's fake bans a conversation.
        base = self.server.base_url
        return (self.table_head() +
                f'app_id = "{DEFAULT_APP_ID}"\napp_password = "{DEFAULT_PASSWORD}"\n'
                f'oauth_url = "{self.server.token_url}"\nopenid_metadata_url = "{self.server.metadata_url}"\n'
                f'service_url = "{self.default_service_url or base + "/"}"\nallowed_service_urls = ["{base}/"]\n'
                f'webhook_port = 0\nrate_limit_wait_s = 0.5\n' +
                ('' if self.paced_as_the_platform else 'pacing = { per_chat_ops_per_s = 4.0, per_chat_burst = 3 }\n')
                + extra)

    def webhook_ready(self) -> None:
        if self.server.webhook_url is None:
            self.server.webhook_url = wait_for(self.served_url, 60, 0.2, "the endpoint URL in status")

    # -- inbound
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        self.webhook_ready()
        return self.server.inject_text(self.server.personal(chat), text, chat)

    def platform_message_id(self, handle: str) -> str:
        activity = self.server.activity_of(handle)
        return f"{activity['id']}@{activity['conversation']['id']}"

    def replay(self, handle: str) -> str:
        return self.server.redeliver(handle)

    def inject_malformed(self) -> tuple[str, str]:
        self.webhook_ready()
        activity = self.server.message_activity(self.server.personal("malformed"), "x")
        del activity["from"]
        return self.server.deliver_activity(activity), "no sender (from.id)"

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        self.webhook_ready()
        return self.server.inject_file(self.server.personal(chat), data, caption, chat)

    def sent_files(self, chat: str) -> list[dict]:
        """The bot's activities carrying an inline image (a photo: Teams shows it in the message)."""
        return [{"message_id": shown["id"], "kind": "photo", "sha256": hashlib.sha256(image_bytes(a)).hexdigest()}
                for shown in self.server.activities(self.server.personal(chat)) for a in shown["attachments"]
                if a.get("contentType") in IMAGE_TYPES]

    def acknowledged(self, handle: str) -> bool:
        return self.server.delivery(handle)["state"] == "acked"

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=self.server.personal(chat), chat_type="dm",
                      user_id=self.server.user(chat))

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": a["id"], "text": a["text"], "deleted": a["deleted"]}
                for a in self.server.activities(self.server.personal(chat))]

    def attempts(self, chat: str, op: str) -> list[dict]:
        method = METHODS.get(op)
        if method is None:
            return []
        # The Connector answers a created activity 201: the suite's "done" is 200.
        return [{"at": o["at"], "status": 200 if o["status"] == 201 else o["status"]}
                for o in self.server.ops(self.server.personal(chat), method)]

    def script_floods(self, count: int, retry_after: float) -> None:
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after, methods=tuple(METHODS.values()))

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        stats = self.server.stats()
        return stats["retry_after_violations"] + stats["pace_violations"]


HARNESS = TeamsHarness
