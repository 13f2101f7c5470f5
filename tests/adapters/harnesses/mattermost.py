"""The conformance harness for the Mattermost adapter: the fake Mattermost (tests/fakes/mattermost), in-process,
REST and the WebSocket on one port, its users, channels and posts in a state file so a restart on the same port
keeps the history (and cuts every WebSocket: the dropped connection).

The suite names its chats; on Mattermost the bot writes to a channel. Each chat name is a user of its own with a
direct channel with the bot (made on first use, as opening a DM does), and ``source(chat).chat_id`` is that
channel's id. Mattermost acknowledges nothing a client receives; what stands for "acknowledged" here is that the
adapter's committed offset (the newest post creation time it covered) has reached the post, and for a replay that
the repeated event was sent to it.
"""
from __future__ import annotations

import hashlib

from actors.messages import Source
from tests.adapters.freezing_proxy import through
from tests.adapters.server_harness import ServerHarness
from tests.fakes.mattermost import DEFAULT_TOKEN, FakeMattermost
from tests.fakes.mattermost.world import stable_id

METHODS = {"send": "create_post", "edit": "patch_post", "delete": "delete_post", "typing": "typing"}
# Mattermost's names of the emoji the suite reacts with (its system emoji list), read back as the emoji.
EMOJI_BY_NAME = {"fire": "🔥", "+1": "👍", "eyes": "👀"}


class MattermostHarness(ServerHarness):
    adapter_type = "mattermost"
    adapter_name = "mattermost"
    adapter_kind = "MattermostAdapter"
    text_limit = 16383

    state_name = "mattermost.json"
    send_method = "create_post"

    def make_server(self):
        return FakeMattermost(port=self.port, state_file=self.state_file)

    def adapter_toml(self, ping_interval_s: float = 2.0) -> str:
        # Pings every 2 s: a dropped connection is seen within a second or so on a loaded machine.
        return (self.table_head() + f'base_url = "{self.server.base_url}"\ntoken = "{DEFAULT_TOKEN}"\n'
                f'ping_interval_s = {ping_interval_s}\npacing = {{ per_chat_ops_per_s = 4.0, per_chat_burst = 5 }}\n')

    def channel(self, chat: str) -> str:
        return self.server.direct_channel(chat)

    # -- inbound: a handle is "post id/delivery number"
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        post = self.server.inject_post(self.channel(chat), chat, text)
        return f"{post['id']}/1"

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        post = self.server.inject_post(self.channel(chat), chat, caption, files=(("photo.png", "image/png", data),))
        return f"{post['id']}/1"

    def platform_message_id(self, handle: str) -> str:
        return handle.split("/")[0]

    def replay(self, handle: str) -> str:
        """The same ``posted`` event sent again."""
        post_id = self.platform_message_id(handle)
        delivery = self.server.deliveries(post_id) + 1    # read first: the event may be sent before repost returns
        self.server.repost_event(post_id)
        return f"{post_id}/{delivery}"

    def inject_malformed(self) -> tuple[str, str]:
        post = self.server.inject_post(self.channel("malformed"), "mallory", 42)
        return f"{post['id']}/1", "message must be a string"

    def acknowledged(self, handle: str) -> bool:
        post_id, delivery = handle.split("/")
        post = next((p for c in self.server.read(lambda s: list(s["channels"].values()))
                     for p in c["posts"].values() if p["id"] == post_id), None)
        offset = self.committed_offset()
        if post is None or not isinstance(offset, dict) or not isinstance(offset.get("create_at"), int):
            return False
        # A first delivery may have come through REST (a post made while the adapter was dead: no stream had it);
        # a replay (delivery 2 and on) comes on the stream and must have been sent.
        sent = int(delivery) == 1 or self.server.deliveries(post_id) >= int(delivery)
        return sent and offset["create_at"] >= post["create_at"]

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=self.channel(chat), chat_type="dm",
                      user_id=stable_id("user:" + chat), user_name=user)

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": p["id"], "text": p["message"], "deleted": bool(p["delete_at"])}
                for p in self.server.bot_posts(self.channel(chat))]

    def sent_files(self, chat: str) -> list[dict]:
        """The bot's posts carrying a file; an image is what Mattermost shows inline (a photo)."""
        found = []
        for post in self.server.bot_posts(self.channel(chat)):
            for info in post.get("metadata", {}).get("files", []):
                kind = "photo" if info["mime_type"].startswith("image/") else "document"
                found.append({"message_id": post["id"], "kind": kind,
                              "sha256": hashlib.sha256(self.server.file_bytes(info["id"])).hexdigest()})
        return found

    def bot_reactions(self, chat: str, handle: str) -> list[list[str]]:
        """What the bot's reactions on the user's post showed after each change, as emoji (a name the table does
        not know stays ``:name:``, and fails the suite's comparison visibly)."""
        history = self.server.reaction_history(self.platform_message_id(handle), self.server.bot_id)
        return [[EMOJI_BY_NAME.get(name, f":{name}:") for name in shown] for shown in history]

    def attempts(self, chat: str, op: str) -> list[dict]:
        """Every attempt, a success as the suite's 200 (Mattermost answers a create 201 Created)."""
        return [{"at": o["at"], "status": 200 if 200 <= o["status"] < 300 else o["status"]}
                for o in self.server.ops(self.channel(chat), METHODS[op])]

    def script_floods(self, count: int, retry_after: float) -> None:
        # Mattermost's Retry-After is whole seconds: the fake rounds ``retry_after`` up to at least 1.
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after, methods=("create_post",))

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return self.server.stats()["retry_after_violations"]

    # -- the frozen-connection case (tests/adapters/test_frozen_connections.py)
    # The server pings every 0.5 s (each ping is progress, and puts the adapter's own ping off: aiohttp pings after
    # ping_interval_s with nothing received); the adapter's ping goes after 10 s of silence and gives the socket up
    # 5 s later, so its own reconnect comes at 15 s of silence at the earliest: the bound is far below that. REST
    # and the WebSocket share the server's one port, and the WebSocket's address derives from base_url: one relay
    # carries both. A post made during the freeze is sent into the frozen socket; the restarted adapter fetches it
    # through REST from its committed offset.
    freeze_silence_s = 2.5

    def start_relayed(self, relay) -> str:
        self.server = FakeMattermost(port=self.port, state_file=self.state_file, ping_interval=0.5).start()
        self.port = self.server.port
        relayed = through(self.server.base_url, relay(self.port))
        return (self.adapter_toml(ping_interval_s=10.0).replace(self.server.base_url, relayed) +
                f"max_silence_s = {self.freeze_silence_s}\n")


HARNESS = MattermostHarness
