"""The conformance harness for the Slack adapter: the in-process fake Slack (tests/fakes/slack) over Socket Mode.

The suite names its chats ("ops-1a2b3c4d") and its users ("alice"); Slack names conversations ``D…``/``C…`` and
users ``U…``. Each name maps to a stable id of the right shape, and the fake opens a DM on the first post to one,
as Slack does for a user who has the app installed. A handle is an event id.
"""
from __future__ import annotations

import hashlib
from typing import Optional

from actors.messages import Source
from tests.adapters.freezing_proxy import through
from tests.adapters.server_harness import ServerHarness
from tests.fakes.slack import DEFAULT_APP_TOKEN, DEFAULT_BOT_TOKEN, FakeSlack

METHODS = {"send": "chat.postMessage", "edit": "chat.update", "delete": "chat.delete"}


def slack_id(prefix: str, name: str) -> str:
    return prefix + hashlib.sha256(name.encode()).hexdigest()[:10].upper()


class NamedChatSlack(FakeSlack):
    """Opens the DM a post names (``D…``) when it does not exist yet, refused calls to it included (so a 429
    on the first post is in the DM's log)."""

    def find_channel(self, state: dict, value: Optional[str]):
        if value and value[:1] == "D" and value not in state["channels"]:
            return self.ensure_channel(state, value)
        return super().find_channel(state, value)

    def _log_op(self, state: dict, method: str, params: dict, outcome) -> None:
        self.find_channel(state, params.get("channel") if isinstance(params.get("channel"), str) else None)
        super()._log_op(state, method, params, outcome)


class SlackHarness(ServerHarness):
    adapter_type = "slack"
    adapter_name = "slack"
    adapter_kind = "SlackAdapter"
    text_limit = 40000

    state_name = "slack.json"
    send_method = "chat.postMessage"

    def make_server(self):
        # Posting paced a little faster than Slack's 1/s (the adapter's pacing below matches), ping-free.
        return NamedChatSlack(port=self.port, state_file=self.state_file, post_interval=0.25, post_burst=4,
                              ping_interval=0)

    def adapter_toml(self) -> str:
        # Edits paced for the fake's Tier 3 burst (10), which the suite's few edits stay within.
        pacing = "per_chat_ops_per_s = 4.0, per_chat_burst = 3, app_edit_ops_per_s = 5.0, app_edit_burst = 8"
        return (self.table_head() +
                f'bot_token = "{DEFAULT_BOT_TOKEN}"\napp_token = "{DEFAULT_APP_TOKEN}"\n'
                f'base_url = "{self.server.api_url}"\npacing = {{ {pacing} }}\n')

    # -- inbound
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        injected = self.server.inject_message(text, slack_id("D", chat), user=slack_id("U", user), user_name=user)
        return injected["event_ids"][0]

    def _event(self, handle: str) -> dict:
        return next(e for e in self.server.events() if e["event_id"] == handle)

    def platform_message_id(self, handle: str) -> str:
        event = self._event(handle)["payload"]["event"]
        return f"{event['channel']}:{event['ts']}"

    def replay(self, handle: str) -> str:
        event = self._event(handle)["payload"]["event"]
        with self.server.mutate() as state:   # the same message in a new event: what a re-delivery looks like
            return self.server.queue_event(state, dict(event))

    def inject_malformed(self) -> tuple[str, str]:
        with self.server.mutate() as state:
            handle = self.server.queue_event(state, {"type": "message", "channel": "D0MALFORMED", "channel_type": "im",
                                                     "user": "U0MALLORY1", "ts": "1700000000.000001", "text": 42})
        return handle, "text must be a string"

    def acknowledged(self, handle: str) -> bool:
        return self._event(handle)["status"] == "acked"

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=slack_id("D", chat), chat_type="dm",
                      user_id=slack_id("U", user))

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": m["ts"], "text": m["text"], "deleted": m["deleted"]}
                for m in self.server.messages(slack_id("D", chat))]

    def attempts(self, chat: str, op: str) -> list[dict]:
        if op not in METHODS:
            return []
        return [{"at": o["at"], "status": o["status"]} for o in self.server.ops(slack_id("D", chat), METHODS[op])]

    def script_floods(self, count: int, retry_after: float) -> None:
        # Slack's Retry-After is whole seconds: the fake rounds ``retry_after`` up to at least 1.
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after, methods=("chat.postMessage",))

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return self.server.stats()["retry_after_violations"]

    # -- the frozen-connection case (tests/adapters/test_frozen_connections.py)
    # The fake pings every 0.5 s (each ping is progress, and resets the adapter's own ping timer); the adapter's
    # ping goes after 10 s with nothing received and gives the socket up 5 s later: the bound is far below that.
    # An event sent into the frozen socket misses its acknowledgement and goes again, at once and then every
    # 0.5 s, each time to one of the open sockets in turn: one of them is the restarted adapter's.
    freeze_silence_s = 2.5

    def start_relayed(self, relay) -> str:
        self.server = RelayedSlack(port=self.port, state_file=self.state_file, post_interval=0.25, post_burst=4,
                                   ping_interval=0.5, retry_delays=[0.0] + [0.5] * 20).start()
        self.port = self.server.port
        self.server.relay_port = relay(self.port)
        relayed = through(self.server.api_url, self.server.relay_port)
        return (self.adapter_toml().replace(self.server.api_url, relayed) +
                f"ping_interval_s = 10.0\nmax_silence_s = {self.freeze_silence_s}\n")


class RelayedSlack(NamedChatSlack):
    """Gives its Socket Mode URLs at the relay (the frozen-connection case): the WebSocket goes through it too."""
    relay_port = 0

    def method_apps_connections_open(self, state: dict, params: dict) -> dict:
        answer = super().method_apps_connections_open(state, params)
        return dict(answer, url=through(answer["url"], self.relay_port or self.port))


HARNESS = SlackHarness
