"""The conformance harness for the IRC adapter: a real IRC server (ngircd, tests/adapters/ngircd.py) and one test
client per chat: the suite's chat names are nicks, each chat a person writing to the bot in private.

What IRC does not have, the harness says so (``not_applicable``): no 429 (a server throttles or disconnects a
flooding client instead; the pacing tests are in test_irc.py), no replay (a server never delivers a line twice), no
payload a server would pass on that the adapter could find malformed. IRC gives a line no id and acknowledges
nothing: the id is the adapter's own (connection epoch and line number), so ``platform_message_id`` reads it from
the inbox row that holds the injected text, and "acknowledged" is that row being committed. A line sent while the
bot is off the server is refused by the server (401), not kept: ``inject`` waits until the bot is on the server.
The bot reaches the server through a line relay (tests/adapters/irc_relay.py) that can hold what the server says to
it after its next PRIVMSG (the delivery case); the people of the chats talk to the server directly.
"""
from __future__ import annotations

import asyncio
import itertools
import re
from pathlib import Path
from typing import Optional

from actors.messages import Source
from storage import StorageError, Store, session_key
from tests.actor_system import wait_for
from tests.adapters.irc_client import IrcClient
from tests.adapters.irc_relay import IrcRelay
from tests.adapters.ngircd import Ngircd

BOT = "gw"
SYNTHETIC_ID = re.compile(r"[0-9a-f]+\.[0-9]+")


class IrcHarness:
    adapter_type = "irc"
    adapter_name = "irc"
    adapter_kind = "IrcAdapter"
    text_limit = 400
    not_applicable = {
        "floods": "IRC has no 429: the server throttles a flooding client (pacing: tests/adapters/test_irc.py)",
        "replay": "an IRC server never delivers a line twice, and keeps no history to replay",
        "malformed": "the server parses every line: nothing malformed reaches the adapter (the parser's own "
                     "tests: tests/adapters/test_irc.py)",
    }

    def __init__(self, workdir: Path):
        self.database = workdir / "state" / "gateway.db"
        self.server = Ngircd(workdir / "ngircd")
        self.relay: Optional[IrcRelay] = None
        self.clients: dict[str, IrcClient] = {}
        self.texts: dict[str, tuple[str, str]] = {}
        self._handles = itertools.count(1)
        self._held_for = ""

    def start(self) -> None:
        self.server.start()
        self.relay = IrcRelay(self.server.port).start()

    def stop(self) -> None:
        for client in self.clients.values():
            client.close()
        self.clients.clear()
        if self.relay is not None:
            self.relay.close()
        self.server.stop()

    def hold_next_send(self, chat: str) -> None:
        self._held_for = chat
        self.relay.hold_next_send(target=chat)

    def send_held(self) -> bool:
        """The relay passed the line on and the person heard it. The relay's write alone is not enough: ngircd
        paces a client's lines (its penalty time) and drops the unread ones of a connection that closes, so a
        kill -9 right after the write could take the line with it."""
        return self.relay.holding.is_set() and bool(self.clients[self._held_for].privmsgs(BOT))

    def release_send(self) -> None:
        self.relay.release()

    def drop_connection(self) -> None:
        self.server.restart()

    def adapter_toml(self) -> str:
        return (f'[adapters.{self.adapter_name}]\ntype = "{self.adapter_type}"\naccess = "open"\n'
                f'host = "127.0.0.1"\nport = {self.relay.port}\nnick = "{BOT}"\n'
                f'server_password = "{self.server.password}"\n'
                # The suite sends a few dozen lines in seconds; ngircd throttles, it never disconnects for that.
                'flood_lines_per_s = 10.0\nflood_burst = 10\npacing = { per_chat_ops_per_s = 10.0, '
                'per_chat_burst = 10 }\n')

    def client(self, chat: str) -> IrcClient:
        client = self.clients.get(chat)
        if client is None or client.closed.is_set():
            client = IrcClient(self.server.port, chat, self.server.password).connect()
            self.clients[chat] = client
        return client

    # -- inbound
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        """Said once the bot answers on the server (a CTCP PING: a connection that just died, as after a kill -9,
        is still listed until the server notices, and takes lines into the void); said again if the server
        refused it (401), as a person would."""
        client = self.client(chat)
        handle = f"{chat}/{next(self._handles)}"
        self.texts[handle] = (chat, text)

        def said() -> bool:
            client.answers(BOT)
            mark = len(client.lines())
            client.say(BOT, text)
            client.synced()
            return not any(h.msg.command == "401" for h in client.lines()[mark:])
        wait_for(said, 30, 0.1, f"{BOT} to take a message from {chat}")
        return handle

    def platform_message_id(self, handle: str) -> Optional[str]:
        chat, text = self.texts[handle]
        key = session_key(self.source(chat))

        async def read():
            async with await Store.open(self.database) as store:
                return await store.inbox.rows_in_state(key, ("received", "taken", "done", "dropped"))
        try:
            rows = asyncio.run(read())
        except StorageError:
            return None
        found = [r.platform_message_id for r in rows if r.payload.get("text") == text]
        assert all(SYNTHETIC_ID.fullmatch(i) for i in found), found
        return found[0] if found else None

    def acknowledged(self, handle: str) -> bool:
        return self.platform_message_id(handle) is not None

    def source(self, chat: str, user: str = "alice") -> Source:
        self.client(chat)
        return Source(platform=self.adapter_name, chat_id=chat, chat_type="dm", user_id=chat, user_name=chat)

    # -- outbound: what the person heard from the bot, once the server answered a PING sent after it
    def sent(self, chat: str) -> list[dict]:
        client = self.client(chat)
        client.synced()
        return [{"message_id": None, "text": h.msg.params[-1], "deleted": False} for h in client.privmsgs(BOT)]

    # -- the frozen-connection case (tests/adapters/test_frozen_connections.py)
    # The bot pings the server after 0.5 s of silence (each PONG is progress); its own ping timeout is 30 s here.
    # The frozen connection keeps the bot's nick until ngircd's ping timeout drops it, some 10 s after the freeze
    # (5 s + 5 s, the least ngircd takes): the bound lets the restarted bot come after that, or ask for its nick
    # again then (the link's first ask comes 3 s after registering under another).
    freeze_silence_s = 7.0
    lost_while_frozen = ("the server writes a line to the connection that has the nick and keeps no copy: one "
                         "written into a frozen connection is lost")

    def start_relayed(self, relay) -> str:
        self.server = Ngircd(self.server.workdir, ping_timeout_s=5, pong_timeout_s=5)
        self.start()
        # The bot reaches the line relay through the freezing one: a freeze cuts the bot off from everything.
        return (self.adapter_toml().replace(f"port = {self.relay.port}\n", f"port = {relay(self.relay.port)}\n") +
                f"ping_interval_s = 0.5\nping_timeout_s = 30.0\nmax_silence_s = {self.freeze_silence_s}\n")


HARNESS = IrcHarness
