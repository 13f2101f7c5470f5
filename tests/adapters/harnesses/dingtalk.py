"""The conformance harness for the DingTalk adapter: the in-process fake open platform (tests/fakes/dingtalk), whose
Stream-mode WebSocket carries the robot's messages and whose session webhooks and robot API take its replies.

The suite names its chats ("ops-1a2b3c4d"); each chat name is a user of its own writing to the robot one-to-one, so
``source(chat).chat_id`` is that user's staff id (what the robot API's batchSend takes). A chat that wrote to the
robot is answered through its message's session webhook; one that never did (the outbound cases), by batchSend:
``sent`` and ``attempts`` read both. A handle is a callback; "acknowledged" is the adapter's answer frame to it.

A variant (``DingTalkCardsHarness``, "dingtalk-cards") runs the app with an AI card template: each reply part is a
card its edits stream into, so the suite's edit, kill-mid-stream and lost-send cases run on the card path; ``sent``
shows each card as a message (its id, its content) beside any text message, in the order they were made.
"""
from __future__ import annotations

import dataclasses

from actors.adapters.dingtalk.platform import CAPABILITIES
from actors.messages import Source
from tests.adapters.freezing_proxy import through
from tests.adapters.server_harness import ServerHarness
from tests.fakes.dingtalk import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, FakeDingTalk
from tests.fakes.dingtalk.cards import DEFAULT_CARD_KEY, DEFAULT_CARD_TEMPLATE
from tests.fakes.dingtalk.server import SEND_METHODS


class DingTalkHarness(ServerHarness):
    adapter_type = "dingtalk"
    adapter_name = "dingtalk"
    adapter_kind = "DingTalkAdapter"
    text_limit = 5000

    state_name = "dingtalk.json"
    send_method = "session"

    def make_server(self, **limits):
        return FakeDingTalk(port=self.port, state_file=self.state_file, **dict({"ping_interval": 5.0}, **limits))

    def adapter_toml(self, base_url: str = "", extra: str = "") -> str:
        base_url = base_url or self.server.base_url
        pacing = "per_chat_ops_per_s = 4.0, per_chat_burst = 3"
        return (self.table_head() +
                f'client_id = "{DEFAULT_CLIENT_ID}"\nclient_secret = "{DEFAULT_CLIENT_SECRET}"\n'
                f'base_url = "{base_url}"\nsession_webhook_prefix = "{base_url}/robot/"\n'
                f'rate_limit_wait_s = 0.5\npacing = {{ {pacing} }}\n' + extra)

    # -- inbound
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        return self.server.inject_text(chat, text)

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        return self.server.inject_picture(chat, data)   # a picture message carries no text

    def platform_message_id(self, handle: str) -> str:
        return self.server.callback(handle)["data"]["msgId"]

    def replay(self, handle: str) -> str:
        return self.server.redeliver(handle)

    def inject_malformed(self) -> tuple[str, str]:
        data = self.server.message_data("malformed", "x")
        data["text"] = {"content": 42}
        return self.server.queue(data), "text.content must be a string"

    def acknowledged(self, handle: str) -> bool:
        return self.server.callback(handle)["status"] == "acked"

    def source(self, chat: str, user: str = "alice") -> Source:
        staff = FakeDingTalk.staff(chat)
        return Source(platform=self.adapter_name, chat_id=staff, chat_type="dm", user_id=staff)

    def source_of(self, chat_id: str, chat_type: str = "dm") -> Source:
        """The source of a chat named by its platform id (a staff id, or a group's conversation id)."""
        return Source(platform=self.adapter_name, chat_id=chat_id, chat_type=chat_type,
                      user_id=chat_id if chat_type == "dm" else None)

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": m["id"], "text": m["text"], "deleted": m["deleted"]}
                for m in self.server.messages(FakeDingTalk.staff(chat))]

    def attempts(self, chat: str, op: str) -> list[dict]:
        if op != "send":
            return []
        calls = [o for method in SEND_METHODS for o in self.server.ops(FakeDingTalk.staff(chat), method)]
        return [{"at": o["at"], "status": o["status"]} for o in sorted(calls, key=lambda o: o["at"])]

    def script_floods(self, count: int, retry_after: float) -> None:
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after, methods=SEND_METHODS)

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return self.server.stats()["retry_after_violations"]

    # -- the frozen-connection case (tests/adapters/test_frozen_connections.py)
    # The fake sends a SYSTEM ping every 0.5 s (each frame is progress); the adapter's own WebSocket ping goes after
    # 10 s with nothing received: the bound is far below that. A callback pushed into the frozen socket misses its
    # answer and goes again after 1 s, to an open connection: the restarted adapter's.
    freeze_silence_s = 2.5

    def start_relayed(self, relay) -> str:
        self.server = self.make_server(ping_interval=0.5, ack_timeout=1.0).start()
        self.port = self.server.port
        relay_port = relay(self.port)
        self.server.endpoint_port = self.server.webhook_port = relay_port
        return self.adapter_toml(through(self.server.base_url, relay_port),
                                 f"ping_interval_s = 10.0\nmax_silence_s = {self.freeze_silence_s}\n")


class DingTalkCardsHarness(DingTalkHarness):
    """The app with an AI card template: replies are cards whose content the edits replace, created under the
    part's outTrackId (a create repeated after a kill -9 makes no second card)."""
    variant = "cards"
    adapter_name = "dingtalk_cards"
    send_method = "card_create"    # the delivery case holds the answer to the reply's first card
    conformance_cases = frozenset({
        "test_send_edit_delete_land_on_the_platform",
        "test_a_reply_whose_shard_is_killed_mid_stream_twice_shows_its_whole_answer_once",
        "test_kill_9_between_a_send_and_its_record_shows_the_reply_once_or_marked"})
    # What the table's pacing decides (platform.CARD_PACING; test_dingtalk.py checks they agree).
    declared_capabilities = dataclasses.replace(CAPABILITIES, edit=True, idempotent_send="outTrackId")

    def adapter_toml(self, base_url: str = "", extra: str = "") -> str:
        return super().adapter_toml(base_url, f'card_template_id = "{DEFAULT_CARD_TEMPLATE}"\n'
                                              f'card_content_key = "{DEFAULT_CARD_KEY}"\n' + extra)

    def sent(self, chat: str) -> list[dict]:
        staff = FakeDingTalk.staff(chat)
        made = [(m["at"], m["id"], m["text"], m["deleted"]) for m in self.server.messages(staff)]
        made += [(c["at"], c["id"], c["content"], False) for c in self.server.cards(staff)]
        return [{"message_id": i, "text": text, "deleted": deleted} for _, i, text, deleted in sorted(made)]


HARNESS = DingTalkHarness
VARIANTS = (DingTalkCardsHarness,)
