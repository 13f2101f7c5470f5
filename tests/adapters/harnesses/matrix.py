"""The conformance harness for the Matrix adapter: a real Synapse (tests/servers/synapse.py, one per test process)
behind a recording relay (matrix_proxy.py) that the adapter talks to.

Each harness registers a bot of its own, so the suite's rooms are its own. The suite names its chats; on Matrix
the bot writes to a room. Each chat name is a user of its own who opened a DM with the bot (``createRoom`` with
``is_direct``, the bot invited; the adapter joins on its next sync), and ``source(chat).chat_id`` is that room.
Matrix acknowledges nothing a client receives; what stands for "acknowledged" is a later sync of the adapter
asking from the ``next_batch`` of the sync that carried the message (the relay sees it): the adapter asks from a
token only once the rows it covers are committed.
"""
from __future__ import annotations

import hashlib
import urllib.parse
import uuid
from pathlib import Path
from typing import Optional

from actors.adapters.registry import pacing_for
from actors.messages import Source
from tests.actor_system import wait_for
from tests.adapters.freezing_proxy import through
from tests.adapters.matrix_proxy import MatrixRelay
from tests.servers.synapse import Synapse, shared_synapse

CLIENT = "/_matrix/client/v3"


def room_path(room: str, *rest: str) -> str:
    return "/".join([f"{CLIENT}/rooms/{urllib.parse.quote(room, safe='')}", *rest])


class MatrixRooms:
    """Users, DM rooms and what the bot shows in them, on one Synapse, through its client API."""

    def __init__(self, synapse: Synapse, bot: dict):
        self.synapse, self.bot = synapse, bot
        self.users: dict[str, dict] = {}
        self.rooms: dict[str, str] = {}

    def user(self, chat: str) -> dict:
        if chat not in self.users:
            localpart = "u" + hashlib.sha256(chat.encode()).hexdigest()[:10] + "-" + uuid.uuid4().hex[:4]
            self.users[chat] = self.synapse.register(localpart)
        return self.users[chat]

    def room(self, chat: str, join_timeout: float = 30.0) -> str:
        """The DM between the chat's user and the bot, made on first use; returned once the bot has joined."""
        if chat not in self.rooms:
            answer = self.synapse.call("POST", f"{CLIENT}/createRoom", self.user(chat)["access_token"], {
                "invite": [self.bot["user_id"]], "is_direct": True, "preset": "trusted_private_chat"})
            self.rooms[chat] = answer["room_id"]
            wait_for(lambda: self.bot["user_id"] in self.members(chat), join_timeout, 0.05,
                     f"the bot to join the DM of {chat}")
        return self.rooms[chat]

    def members(self, chat: str) -> dict:
        return self.synapse.call("GET", room_path(self.rooms[chat], "joined_members"),
                                 self.user(chat)["access_token"]).get("joined") or {}

    def say(self, chat: str, content: dict) -> str:
        """The chat's user sends ``content`` (an m.room.message); its event id."""
        room = self.room(chat)
        return self.synapse.call("PUT", room_path(room, "send", "m.room.message", uuid.uuid4().hex),
                                 self.user(chat)["access_token"], content)["event_id"]

    def events(self, chat: str) -> list[dict]:
        """Every m.room.message of the room, oldest first, as the chat's user sees it."""
        room, found, token = self.room(chat), [], None
        while True:
            params = {"dir": "f", "limit": "500", "filter": '{"types":["m.room.message"]}'}
            if token:
                params["from"] = token
            page = self.synapse.call("GET", room_path(room, "messages"), self.user(chat)["access_token"],
                                     params=params)
            found += page.get("chunk") or []
            token = page.get("end")
            if not page.get("chunk") or not token:
                return found

    def bot_messages(self, chat: str, sent_contents: Optional[dict] = None) -> list[dict]:
        """The bot's messages (not its edits), each with the text it shows now: its latest edit's
        ``m.new_content`` or its own body; a redacted one shows what the relay saw it say before."""
        events = [e for e in self.events(chat) if e.get("sender") == self.bot["user_id"]]
        latest: dict[str, str] = {}
        messages = []
        for event in events:
            content = event.get("content") or {}
            relates = content.get("m.relates_to") or {}
            if relates.get("rel_type") == "m.replace" and isinstance(content.get("m.new_content"), dict):
                latest[relates.get("event_id")] = content["m.new_content"].get("body")
            else:
                messages.append(event)
        shown = []
        for event in messages:
            deleted = not event.get("content") or "redacted_because" in (event.get("unsigned") or {})
            text = latest.get(event["event_id"], (event.get("content") or {}).get("body"))
            if deleted and sent_contents is not None:
                edits = [c["m.new_content"]["body"] for e, c in sent_contents.items()
                         if c and (c.get("m.relates_to") or {}).get("event_id") == event["event_id"]]
                text = edits[-1] if edits else (sent_contents.get(event["event_id"]) or {}).get("body")
            shown.append({"message_id": event["event_id"], "text": text, "deleted": deleted, "event": event})
        return shown


