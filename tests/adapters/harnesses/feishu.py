"""The conformance harness for the Feishu / Lark adapter: the in-process fake open platform (tests/fakes/feishu),
which encrypts, signs and POSTs event callbacks to the adapter's callback server and serves the IM API the adapter
sends through.

The suite names its chats ("ops-1a2b3c4d"); each chat name is a user of its own with a one-to-one chat with the
bot, and ``source(chat).chat_id`` is that chat's id. The adapter listens on port 0 (a port picked free here could be
taken by the other worker's daemon first): its callback URL is read from ``status`` before the first message, and
again whenever a delivery finds the port closed (a restarted adapter listens on a new one). The platform redelivers
a callback not answered 200; the fake here does so more often and sooner, so a slow restart on a loaded machine
does not lose the message on the fake's side. A handle is a callback delivery's id; "acknowledged" is a 200 to it.

A variant (``FeishuLongConnectionHarness``, "feishu-long_connection") runs the app with ``inbound =
"long_connection"``: the same fake sends each event over the WebSocket the adapter opens, as protobuf frames, and
sends it again until the adapter answers its frame. It runs the cases whose outcome depends on how events arrive
(its ``conformance_cases``); everything the adapter sends is the same code as with callbacks, run by the type's own
harness. A handle is the fake's queued event; "acknowledged" is the adapter's answer frame to one of its deliveries.
"""
from __future__ import annotations


from actors.adapters.feishu.formatting import EMOJI_TYPES
from actors.messages import Source
from tests.actor_system import wait_for
from tests.adapters.server_harness import ServerHarness
from tests.fakes.feishu import (DEFAULT_APP_ID, DEFAULT_APP_SECRET, DEFAULT_ENCRYPT_KEY, DEFAULT_VERIFICATION_TOKEN,
                                FakeFeishu)

SEND_METHODS = ("create", "reply")
METHODS = {"edit": ("update",), "delete": ("recall",)}
EMOJI_BY_TYPE = {kind: emoji for emoji, kind in EMOJI_TYPES.items()}   # the platform's types, read back as emoji
MALFORMED_REASON = "chat_id must be an id"


class FeishuHarness(ServerHarness):
    not_applicable = {
        "freeze": ("the platform calls the adapter's callback server: no inbound connection of its own to freeze; "
                   "its loop's liveness tick is tested in tests/actors/adapters/test_liveness.py"),
    }
    adapter_type = "feishu"
    adapter_name = "feishu"
    adapter_kind = "FeishuAdapter"
    text_limit = 30000

    state_name = "feishu.json"
    send_method = "create"

    def make_server(self):
        server = FakeFeishu(port=self.port, state_file=self.state_file, callback_url=self.url, retries=10,
                            retry_delays=[0.5, 1.0, 2.0], answer_timeout=5.0)
        server.url_source = self.served_url
        return server

    def adapter_toml(self, extra: str = "") -> str:
        return self.app_table(f'encrypt_key = "{DEFAULT_ENCRYPT_KEY}"\n'
                              f'verification_token = "{DEFAULT_VERIFICATION_TOKEN}"\ncallback_port = 0\n' + extra)

    def app_table(self, intake: str) -> str:
        """The app's table: its credentials and the fake's address, then the lines of its intake."""
        return (self.table_head() + f'app_id = "{DEFAULT_APP_ID}"\napp_secret = "{DEFAULT_APP_SECRET}"\n'
                f'base_url = "{self.server.base_url}"\nrate_limit_wait_s = 0.5\n' + intake)

    def callback_ready(self) -> None:
        if self.server.callback_url is None:
            self.server.callback_url = wait_for(self.served_url, 60, 0.2, "the callback URL in status")

    # -- inbound
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        self.callback_ready()
        return self.server.inject_text(self.server.p2p_chat(chat), self.server.user(chat), text)

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        self.callback_ready()   # an image message carries no text
        return self.server.inject_image(self.server.p2p_chat(chat), self.server.user(chat), data)

    def platform_message_id(self, handle: str) -> str:
        return self.server.callback(handle)["event"]["event"]["message"]["message_id"]

    def replay(self, handle: str) -> str:
        return self.server.redeliver(handle)

    def inject_malformed(self) -> tuple[str, str]:
        self.callback_ready()
        return self.server.deliver(self.malformed_event()), MALFORMED_REASON

    def malformed_event(self) -> dict:
        """A message event without its chat (what the adapter logs: MALFORMED_REASON)."""
        event = self.server.message_event(self.server.p2p_chat("malformed"), self.server.user("malformed"), "text",
                                          {"text": "x"})
        del event["event"]["message"]["chat_id"]
        return event

    def acknowledged(self, handle: str) -> bool:
        return self.server.callback(handle)["state"] == "acked"

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=self.server.p2p_chat(chat), chat_type="dm",
                      user_id=self.server.user(chat))

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": m["id"], "text": m["text"], "deleted": m["deleted"]}
                for m in self.server.messages(self.server.p2p_chat(chat))]

    def sent_files(self, chat: str) -> list[dict]:
        """The bot's messages showing an upload; an image (alone or in a post) is what the platform shows inline."""
        uploads = self.server.read(lambda s: s["uploads"])
        return [{"message_id": m["id"], "kind": "photo" if uploads[m["file"]]["kind"] == "image" else "document",
                 "sha256": uploads[m["file"]]["sha256"]}
                for m in self.server.messages(self.server.p2p_chat(chat)) if m.get("file")]

    def bot_reactions(self, chat: str, handle: str) -> list[list[str]]:
        """What the bot's reactions on the user's message showed after each change, as emoji (a type the table
        does not know stays ``:type:``, and fails the suite's comparison visibly)."""
        history = self.server.reaction_history(self.platform_message_id(handle))
        return [[EMOJI_BY_TYPE.get(kind, f":{kind}:") for kind in shown] for shown in history]

    def attempts(self, chat: str, op: str) -> list[dict]:
        calls = [o for method in METHODS.get(op, SEND_METHODS) if op in ("send", "edit", "delete")
                 for o in self.server.ops(self.server.p2p_chat(chat), method)]
        return [{"at": o["at"], "status": o["status"]} for o in sorted(calls, key=lambda o: o["at"])]

    def script_floods(self, count: int, retry_after: float) -> None:
        # The platform's x-ogw-ratelimit-reset is whole seconds: the fake rounds ``retry_after`` up to at least 1.
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after, methods=SEND_METHODS)

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return self.server.stats()["retry_after_violations"]


