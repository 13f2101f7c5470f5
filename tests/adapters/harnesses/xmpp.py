"""The conformance harness for the XMPP adapter: a real XMPP server (Prosody, tests/adapters/prosody.py) and one
person per chat (tests/adapters/xmpp_person.py): the suite's chat names are accounts, each a person writing to the
bot one-to-one from a client that shows corrections and retractions.

What XMPP does not have, the harness says so (``not_applicable``): no 429 (a server limits a connection's bytes and
never answers a message with a wait; the pacing is the adapter's), no payload the server would pass on that the
adapter could find malformed (the server parses every stanza; inbound.py's own tests are in test_xmpp.py).

A message's id is its sender's (``origin-id``, the same as ``id``), so ``platform_message_id`` is known before the
bot sees it: ``<sender>/<id>``. "Acknowledged" is the message's inbox row being committed (XMPP acknowledges a
stream, not a message, and the stream acknowledgement is the server's business). A replay is the same stanza sent
again with the same id, as a resumed stream or offline storage delivers it; it is acknowledged once a message sent
after it, from another account, has its row (the bot's one stream carries both in order).

The delivery case holds the kit's own hold (HoldNextSend, [debug] fault_injection: actors/adapters/send_hold.py):
the platform's answer to a message is its stream acknowledgement, inside the TLS stream, which no relay of ours can
read; the kit's hold keeps the same window open (the server has the message, its id is not in the ledger).

Files go by the server's HTTP upload service (Prosody's http_file_share, plain HTTP on loopback): a file the bot
sent is the out-of-band link of its message, fetched from there; a person's file goes there the same way.
"""
from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import urllib.request
from pathlib import Path
from typing import Optional

from actors.messages import HoldNextSend, ReleaseSend, Source
from storage import StorageError, Store
from tests.actor_system import wait_for
from tests.adapters.prosody import Prosody
from tests.adapters.xmpp_person import Person

BOT, BOT_PASSWORD = "bot", "bot-test-password"
WITNESS = "replay-witness"


