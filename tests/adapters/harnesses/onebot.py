"""The conformance harness for the OneBot v11 adapter: the fake OneBot implementation (tests/fakes/onebot), in-process,
its forward WebSocket on one port, its messages in a state file so a restart on the same port keeps the history (and
cuts every connection: the dropped connection). Each chat name of the suite is a QQ user writing to the account in
private (``private:<qq>``). OneBot acknowledges nothing and keeps nothing for a client that is not connected: an
event pushed while no connection is open is lost by the implementation itself, as by NapCat or Lagrange. So
``inject`` waits until the adapter's connection answers a WebSocket ping (as IRC's harness waits for the bot to
answer on the server), and "acknowledged" is the adapter's committed offset naming the message (it holds the ids of
the last messages committed). OneBot has no 429 (``not_applicable``); the account's pace is kept fast here (the
suite sends dozens of messages) and the fake counts a gap shorter than it.
"""
from __future__ import annotations

from actors.messages import Source
from tests.actor_system import wait_for
from tests.adapters.server_harness import ServerHarness
from tests.fakes.onebot import BOT_QQ, DEFAULT_TOKEN, FakeOneBot
from tests.fakes.onebot.server import qq_of

CONNECT_WAIT_S = 30.0
ACTIONS = {"send": "send_private_msg", "delete": "delete_msg"}


class OneBotHarness(ServerHarness):
    adapter_type = "onebot"
    adapter_name = "onebot"
    adapter_kind = "OneBotAdapter"
    text_limit = 4500
    not_applicable = {
        "floods": "OneBot has no 429: the account is paced like a person instead (tests/adapters/test_onebot.py)",
    }

    state_name = "onebot.json"
    send_method = "send_private_msg"

    def make_server(self, heartbeat_interval: float = 1.0):
        return FakeOneBot(port=self.port, state_file=self.state_file, heartbeat_interval=heartbeat_interval,
                          pace_per_minute=600, pace_min_gap_s=0.04)

    def adapter_toml(self, heartbeat_interval_s: float = 1.0) -> str:
        return (self.table_head() + f'url = "ws://127.0.0.1:{self.server.port}"\naccess_token = "{DEFAULT_TOKEN}"\n'
                f'self_id = "{BOT_QQ}"\nheartbeat_interval_s = {heartbeat_interval_s}\n'
                'messages_per_minute = 600.0\nmin_gap_s = 0.05\ngap_jitter_s = 0.0\n'
                'pacing = { per_chat_ops_per_s = 10.0, per_chat_burst = 10 }\n')

    def _connected(self) -> None:
        """Return once the adapter's connection answers a ping (a connection whose adapter was just killed is
        still open on the fake's side for a moment)."""
        wait_for(self.server.alive_connections, CONNECT_WAIT_S, 0.1, "the adapter connected to the fake OneBot")

    # -- inbound: a handle is "message id/delivery number"
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        self._connected()
        return f"{self.server.inject_private(chat, text)['message_id']}/1"

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        self._connected()
        segments = [{"type": "image", "data": {"file": "photo.png", "url": self.server.file_url(data)}},
                    {"type": "text", "data": {"text": caption}}]
        return f"{self.server.inject_private(chat, caption, segments=segments)['message_id']}/1"

    def platform_message_id(self, handle: str) -> str:
        return f"{BOT_QQ}:{handle.split('/')[0]}"

    def replay(self, handle: str) -> str:
        message_id = int(handle.split("/")[0])
        self._connected()
        self.server.replay(message_id)
        return f"{message_id}/{self.server.read(lambda s: s['deliveries'][str(message_id)])}"

    def inject_malformed(self) -> tuple[str, str]:
        self._connected()
        event = self.server.inject_raw_message("malformed", 42)
        return f"{event['message_id']}/1", "must be a string or a list of segments"

    def acknowledged(self, handle: str) -> bool:
        offset = self.committed_offset()
        recent = offset.get("recent") if isinstance(offset, dict) else None
        return isinstance(recent, list) and recent[-1:] == [self.platform_message_id(handle)]

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=f"private:{qq_of(chat)}", chat_type="dm",
                      user_id=str(qq_of(chat)), user_name=chat)

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": f"{BOT_QQ}:{m['message_id']}", "text": m["text"], "deleted": m["deleted"]}
                for m in self.server.sent(self.source(chat).chat_id)]

    def attempts(self, chat: str, op: str) -> list[dict]:
        return [{"at": o["at"], "status": 200 if o["status"] == 0 else o["status"]}
                for o in self.server.ops(self.source(chat).chat_id, ACTIONS[op])]

    def script_floods(self, count: int, retry_after: float) -> None:
        raise NotImplementedError("OneBot has no 429")

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return 0

    # -- the frozen-connection case: the fake's heartbeat every 0.5 s, a bound far below a missed heartbeat of the
    # configured interval (the kit's restart is what recovers, not the adapter's own timeouts)
    freeze_silence_s = 2.5
    lost_while_frozen = ("an implementation pushes an event to the connections open at that moment and keeps no "
                         "copy: one pushed into a frozen connection is gone")

    def start_relayed(self, relay) -> str:
        self.server = self.make_server(heartbeat_interval=0.5).start()
        self.port = self.server.port
        relayed = relay(self.port)
        return (self.adapter_toml(heartbeat_interval_s=10.0).replace(f"127.0.0.1:{self.port}", f"127.0.0.1:{relayed}")
                + f"max_silence_s = {self.freeze_silence_s}\n")


HARNESS = OneBotHarness
