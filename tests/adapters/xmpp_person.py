"""People who talk to the bot in the XMPP tests: each a slixmpp client of its own account on the test's Prosody
(tests/adapters/prosody.py), all on one asyncio loop in a thread of the test process.

A person keeps every message it received, in order, and shows what its chat with the bot looks like the way a
client showing corrections (XEP-0308) and retractions (XEP-0424) does: a correction replaces the text of the
message it names, a retraction marks it deleted. Its client says in service discovery that it shows corrections
(``corrections=False``: a client that does not, which sees a correction as one more message).
"""
from __future__ import annotations

import asyncio
import logging
import ssl
import threading
import urllib.request
import xml.etree.ElementTree as ET
from typing import Optional

import slixmpp
from slixmpp.xmlstream.handler import Callback
from slixmpp.xmlstream.matcher import MatchXPath

from tests.actor_system import wait_for

logging.getLogger("slixmpp").setLevel(logging.CRITICAL)
REPLACE = "{urn:xmpp:message-correct:0}replace"
RETRACT = "{urn:xmpp:message-retract:1}retract"
ORIGIN = "{urn:xmpp:sid:0}origin-id"
DELAY = "{urn:xmpp:delay}delay"
COMPOSING = "{http://jabber.org/protocol/chatstates}composing"
OOB_URL = "{jabber:x:oob}x/{jabber:x:oob}url"
INVITE = "{http://jabber.org/protocol/muc#user}x/{http://jabber.org/protocol/muc#user}invite"


class _Loop:
    """One event loop thread for every person of the test process."""
    loop: Optional[asyncio.AbstractEventLoop] = None
    lock = threading.Lock()

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls.lock:
            if cls.loop is None:
                cls.loop = asyncio.new_event_loop()
                threading.Thread(target=cls.loop.run_forever, name="xmpp-people", daemon=True).start()
            return cls.loop


def run(coro, timeout: float = 60.0):
    return asyncio.run_coroutine_threadsafe(coro, _Loop.get()).result(timeout)