class XmppHarness:
    adapter_type = "xmpp"
    adapter_name = "xmpp"
    adapter_kind = "XmppAdapter"
    text_limit = 10000
    not_applicable = {
        "floods": "XMPP has no 429: a server limits a connection's bytes, never a message with a wait (pacing: "
                  "the adapter's budgets)",
        "malformed": "the server parses every stanza: nothing malformed reaches the adapter (inbound.py's own "
                     "tests: tests/adapters/test_xmpp.py)",
    }

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.database = workdir / "state" / "gateway.db"
        self.server = Prosody(workdir / "prosody")
        self.people: dict[str, Person] = {}
        self.handles: dict[str, tuple[str, str, str]] = {}    # handle -> (chat, stanza id, text)
        self._numbers = itertools.count(1)
        self._admin = None
        self.bot = ""

    def start(self) -> None:
        self.server.start()
        self.bot = self.server.register(BOT, BOT_PASSWORD)

    def stop(self) -> None:
        for person in self.people.values():
            person.close()
        self.people.clear()
        self.server.stop()

    def drop_connection(self) -> None:
        self.server.restart()

    def adapter_toml(self, port: Optional[int] = None) -> str:
        return (f'[adapters.{self.adapter_name}]\ntype = "{self.adapter_type}"\naccess = "open"\n'
                f'jid = "{self.bot}"\npassword = "{BOT_PASSWORD}"\nhost = "127.0.0.1"\n'
                f'port = {port or self.server.port}\nca_file = "{self.server.ca_file}"\n'
                f'http_file_origins = ["{self.server.upload_origin}"]\n'
                'corrections = "always"\nping_interval_s = 10.0\nping_timeout_s = 30.0\n'
                'pacing = { per_chat_ops_per_s = 10.0, per_chat_burst = 10 }\n'
                '[debug]\nfault_injection = true\n')

    def person(self, chat: str) -> Person:
        person = self.people.get(chat)
        if person is None:
            person = self.people[chat] = Person(self.server, chat)
        if not person.online.is_set():
            person.close()
            person.connect()
        return person

    # -- inbound
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        handle = f"{chat}/{next(self._numbers)}"
        stanza_id = f"m{os.getpid()}-{handle.replace('/', '-')}"
        self.person(chat).say(self.bot, text, stanza_id=stanza_id)
        self.handles[handle] = (chat, stanza_id, text)
        return handle

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        """A photo as a client sends one: uploaded to the server's upload service, its link the message's body."""
        handle = f"{chat}/{next(self._numbers)}"
        stanza_id = f"m{os.getpid()}-{handle.replace('/', '-')}"
        self.person(chat).send_file(self.bot, data, "photo.png", "image/png", caption, stanza_id)
        self.handles[handle] = (chat, stanza_id, caption)
        return handle

    def platform_message_id(self, handle: str) -> str:
        chat, stanza_id, _text = self.handles[handle]
        return f"{self.source(chat).user_id}/{stanza_id}"

    def replay(self, handle: str) -> str:
        chat, stanza_id, text = self.handles[handle]
        person = self.person(chat)
        person.say(self.bot, text, stanza_id=stanza_id)
        person.synced()                        # the server routed it before the witness speaks
        witness = self.inject(f"{WITNESS}-{next(self._numbers)}", "the replay went before me")
        self.handles[f"{handle}/again"] = self.handles[witness]
        return f"{handle}/again"

    def acknowledged(self, handle: str) -> bool:
        """The message's row is committed (for a replay: the row of the witness sent after it)."""
        wanted = self.platform_message_id(handle)

        async def read():
            async with await Store.open(self.database) as store:
                return await store.inbox.by_message_id(self.adapter_name, wanted)
        try:
            return asyncio.run(read()) is not None
        except StorageError:
            return False

    def source(self, chat: str, user: str = "alice") -> Source:
        self.person(chat)        # online before the bot writes to it, as a person in a chat is
        jid = f"{chat.lower()}@{self.server.domain}"
        return Source(platform=self.adapter_name, chat_id=jid, chat_type="dm", user_id=jid, user_name=chat.lower())

    # -- outbound: what the person's client shows, once the server answered a ping sent after it
    def sent(self, chat: str) -> list[dict]:
        person = self.person(chat)
        person.synced()
        return person.chat_with(self.bot)

    def sent_files(self, chat: str) -> list[dict]:
        """The bot's messages carrying a file (an out-of-band link, XEP-0066, to the server's upload service),
        its bytes fetched from there; an image is what clients show inline (a photo)."""
        person = self.person(chat)
        person.synced()
        with person.lock:
            links = [i for i in person.received if i["oob"] and i["from"].split("/", 1)[0].lower() == self.bot]
        found = []
        for item in links:
            with urllib.request.urlopen(item["oob"], timeout=30) as answer:
                kind = "photo" if answer.headers.get_content_type().startswith("image/") else "document"
                found.append({"message_id": item["origin_id"] or item["id"], "kind": kind,
                              "sha256": hashlib.sha256(answer.read()).hexdigest()})
        return found

    # -- the delivery case: the kit's hold (see the module's doc)
    def _adapter(self):
        from common import config as config_mod
        from daemon.admin import AdminClient
        if self._admin is None or not self._admin.still_attached():
            self._admin = AdminClient(config_mod.load(str(self.workdir / "gateway.toml")))
        return self._admin

    def _tell_adapter(self, message) -> None:
        admin = self._adapter()
        from supervision import tree as tree_mod
        node = wait_for(lambda: next((n for n, _p, _ in tree_mod.walk(admin.tree()) if n.name == self.adapter_name
                                      and n.ref is not None), None), 30, 0.1, "the adapter's address")
        admin.asys.tell(node.ref, message)

    def hold_next_send(self, chat: str) -> None:
        self._holding = chat
        self._tell_adapter(HoldNextSend(self.source(chat).chat_id))

    def send_held(self) -> bool:
        return bool(self.sent(self._holding))

    def release_send(self) -> None:
        try:
            self._tell_adapter(ReleaseSend())
        except Exception:  # noqa: BLE001 - the daemon is gone: so is its hold
            pass
        self._admin = None

    # -- the frozen-connection case (tests/adapters/test_frozen_connections.py)
    # The bot pings the server after 0.5 s of silence (each answer is progress); its own ping timeout is 30 s here.
    freeze_silence_s = 7.0

    def start_relayed(self, relay) -> str:
        self.start()
        return (self.adapter_toml(port=relay(self.server.port))
                .replace("ping_interval_s = 10.0\n", "ping_interval_s = 0.5\n")
                .replace("[debug]", f"max_silence_s = {self.freeze_silence_s}\n[debug]"))


HARNESS = XmppHarness
