"""The conformance harness for the Discord adapter: the fake Discord (tests/fakes/discord), in-process, its gateway
and REST served on one port, its world (sessions, channels, messages) in a state file so a restart on the same port
keeps the history and a session the adapter can resume.

The suite names its chats; on Discord the bot writes to a channel. Each chat name is a user of its own with a DM
channel (made on first use, as if the user had opened the DM), and ``source(chat).chat_id`` is that channel's id.
Discord acknowledges nothing a client receives; what stands for "acknowledged" here is the adapter's committed
offset: the gateway session's sequence number it resumes from has passed the message's dispatch.
"""
from __future__ import annotations

import hashlib
import threading
import uuid
from pathlib import Path
from typing import Callable, Optional

from actors.messages import Source
from tests.adapters.freezing_proxy import through
from tests.adapters.server_harness import ServerHarness
from tests.fakes.discord import FakeDiscord, INTENTS

TIME_SCALE = 0.2          # every window of the fake 5x shorter: rate limits 5 per second, identify once a second
HEARTBEAT_MS = 2000
FREEZE_HEARTBEAT_MS = 8000
PROOF_OF_LIFE_S = 1.0     # the frozen case: how often the gateway asks for a heartbeat (op 1)


def user_number(chat: str) -> int:
    """A stable user id (a snowflake-sized number) for one of the suite's chat names."""
    return 1400000000000000000 + int(hashlib.sha256(chat.encode()).hexdigest()[:12], 16)


class DiscordHarness(ServerHarness):
    adapter_type = "discord"
    adapter_name = "discord"
    adapter_kind = "DiscordAdapter"
    text_limit = 2000
    ROUTES = {"send": "create_message", "edit": "edit_message", "delete": "delete_message", "typing": "typing"}

    state_name = "discord.json"
    send_method = "create_message"

    def __init__(self, workdir: Path):
        super().__init__(workdir)
        self.channels: dict[str, int] = {}
        self.pacemaker: Optional[Pacemaker] = None

    def stop(self) -> None:
        if self.pacemaker is not None:
            self.pacemaker.stop()
            self.pacemaker = None
        super().stop()

    def make_server(self):
        return FakeDiscord(port=self.port, state_file=self.state_file, time_scale=TIME_SCALE,
                                  heartbeat_interval=HEARTBEAT_MS)

    def adapter_toml(self) -> str:
        return (self.table_head() +
                f'token = "{self.server.token}"\napi_base_url = "{self.server.api_url}"\n')

    def channel(self, chat: str) -> int:
        if chat not in self.channels:
            with self.server.mutate() as state:
                self.server._ensure_user(state, user_number(chat), chat, None)
                self.channels[chat] = int(self.server.ensure_dm(state, user_number(chat))["channel"]["id"])
        return self.channels[chat]

    # -- inbound: a handle is "message id/delivery number"
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        message = self.server.inject_message(text, self.channel(chat), user_id=user_number(chat), username=user)
        return f"{message['id']}/1"

    def platform_message_id(self, handle: str) -> str:
        return handle.split("/")[0]

    def replay(self, handle: str) -> str:
        """The same MESSAGE_CREATE dispatched again: what a Resume replays when the adapter had not committed it."""
        message_id = self.platform_message_id(handle)
        with self.server.mutate() as state:
            record = next(r for c in state["channels"].values() for r in c["messages"].values()
                          if str(r["id"]) == message_id)
            self.server.dispatch_message(state, "MESSAGE_CREATE", record)
        return f"{message_id}/2"

    def inject_malformed(self) -> tuple[str, str]:
        bad_id = f"bad-{uuid.uuid4().hex[:8]}"
        with self.server.mutate() as state:
            self.server.dispatch_event(state, "MESSAGE_CREATE", lambda _: {
                "id": bad_id, "channel_id": str(self.channel("malformed")), "content": "x", "type": 0,
                "author": {"id": str(user_number("malformed")), "username": "mallory"}},
                guild_id=None, intent=INTENTS["DIRECT_MESSAGES"])
        return f"{bad_id}/1", "must be a snowflake string"

    def acknowledged(self, handle: str) -> bool:
        message_id, delivery = handle.split("/")
        offset = self.committed_offset()
        if not isinstance(offset, dict):
            return False
        session = next((s for s in self.server.sessions() if s["session_id"] == offset.get("session_id")), None)
        if session is None:
            return False
        seqs = [e["s"] for e in session["events"]
                if e.get("t") == "MESSAGE_CREATE" and isinstance(e.get("d"), dict) and e["d"].get("id") == message_id]
        return len(seqs) >= int(delivery) and offset["seq"] >= seqs[int(delivery) - 1]

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=str(self.channel(chat)), chat_type="dm",
                      user_id=str(user_number(chat)), user_name=user)

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": str(m["id"]), "text": m["content"], "deleted": m["deleted"]}
                for m in self.server.messages(self.channel(chat))]

    def attempts(self, chat: str, op: str) -> list[dict]:
        return [{"at": o["at"], "status": o["status"]} for o in self.server.ops(self.channel(chat), self.ROUTES[op])]

    def script_floods(self, count: int, retry_after: float) -> None:
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after, methods=("create_message",))

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return self.server.stats()["retry_after_violations"]

    # -- the frozen-connection case (tests/adapters/test_frozen_connections.py)
    # The link's own zombie check (gateway.py: a beat still unacknowledged when the next is due) closes the frozen
    # connection and resumes on a fresh one, which the relay lets through: no restart then. It fires a beat (8 s)
    # or more after the freeze, which may be only a beat after the last frame; with the ACKs as the only frames, a
    # bound above one beat (so an idle link is not restarted) could come after it, as it did in about one run in
    # four. So the gateway asks for a heartbeat every PROOF_OF_LIFE_S (op 1, as Discord may; a busy guild's
    # dispatches show a link alive as often): a frame a second, and a bound of 3 s, restarting (bound + a quarter)
    # well before the link's check (8 s, then its close's 2 s), whatever the phase of the beats.
    freeze_silence_s = 3.0

    def start_relayed(self, relay) -> str:
        self.server = RelayedDiscord(port=self.port, state_file=self.state_file, time_scale=TIME_SCALE,
                                     heartbeat_interval=FREEZE_HEARTBEAT_MS).start()
        self.port = self.server.port
        self.server.relay_port = relay(self.port)
        self.pacemaker = Pacemaker(self.server.request_heartbeat, PROOF_OF_LIFE_S)
        relayed = through(self.server.api_url, self.server.relay_port)
        return self.adapter_toml().replace(self.server.api_url, relayed) + f"max_silence_s = {self.freeze_silence_s}\n"


class Pacemaker:
    """Calls ``beat`` every ``every_s`` on a thread of its own until stopped."""

    def __init__(self, beat: Callable[[], object], every_s: float):
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(beat, every_s), daemon=True, name="pacemaker")
        self._thread.start()

    def _run(self, beat, every_s: float) -> None:
        while not self._stopped.wait(every_s):
            beat()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(5)


class RelayedDiscord(FakeDiscord):
    """Gives its gateway's addresses at the relay (the frozen-connection case): the WebSocket goes through it too."""
    relay_port = 0

    @property
    def gateway_url(self) -> str:
        return through(super().gateway_url, self.relay_port or self.port)

    @property
    def resume_gateway_url(self) -> str:
        return through(super().resume_gateway_url, self.relay_port or self.port)


HARNESS = DiscordHarness