class Person:
    def __init__(self, server, user: str, corrections: bool = True):
        self.server, self.user = server, user
        self.password = f"pw-{user}"
        self.jid = server.register(user, self.password)
        self.corrections = corrections
        self.received: list[dict] = []     # every message stanza with a body or a chat state, as it came
        self.presences: list[tuple[str, bool]] = []    # (from, available) of every presence, as it came
        self.lock = threading.Lock()
        self.client: Optional[slixmpp.ClientXMPP] = None
        self.online = threading.Event()

    def connect(self, timeout: float = 60.0) -> "Person":
        run(self._connect(), timeout)
        wait_for(self.online.is_set, timeout, 0.05, f"{self.user} online")
        return self

    async def _connect(self) -> None:
        client = slixmpp.ClientXMPP(f"{self.jid}/phone", self.password)
        client.enable_direct_tls, client.enable_plaintext, client.use_aiodns = False, False, False
        client.ssl_context = ssl.create_default_context(cafile=str(self.server.ca_file))
        client.register_plugin("xep_0030")
        client.register_plugin("xep_0199")
        if self.corrections:
            client.plugin["xep_0030"].add_feature("urn:xmpp:message-correct:0")
        client.add_event_handler("session_start", lambda _e: (client.send_presence(), self.online.set()))
        client.add_event_handler("disconnected", lambda _e: self.online.clear())
        # Every message stanza, chat states included (slixmpp's "message" event is only for those with a body).
        client.register_handler(Callback("every message", MatchXPath("{jabber:client}message"), self._message))
        client.register_handler(Callback("every presence", MatchXPath("{jabber:client}presence"), self._presence))
        self.client = client
        client.connect("127.0.0.1", self.server.port)

    def _message(self, message) -> None:
        xml = message.xml
        body = xml.find("{jabber:client}body")
        origin = xml.find(ORIGIN)
        item = {"from": xml.get("from", ""), "type": xml.get("type", "normal"), "id": xml.get("id"),
                "origin_id": origin.get("id") if origin is not None else None,
                "body": body.text if body is not None else None,
                "replace": xml.find(REPLACE).get("id") if xml.find(REPLACE) is not None else None,
                "retract": xml.find(RETRACT).get("id") if xml.find(RETRACT) is not None else None,
                "composing": xml.find(COMPOSING) is not None, "delayed": xml.find(DELAY) is not None,
                "oob": xml.find(OOB_URL).text if xml.find(OOB_URL) is not None else None}
        with self.lock:
            self.received.append(item)

    def _presence(self, presence) -> None:
        with self.lock:
            self.presences.append((presence.xml.get("from", ""), presence.xml.get("type") not in ("unavailable",
                                                                                                   "error")))

    def close(self) -> None:
        if self.client is not None:
            client, self.client = self.client, None

            async def end():
                try:
                    await asyncio.wait_for(client.disconnect(wait=1.0), 5.0)
                finally:     # slixmpp's sending task outlives the stream: ended here, not at the process's exit
                    sending = getattr(client, "_run_out_filters", None)
                    if sending is not None:
                        sending.cancel()
            try:
                run(end(), 10)
            except Exception:  # noqa: BLE001 - the server may be gone already
                pass

    # -- talking
    def say(self, to: str, text: str, kind: str = "chat", stanza_id: Optional[str] = None) -> str:
        """A message with ``stanza_id`` (and the same origin-id; made up when not given) -> its id."""
        async def send():
            message = self.client.make_message(mto=to, mbody=text, mtype=kind)
            if stanza_id:
                message["id"] = stanza_id
            message.append(ET.Element(ORIGIN, id=message["id"]))
            message.send()
            return message["id"]
        wait_for(self.online.is_set, 60, 0.05, f"{self.user} online to say {text!r}")
        return run(send())

    def join(self, room: str, nick: str) -> None:
        async def send():
            presence = self.client.make_presence(pto=f"{room}/{nick}")
            presence.append(ET.Element("{http://jabber.org/protocol/muc}x"))
            presence.send()
        run(send())

    def send_file(self, to: str, data: bytes, name: str, mime: str, caption: str, stanza_id: str) -> None:
        """A file as clients send one: uploaded to the server's upload service (XEP-0363: a slot, then a PUT), then
        a message whose body is its address, the same address as an out-of-band link (XEP-0066)."""
        async def slot():
            iq = self.client.make_iq_get(ito=self.server.upload)
            ET.SubElement(iq.xml, "{urn:xmpp:http:upload:0}request", filename=name, size=str(len(data)),
                          **{"content-type": mime})
            answer = (await iq.send(timeout=30)).xml.find("{urn:xmpp:http:upload:0}slot")
            put = answer.find("{urn:xmpp:http:upload:0}put")
            headers = {h.get("name"): h.text for h in put.findall("{urn:xmpp:http:upload:0}header")}
            return put.get("url"), answer.find("{urn:xmpp:http:upload:0}get").get("url"), headers
        put_url, get_url, headers = run(slot())
        request = urllib.request.Request(put_url, data=data, method="PUT",
                                         headers=dict(headers, **{"Content-Type": mime}))
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert 200 <= answer.status < 300, answer.status

        async def send():
            message = self.client.make_message(mto=to, mbody=get_url, mtype="chat")
            message["id"] = stanza_id
            message.append(ET.Element(ORIGIN, id=stanza_id))
            oob = ET.SubElement(message.xml, "{jabber:x:oob}x")
            ET.SubElement(oob, "{jabber:x:oob}url").text = get_url
            ET.SubElement(oob, "{jabber:x:oob}desc").text = caption
            message.send()
        run(send())

    def invite(self, room: str, bot: str, direct: bool = False) -> None:
        """Invite ``bot`` into ``room``: through the room (XEP-0045 mediated) or ``direct`` (XEP-0249)."""
        async def send():
            if direct:
                message = self.client.make_message(mto=bot)
                message.append(ET.Element("{jabber:x:conference}x", jid=room))
            else:
                message = self.client.make_message(mto=room)
                x = ET.Element("{http://jabber.org/protocol/muc#user}x")
                ET.SubElement(x, "{http://jabber.org/protocol/muc#user}invite", to=bot)
                message.append(x)
            message.send()
        run(send())

    def kick(self, room: str, nick: str, timeout: float = 30.0) -> None:
        """Kick ``nick`` out of ``room`` (XEP-0045 8.2: a moderator's role change to none), once the room agreed."""
        async def send():
            iq = self.client.make_iq_set(ito=room)
            query = ET.SubElement(iq.xml, "{http://jabber.org/protocol/muc#admin}query")
            ET.SubElement(query, "{http://jabber.org/protocol/muc#admin}item", nick=nick, role="none")
            await iq.send(timeout=timeout)
        run(send(), timeout + 5)

    def occupants(self, room: str) -> set[str]:
        """The nicks in ``room`` as this client last saw them (its presences, in order)."""
        with self.lock:
            seen = list(self.presences)
        present: set[str] = set()
        for sender, available in seen:
            if sender.split("/", 1)[0].lower() == room and "/" in sender:
                (present.add if available else present.discard)(sender.split("/", 1)[1])
        return present

    def synced(self, timeout: float = 30.0) -> None:
        """Everything the server routed to us before now has come: a ping to the server is answered after it."""
        async def ping():
            iq = self.client.make_iq_get(ito=self.server.domain)
            iq.append(ET.Element("{urn:xmpp:ping}ping"))
            await iq.send(timeout=timeout)
        run(ping(), timeout + 5)

    # -- what the chat shows
    def chat_with(self, peer: str, room: bool = False) -> list[dict]:
        """The bot's messages as this client shows them: {"message_id", "text", "deleted"}, corrections applied
        (when the client shows them), retractions marked, a room's history and chat states left out."""
        with self.lock:
            items = list(self.received)
        shown: list[dict] = []
        by_id: dict[str, dict] = {}
        for item in items:
            sender = item["from"] if room else item["from"].split("/", 1)[0].lower()
            if sender != peer or item["body"] is None or (room and item["delayed"]):
                continue
            target = by_id.get(item["replace"] or "") if self.corrections else None
            if item["retract"] and item["retract"] in by_id:
                by_id[item["retract"]]["deleted"] = True
                continue
            if target is not None:
                target["text"] = item["body"]
                continue
            entry = {"message_id": item["origin_id"] or item["id"], "text": item["body"], "deleted": False}
            by_id[entry["message_id"]] = entry
            shown.append(entry)
        return shown

    def composing_from(self, peer: str) -> int:
        with self.lock:
            return sum(1 for i in self.received if i["composing"] and i["from"].split("/", 1)[0].lower() == peer)
