"""The conformance harness of the generic fake platform (tests/fakes/fakeplatform.py)."""
from __future__ import annotations

from actors.messages import Source
from tests.adapters.freezing_proxy import through
from tests.adapters.server_harness import ServerHarness
from tests.fakes.fakeplatform import FakePlatform


class FakePlatformHarness(ServerHarness):
    """The generic fake platform (tests/fakes/fakeplatform.py), in-process, its history in a state file."""
    adapter_type = "fake"
    adapter_name = "fake"
    adapter_kind = "FakePlatformAdapter"
    text_limit = 4000

    state_name = "fakeplatform.json"
    send_method = "send"

    def make_server(self):
        return FakePlatform(port=self.port, state_file=self.state_file, text_limit=self.text_limit)

    def adapter_toml(self) -> str:
        return (self.table_head(access=None) +
                f'base_url = "{self.server.base_url}"\npoll_timeout_s = 0.5\n')

    # -- inbound
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        return str(self.server.inject(chat, text, user=user))

    def _update(self, handle: str) -> dict:
        return self.server.read(lambda s: next(u for u in s["updates"] if u["id"] == int(handle)))

    def platform_message_id(self, handle: str) -> str:
        return str(self._update(handle)["message_id"])

    def replay(self, handle: str) -> str:
        original = self._update(handle)
        with self.server.mutate() as state:  # a new update carrying the same message: what a re-delivery looks like
            update = dict(original, id=state["next_update_id"])
            state["next_update_id"] += 1
            state["updates"].append(update)
        return str(update["id"])

    def inject_malformed(self) -> tuple[str, str]:
        with self.server.mutate() as state:
            update = {"id": state["next_update_id"], "chat": None, "text": 42, "message_id": "m-bad",
                      "user": "mallory", "thread": None, "chat_type": "dm"}
            state["next_update_id"] += 1
            state["updates"].append(update)
        return str(update["id"]), "chat must be a non-empty string"

    def acknowledged(self, handle: str) -> bool:
        return self.server.stats()["acked_offset"] > int(handle)

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=chat, chat_type="dm", user_id=user, user_name=user)

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": m["message_id"], "text": m["text"], "deleted": m["deleted"]}
                for m in self.server.messages(chat)]

    def sent_files(self, chat: str) -> list[dict]:
        return [{"message_id": m["message_id"], "kind": m["file"]["kind"], "sha256": m["file"]["sha256"]}
                for m in self.server.messages(chat) if m.get("file")]

    def attempts(self, chat: str, op: str) -> list[dict]:
        return [{"at": o["at"], "status": o["status"]} for o in self.server.ops(chat, op)]

    def script_floods(self, count: int, retry_after: float) -> None:
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after, methods=("send",))

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return self.server.stats()["retry_after_violations"]

    # -- the frozen-connection case (tests/adapters/test_frozen_connections.py)
    freeze_silence_s = 3.0      # a round comes back every 0.5 s; the client's own timeout is 30 s past the wait

    def start_relayed(self, relay) -> str:
        self.start()
        relayed = through(self.server.base_url, relay(self.port))
        return self.adapter_toml().replace(self.server.base_url, relayed) + f"max_silence_s = {self.freeze_silence_s}\n"


HARNESS = FakePlatformHarness