class FeishuLongConnectionHarness(FeishuHarness):
    """The app with the long connection: no callback server, no public URL; events come over the WebSocket.

    The fake's knobs are its defaults but for time: an event not answered within 2 s goes again (3 s by default),
    and a reconnection comes at once (ReconnectNonce 0, where the default asks each client to wait a random share
    of 30 s first, time the suite's deadlines would spend waiting)."""
    variant = "long_connection"
    adapter_name = "feishu_long_connection"
    # Only where the intake decides what the case sees: an event's way in (fields, doorbell), its redelivery, a
    # malformed one, every connection cut, the adapter killed with an event sent while it was dead. Every other
    # case sends or streams (the same calls as with callbacks), or kills the daemon after its question was answered.
    conformance_cases = frozenset({
        "test_inbound_message_becomes_one_inbox_row_and_rings_its_session",
        "test_replayed_message_is_deduplicated",
        "test_malformed_payload_is_rejected_and_logged_and_the_adapter_stays_up",
        "test_reconnects_after_the_platform_drops_every_connection",
        "test_kill_9_restarts_the_adapter_and_what_came_meanwhile_arrives_once"})

    def make_server(self):
        return FakeFeishu(port=self.port, state_file=self.state_file, ack_timeout=2.0, reconnect_nonce=0)

    def adapter_toml(self, extra: str = "") -> str:
        return self.app_table('inbound = "long_connection"\n' + extra)

    def callback_ready(self) -> None:
        """Nothing to wait for: an event queued before the adapter's connection is open waits at the fake."""

    # -- inbound
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        return self.server.queue_ws_event(self.server.message_event(self.server.p2p_chat(chat),
                                                                    self.server.user(chat), "text", {"text": text}))

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        return self.server.queue_ws_event(self.server.image_event(self.server.p2p_chat(chat), self.server.user(chat),
                                                                  data))

    def event(self, handle: str) -> dict:
        return self.server.ws_event(handle)

    def platform_message_id(self, handle: str) -> str:
        return self.event(handle)["event"]["event"]["message"]["message_id"]

    def replay(self, handle: str) -> str:
        """The platform's redelivery: the same event (its event_id, its message), in new frames."""
        return self.server.queue_ws_event(self.event(handle)["event"])

    def inject_malformed(self) -> tuple[str, str]:
        return self.server.queue_ws_event(self.malformed_event()), MALFORMED_REASON

    def acknowledged(self, handle: str) -> bool:
        return self.event(handle)["status"] == "acked"

    def fate(self, handle: str) -> str:
        """What became of an event at the fake: its deliveries (connection, time) and the connections' lives."""
        return (f"{self.event(handle)['status']}, deliveries {self.event(handle)['attempts']}, connections "
                f"{self.server.ws_connections()}")


HARNESS = FeishuHarness
VARIANTS = (FeishuLongConnectionHarness,)
