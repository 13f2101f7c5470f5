"""Platform harnesses for the adapter conformance suite: everything platform-specific the suite needs.

To run the suite against a new adapter, write a harness class with the members of ``PlatformHarness`` and add it to
``HARNESSES``. The suite never touches a fake server except through its harness.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Protocol

from actors.messages import Source
from tests.fakes.fakeplatform import FakePlatform


class PlatformHarness(Protocol):
    adapter_type: str          # the registry type under test
    adapter_name: str          # NAME in [adapters.NAME]: the inbox platform and the tree name
    adapter_kind: str          # the actor class name shown in the tree
    text_limit: int            # the platform's limit: a longer text must fail with too_long

    def start(self) -> None: ...                          # start the fake server (port fixed from then on)
    def stop(self) -> None: ...
    def drop_connection(self) -> None: ...                # stop the server, start a new one on the same port and
                                                          # with the same history: every connection is cut
    def adapter_toml(self) -> str: ...                    # the [adapters.NAME] table pointing at the server
    def inject(self, chat: str, text: str, user: str = "alice") -> str: ...   # -> a handle of the inbound message
    def platform_message_id(self, handle: str) -> str: ...     # what the inbox dedups the message on
    def replay(self, handle: str) -> str: ...             # the platform delivers the same message again -> handle
    def inject_malformed(self) -> tuple[str, str]: ...    # -> (handle, a fragment of the reason the adapter logs)
    def acknowledged(self, handle: str) -> bool: ...      # the adapter told the platform it has this message
    def source(self, chat: str, user: str = "alice") -> Source: ...  # how the adapter should see a DM from user
    def sent(self, chat: str) -> list[dict]: ...          # the bot's messages: {"message_id", "text", "deleted"}
    def attempts(self, chat: str, op: str) -> list[dict]: ...   # every attempt of op on chat: {"at", "status"}
    def script_floods(self, count: int, retry_after: float) -> None: ...  # the next `count` sends answer 429
    def clear_faults(self) -> None: ...
    def flood_violations(self) -> int: ...                # operations the bot sent while banned by a 429


class FakePlatformHarness:
    """The generic fake platform (tests/fakes/fakeplatform.py), in-process, its history in a state file."""
    adapter_type = "fake"
    adapter_name = "fake"
    adapter_kind = "FakePlatformAdapter"
    text_limit = 4000

    def __init__(self, workdir: Path):
        self.state_file = str(workdir / "fakeplatform.json")
        self.port = 0
        self.server: Optional[FakePlatform] = None

    def start(self) -> None:
        self.server = FakePlatform(port=self.port, state_file=self.state_file, text_limit=self.text_limit).start()
        self.port = self.server.port

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def drop_connection(self) -> None:
        self.stop()
        self.start()

    def adapter_toml(self) -> str:
        return (f'[adapters.{self.adapter_name}]\ntype = "{self.adapter_type}"\n'
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

    def attempts(self, chat: str, op: str) -> list[dict]:
        return [{"at": o["at"], "status": o["status"]} for o in self.server.ops(chat, op)]

    def script_floods(self, count: int, retry_after: float) -> None:
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after, methods=("send",))

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return self.server.stats()["retry_after_violations"]


HARNESSES = {"fake": FakePlatformHarness}