class MatrixHarness:
    adapter_type = "matrix"
    adapter_name = "matrix"
    adapter_kind = "MatrixAdapter"
    text_limit = pacing_for("matrix").text_limit

    def __init__(self, workdir: Path):
        self.synapse = shared_synapse()
        self.bot = self.synapse.register(f"bot-{uuid.uuid4().hex[:8]}")
        self.relay = MatrixRelay(self.synapse.base_url)
        self.matrix = MatrixRooms(self.synapse, self.bot)

    def start(self) -> None:
        self.relay.start()

    def stop(self) -> None:
        self.relay.close()

    def drop_connection(self) -> None:
        self.relay.restart()

    def hold_next_send(self, chat: str) -> None:
        self.relay.hold_next_send(room=self.matrix.room(chat))

    def send_held(self) -> bool:
        return self.relay.holding.is_set()

    def release_send(self) -> None:
        self.relay.release()

    def adapter_toml(self) -> str:
        return (f'[adapters.{self.adapter_name}]\ntype = "{self.adapter_type}"\naccess = "open"\n'
                f'homeserver = "{self.relay.base_url}"\naccess_token = "{self.bot["access_token"]}"\n'
                f'sync_timeout_s = 5.0\n'
                # The test server's message limits are lifted (tests/servers/synapse.py): Synapse's defaults (0.2/s,
                # burst 10, what the pacing table keeps to) would only make the suite wait.
                f'pacing = {{ per_chat_ops_per_s = 20.0, per_chat_burst = 20, edit_interval_s = 0.5 }}\n')

    # -- inbound: a handle is "event id/delivery number"
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        return self.matrix.say(chat, {"msgtype": "m.text", "body": text}) + "/1"

    def platform_message_id(self, handle: str) -> str:
        return handle.rsplit("/", 1)[0]

    def replay(self, handle: str) -> str:
        event_id = self.platform_message_id(handle)
        wait_for(lambda: self.relay.acknowledged(event_id, 1), 30, 0.05, f"the first delivery of {event_id} acked")
        deliveries = len(self.relay.deliveries(event_id))
        self.relay.replay(event_id)
        return f"{event_id}/{deliveries + 1}"

    def inject_malformed(self) -> tuple[str, str]:
        # Synapse checks body and msgtype, not the shape of a relation: one that is no object is the adapter's to
        # refuse.
        event_id = self.matrix.say("malformed", {"msgtype": "m.text", "body": "x", "m.relates_to": "not an object"})
        return f"{event_id}/1", "m.relates_to must be an object"

    def acknowledged(self, handle: str) -> bool:
        event_id, delivery = handle.rsplit("/", 1)
        return self.relay.acknowledged(event_id, int(delivery))

    def source(self, chat: str, user: str = "alice") -> Source:
        person = self.matrix.user(chat)["user_id"]
        return Source(platform=self.adapter_name, chat_id=self.matrix.room(chat), chat_type="dm", user_id=person,
                      user_name=person[1:].split(":", 1)[0])

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{k: m[k] for k in ("message_id", "text", "deleted")}
                for m in self.matrix.bot_messages(chat, self.relay.sent_contents)]

    def attempts(self, chat: str, op: str) -> list[dict]:
        return [{"at": r["at"], "status": r["status"]} for r in self.relay.of(self.matrix.room(chat), op)]

    def script_floods(self, count: int, retry_after: float) -> None:
        self.relay.script_floods(count, retry_after)

    def clear_faults(self) -> None:
        self.relay.clear_faults()

    def flood_violations(self) -> int:
        return self.relay.violations

    # -- the frozen-connection case (tests/adapters/test_frozen_connections.py)
    freeze_silence_s = 4.0      # a /sync comes back every second; its own timeout is 30 s past the wait

    def start_relayed(self, relay) -> str:
        self.start()
        relayed = through(self.relay.base_url, relay(self.relay.port))
        return (self.adapter_toml().replace(self.relay.base_url, relayed)
                .replace("sync_timeout_s = 5.0", "sync_timeout_s = 1.0") + f"max_silence_s = {self.freeze_silence_s}\n")


HARNESS = MatrixHarness
