"""The conformance harness for the QQ official bot API adapter: the fake QQ (tests/fakes/qq), in-process, its
token endpoint, OpenAPI and gateway on one port, its sessions and messages in a state file so a restart on the same
port keeps the history and a session the adapter can resume.

Each chat name of the suite is a QQ user writing to the bot in C2C (``c2c:<openid>``). QQ acknowledges nothing a
client receives; what stands for "acknowledged" is the adapter's committed offset: the gateway session's seq it
resumes from has passed the message's dispatch. The id the adapter records for a passive reply is the pair QQ
deduplicates on, ``<msg_id>#<msg_seq>`` (actors/adapters/qq/replies.py); a send with no user message to answer
(the suite's own sends to a chat that never wrote) is an active message, recorded under QQ's id.
"""
from __future__ import annotations

from typing import Optional

from actors.messages import Source
from tests.adapters.freezing_proxy import through
from tests.adapters.harnesses.discord import Pacemaker
from tests.adapters.server_harness import ServerHarness
from tests.fakes.qq import APP_ID, APP_SECRET, FakeQQ, openid

HEARTBEAT_MS = 2000
FREEZE_HEARTBEAT_MS = 8000
PROOF_OF_LIFE_S = 1.0     # the frozen case: how often the gateway asks for a heartbeat (op 1)


class QQHarness(ServerHarness):
    adapter_type = "qq"
    adapter_name = "qq"
    adapter_kind = "QQAdapter"
    text_limit = 2000

    state_name = "qq.json"
    send_method = "send"
    pacemaker: Optional[Pacemaker] = None

    def make_server(self, heartbeat_interval_ms: int = HEARTBEAT_MS):
        return FakeQQ(port=self.port, state_file=self.state_file, heartbeat_interval_ms=heartbeat_interval_ms)

    def stop(self) -> None:
        if self.pacemaker is not None:
            self.pacemaker.stop()
            self.pacemaker = None
        super().stop()

    def adapter_toml(self) -> str:
        return (self.table_head() + f'app_id = "{APP_ID}"\napp_secret = "{APP_SECRET}"\n'
                f'api_base_url = "{self.server.api_url}"\nauth_url = "{self.server.token_url}"\n'
                'pacing = { per_chat_ops_per_s = 10.0, per_chat_burst = 10 }\n')

    # -- inbound: a handle is "message id/delivery number"
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        return f"{self.server.inject_c2c(chat, text)['id']}/1"

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        attachment = self.server.attachment(data, "image/png", "photo.png")
        return f"{self.server.inject_c2c(chat, caption, attachments=[attachment])['id']}/1"

    def platform_message_id(self, handle: str) -> str:
        return handle.split("/")[0]

    def replay(self, handle: str) -> str:
        message_id = self.platform_message_id(handle)
        return f"{message_id}/{self.server.replay(message_id)}"

    def inject_malformed(self) -> tuple[str, str]:
        bad_id = "ROBOT1.0_malformed"
        self.server.inject_raw("C2C_MESSAGE_CREATE", {"id": bad_id, "author": {"user_openid": openid("malformed")},
                                                       "content": 42})
        return f"{bad_id}/1", "content must be a string"

    def acknowledged(self, handle: str) -> bool:
        message_id, delivery = handle.split("/")
        offset = self.committed_offset()
        if not isinstance(offset, dict):
            return False
        session = self.server.sessions().get(offset.get("session_id"))
        if session is None:
            return False
        seqs = [e["s"] for e in session["events"]
                if isinstance(e.get("d"), dict) and e["d"].get("id") == message_id]
        return len(seqs) >= int(delivery) and offset["seq"] >= seqs[int(delivery) - 1]

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=f"c2c:{openid(chat)}", chat_type="dm",
                      user_id=openid(chat), user_name=None)

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": f"{m['msg_id']}#{m['msg_seq']}" if m.get("msg_id") and m.get("msg_seq") else m["id"],
                 "text": m["text"], "deleted": False} for m in self.server.sent(self.source(chat).chat_id)]

    def sent_files(self, chat: str) -> list[dict]:
        """The bot's rich-media messages: an image (file_type 1) is what QQ shows inline."""
        return [{"message_id": f"{m['msg_id']}#{m['msg_seq']}" if m.get("msg_id") and m.get("msg_seq") else m["id"],
                 "kind": "photo" if m["file"]["file_type"] == "image" else "document", "sha256": m["file"]["sha256"]}
                for m in self.server.sent(self.source(chat).chat_id) if m.get("file")]

    def attempts(self, chat: str, op: str) -> list[dict]:
        return [{"at": o["at"], "status": o["status"]} for o in self.server.ops(self.source(chat).chat_id)]

    def script_floods(self, count: int, retry_after: float) -> None:
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after)

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return self.server.stats()["retry_after_violations"]

    # -- the frozen-connection case (tests/adapters/test_frozen_connections.py): as Discord's (its harness says
    # why): the link's own check waits a heartbeat of 8 s; the gateway asks for a heartbeat every second, so an
    # idle link shows a frame a second, and a bound of 3 s restarts the adapter first.
    freeze_silence_s = 3.0

    def start_relayed(self, relay) -> str:
        self.server = self.make_server(heartbeat_interval_ms=FREEZE_HEARTBEAT_MS).start()
        self.port = self.server.port
        self.server.public_port = relay(self.port)
        self.pacemaker = Pacemaker(self.server.request_heartbeat, PROOF_OF_LIFE_S)
        relayed = through(self.server.api_url, self.server.public_port)
        return (self.adapter_toml().replace(self.server.api_url, relayed)
                + f"max_silence_s = {self.freeze_silence_s}\n")


HARNESS = QQHarness
