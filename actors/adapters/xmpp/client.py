"""XmppLink: the bot's one XMPP client stream (slixmpp), on the adapter's loop.

State: the slixmpp client (made once and kept across reconnects, so a stream management session can be resumed:
XEP-0198), whether a session is up (``ready``), our rooms (configured, and those the adapter took an invitation to)
and the ones joined with our nick in each, the inbound queue, the sends waiting for the server's acknowledgement,
the peers' support for corrections (XEP-0308, asked by service discovery), the server's upload service (XEP-0363).

    open()          connect with STARTTLS (the certificate verified: the system's CAs or ``ca_file``), SASL, bind;
                    resume the last session where the server still has it, else start one (initial presence, the
                    configured rooms joined); PermanentError for refused credentials, RetryableError for the rest
    inbound         the messages received, as raw dicts (inbound.py), for the adapter's intake (bounded)
    invited(...)    the adapter's callback for each invitation to a room (inbound.py ``invitation``): it decides
    join(room)      a room of ours from now on: joined now and at every new session
    upload_service(), upload_slot(...)   the server's upload service, found by service discovery, and a slot
    send(...)       one message stanza, returned once the server acknowledged it (stream management) or answered a
                    ping sent after it (the server handles one stream's stanzas in order)
    close()         the stream ended properly (the server ends the session), idempotent

What the server guarantees us: with stream management, a stanza we sent is the server's once it acknowledged it;
a connection that dies before is resumed within the server's hibernation time, and slixmpp sends again what was
not acknowledged, so a reply is neither lost nor doubled within this life. A session the server dropped meanwhile
fails the sends still waiting (``maybe_done``: they may have arrived). Inbound: while the bot has no session, the
server keeps its one-to-one messages (offline storage) and delivers them with the next initial presence.

Liveness: every stanza from the server is proof of life (``alive``); after ``ping_interval_s`` of silence the link
pings the server, and a connection silent for ``ping_timeout_s`` is aborted (a half-open TCP connection is
otherwise never noticed).
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import ssl
import time
import xml.etree.ElementTree as ET
from typing import Callable, Optional

from actors.adapters.errors import PermanentError, RetryableError
from actors.adapters.xmpp.inbound import (CORRECTION_FEATURE, MUC_NS, NS_CHATSTATES, bare, invitation,
                                          raw_from_message, removal, room_presence)
from actors.adapters.xmpp.upload import OOB_NS, UPLOAD_NS, service_from_info, slot_from_answer

logging.getLogger("slixmpp").setLevel(logging.CRITICAL)   # its own log lines would go to the actor's stderr
RESOURCE = "gateway"
REJOIN_S = 10.0
CORRECTION_CACHE = 1000            # peers whose support for corrections is remembered
DISCO_TIMEOUT_S = 5.0
SENDS_KEPT = 2000                  # our own recent message ids: echoes in rooms are recognised by them
UPLOAD_CANDIDATES = 20             # the server's disco items asked whether they are its upload service


class LinkLost(RetryableError):
    """The stream ended (closed, reset, ping timeout)."""


class XmppLink:
    def __init__(self, settings: dict, name: str, say: Callable[..., None], alive: Callable[[], None] = lambda: None,
                 resource: str = RESOURCE, presence: bool = True,
                 invited: Callable[[dict], None] = lambda invite: None,
                 removed: Callable[[str, str], None] = lambda room, why: None):
        """``presence`` False: log in only (the doctor's probe): no presence, so the server delivers none of the
        messages it keeps for the bot, and no rooms; under another ``resource`` than the gateway's, which the server
        would otherwise cut off. ``invited``: called with each invitation to a room (inbound.py), on the loop;
        ``removed``: with a room that kicked, banned or refused us for good (before it is joined again: the callback
        may take it out of ``rooms``)."""
        self.settings, self.name, self.say, self.alive = settings, name, say, alive
        self.resource, self.presence, self.invited, self.removed = resource, presence, invited, removed
        self.rooms: dict[str, str] = {bare(room): "" for room in settings["rooms"]}   # room -> its password
        self.client = None
        self.inbound: asyncio.Queue = asyncio.Queue(maxsize=settings["max_queued_messages"])
        self.dropped = 0
        self.ready = asyncio.Event()
        self.closed = asyncio.Event()
        self.closed.set()
        self.failure: Optional[BaseException] = None
        self.joined: dict[str, str] = {}          # room -> our nick there (after the room's self-presence)
        self.resumptions = 0
        self.sessions = 0
        self._waiting: dict[str, asyncio.Future] = {}
        self._ours: collections.OrderedDict = collections.OrderedDict()
        self._corrections: collections.OrderedDict = collections.OrderedDict()
        self._peers: collections.OrderedDict = collections.OrderedDict()   # bare JID -> last full JID heard
        self._last_data = 0.0
        self._watch: Optional[asyncio.Task] = None
        self._stage: Optional[asyncio.Future] = None
        self._unnamed = itertools.count(1)
        self._upload: Optional[tuple[str, int]] = None     # the server's upload service (XEP-0363), once found

    # ------------------------------------------------------------------------------------------ connecting
    def _make_client(self):
        import slixmpp   # only where an XMPP adapter runs
        s = self.settings
        client = slixmpp.ClientXMPP(f"{s['jid']}/{self.resource}", s["password"])
        client.enable_direct_tls = bool(s["direct_tls"])
        client.enable_starttls = not s["direct_tls"]
        client.enable_plaintext = False
        client.use_aiodns = False
        if s["ca_file"]:      # trusted besides the system's CAs; the host name is checked all the same
            context = ssl.create_default_context()
            context.load_verify_locations(cafile=s["ca_file"])
            client.ssl_context = context
        for plugin in ("xep_0030", "xep_0199"):
            client.register_plugin(plugin)
        client.register_plugin("xep_0198")
        client.plugin["xep_0030"].add_feature(CORRECTION_FEATURE)
        client.plugin["xep_0030"].add_feature(NS_CHATSTATES)
        client.add_event_handler("session_start", self._session_started)
        client.add_event_handler("session_resumed", self._session_resumed)
        # A new session is ready once every stream feature is negotiated, stream management's enable answered
        # included: a stream dropped before that answer could not be resumed.
        client.add_event_handler("stream_negotiated", lambda _event: self._settle(None))
        client.add_event_handler("session_end", self._session_ended)
        client.add_event_handler("failed_auth", self._auth_failed)
        client.add_event_handler("ssl_invalid_chain", self._untrusted)
        client.add_event_handler("disconnected", self._disconnected)
        client.add_event_handler("stanza_acked", self._acked)
        client.add_event_handler("message", self._message)
        # Invitations often come without a body, which slixmpp's "message" event leaves out: every message stanza.
        from slixmpp.xmlstream.handler import Callback   # only where an XMPP adapter runs, as slixmpp above
        from slixmpp.xmlstream.matcher import MatchXPath  # (likewise)
        client.register_handler(Callback("invitations", MatchXPath("{jabber:client}message"), self._invitation))
        client.add_event_handler("presence", self._presence)
        client.add_filter("in", self._incoming)
        client.add_filter("out_sce", self._outgoing)
        return client

    async def open(self) -> None:
        s = self.settings
        if self.client is None:
            try:
                self.client = self._make_client()
            except (OSError, ssl.SSLError) as exc:
                raise PermanentError(f"ca_file {s['ca_file']!r} cannot be used: {exc}", method="TLS") from None
        self.failure = None
        self._stage = asyncio.get_running_loop().create_future()
        where = f"{s['host']}:{s['port']}"
        self.client.connect(s["host"], s["port"])
        try:
            await asyncio.wait_for(asyncio.shield(self._stage), s["connect_timeout_s"])
        except asyncio.TimeoutError:
            self.client.cancel_connection_attempt()
            self.client.abort()
            raise RetryableError(f"no XMPP session at {where} within {s['connect_timeout_s']:g}s",
                                 method="connect") from None
        failure = self._stage.result()
        if failure is not None:
            self.client.cancel_connection_attempt()
            self.client.abort()
            raise failure
        self.closed.clear()
        self._last_data = asyncio.get_running_loop().time()
        self._watch = asyncio.get_running_loop().create_task(self._keepalive())
        self.ready.set()

    def _settle(self, failure: Optional[BaseException]) -> None:
        if self._stage is not None and not self._stage.done():
            self._stage.set_result(failure)

    def _session_started(self, _event) -> None:
        """A new session (not a resumed one): the server forgot our presence and rooms, so both are sent again; the
        offline messages come after the initial presence."""
        self.sessions += 1
        self.joined.clear()
        if self.presence:
            self.client.send_presence(ppriority=self.settings["priority"])
            for room, password in self.rooms.items():
                self._join(room, password)

    def _session_resumed(self, _event) -> None:
        self.resumptions += 1
        self._settle(None)

    def _session_ended(self, _event) -> None:
        """The server's session is gone (a resumption refused, or none to resume): sends still waiting for its
        acknowledgement may or may not have arrived."""
        self._fail_waiting(RetryableError("the server ended the session before acknowledging the message",
                                          method="message", maybe_done=True))

    def _auth_failed(self, _event) -> None:
        self._settle(PermanentError(f"the server refused the credentials of {self.settings['jid']}", method="SASL"))

    def _untrusted(self, error) -> None:
        """The server's certificate is not vouched for by a CA we trust, or names another host: no login."""
        self._settle(PermanentError(f"the server's certificate is not trusted for {self.client.boundjid.domain} "
                                    f"({error}); ca_file names a CA of your own", method="TLS"))
        if self.client.transport is not None:
            self.client.abort()

    def _disconnected(self, reason) -> None:
        self.ready.clear()
        self.closed.set()
        if self.failure is None:
            self.failure = LinkLost(f"the stream ended{f': {reason}' if reason else ''}")
        if isinstance(reason, ssl.SSLCertVerificationError):
            self._untrusted(reason)
        self._settle(LinkLost(f"the server closed the stream during login{f': {reason}' if reason else ''}"))

    def _join(self, room: str, password: str = "") -> None:
        nick = self.settings["nick"]
        presence = self.client.make_presence(pto=f"{room}/{nick}")
        muc = ET.Element(f"{{{MUC_NS}}}x")
        ET.SubElement(muc, f"{{{MUC_NS}}}history", maxchars="0")   # no history: it is not new (inbound.py)
        if password:
            ET.SubElement(muc, f"{{{MUC_NS}}}password").text = password
        presence.append(muc)
        presence.send()

    def join(self, room: str, password: str = "") -> None:
        """``room`` is one of ours from now on: joined now where a session is up, and at every new session."""
        self.rooms[bare(room)] = password
        if self.ready.is_set() and bare(room) not in self.joined:
            self._join(bare(room), password)

    def _rejoin(self, room: str) -> None:
        if self.ready.is_set() and room not in self.joined and room in self.rooms:
            self._join(room, self.rooms[room])

    async def close(self) -> None:
        """The stream ended by us: the server ends the session (nothing to resume)."""
        self._stop_keepalive()
        client = self.client
        if client is not None and client.transport is not None:
            try:
                await asyncio.wait_for(client.disconnect(wait=2.0), 5.0)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - closing: whatever happens, it is gone
                client.abort()
        self.ready.clear()
        self.closed.set()

    async def drop(self) -> None:
        """The connection cut without ending the stream: the session stays resumable on the server."""
        self._stop_keepalive()
        client = self.client
        if client is not None and client.transport is not None:
            gone = client.disconnected     # set when the transport is closed: the events of this connection ran
            client.abort()
            try:
                await asyncio.wait_for(asyncio.shield(gone), 5.0)
            except asyncio.TimeoutError:
                pass
        self.ready.clear()
        self.closed.set()

    def _stop_keepalive(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None and watch is not asyncio.current_task():
            watch.cancel()

    async def _keepalive(self) -> None:
        s, loop = self.settings, asyncio.get_running_loop()
        while self.ready.is_set():
            await asyncio.sleep(max(0.05, min(s["ping_interval_s"], s["ping_timeout_s"]) / 2))
            silent = loop.time() - self._last_data
            if silent >= s["ping_timeout_s"]:
                self.failure = LinkLost(f"ping timeout: nothing from the server for {s['ping_timeout_s']:g}s")
                self.client.abort()
                return
            if silent >= s["ping_interval_s"]:
                self._ping()

    def _ping(self) -> None:
        iq = self.client.make_iq_get(ito=self.client.boundjid.domain)
        iq.append(ET.Element("{urn:xmpp:ping}ping"))
        answer = iq.send(timeout=self.settings["ping_timeout_s"])
        answer.add_done_callback(lambda done: done.cancelled() or done.exception())   # only the traffic counts

    # --------------------------------------------------------------------------------------------- reading
    def _incoming(self, stanza):
        self._last_data = asyncio.get_running_loop().time()
        self.alive()
        return stanza

    def _presence(self, presence) -> None:
        seen = room_presence(presence.xml, self.rooms, self.joined.get(presence["from"].bare, self.settings["nick"]))
        if seen is None:
            return
        room, state, nick = seen
        if state == "joined":
            self.joined[room] = nick
        elif state in ("left", "refused"):
            self.joined.pop(room, None)
            why = removal(presence.xml)
            if why:
                self.removed(room, why)
            if room not in self.rooms:
                return
            self.say(30, "%s: %s %s (%s); joining again in %gs", self.name, "out of" if state == "left" else
                     "refused by", room, nick, REJOIN_S)
            asyncio.get_running_loop().call_later(REJOIN_S, self._rejoin, room)

    def _message(self, message) -> None:
        xml = message.xml
        if xml.get("type") in ("chat", "normal", None) and "/" in xml.get("from", ""):
            peer = bare(xml.get("from"))
            self._peers[peer] = xml.get("from")
            self._peers.move_to_end(peer)
            while len(self._peers) > CORRECTION_CACHE:
                self._peers.popitem(last=False)
        raw = raw_from_message(xml, self.client.boundjid.bare, self.joined, self._ours)
        if raw is None:
            return
        raw["at"] = time.time()
        if raw["id"] is None:      # no id from the server nor the sender: one of our own, never another's
            raw["id"] = f"local.{time.time_ns():x}.{next(self._unnamed)}"
        try:
            self.inbound.put_nowait(raw)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 100 == 0:
                self.say(30, "%s: inbound queue full (%d messages): %d dropped so far", self.name,
                         self.inbound.maxsize, self.dropped)

    def _invitation(self, message) -> None:
        invite = invitation(message.xml)
        if invite is not None and self.presence:
            self.invited(invite)

    # --------------------------------------------------------------------------------------------- writing
    def _outgoing(self, stanza):
        """A message of ours is asked to be acknowledged right after it is written (slixmpp's own request, made
        every few stanzas, goes before the stanza it counts)."""
        sm = self.client.plugin["xep_0198"]
        if sm.enabled_out and stanza.xml.get("id") in self._waiting:
            asyncio.get_running_loop().call_soon(sm.request_ack)
        return stanza

    async def wait_ready(self, room: Optional[str], timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not (self.ready.is_set() and (room is None or room in self.joined)):
            if loop.time() >= deadline:
                state = "not connected" if not self.ready.is_set() else f"not in {room}"
                raise RetryableError(f"{state} after {timeout:g}s", method="message", retry_after=1.0)
            await asyncio.sleep(0.05)

    async def send(self, to: str, kind: str, body: Optional[str], stanza_id: str, *, replace: str = "",
                   retract: str = "", chat_state: str = "", link: Optional[tuple[str, str]] = None) -> None:
        """One message stanza to ``to`` (``kind``: chat or groupchat) with id and origin-id ``stanza_id``,
        returned once the server has it."""
        room = to if kind == "groupchat" else None
        if body is None and not (self.ready.is_set() and (room is None or room in self.joined)):
            return                         # a chat state is a courtesy: never waited for
        await self.wait_ready(room, self.settings["send_wait_s"])
        message = self.client.make_message(mto=to, mbody=body, mtype=kind)
        message["id"] = stanza_id
        origin = ET.Element("{urn:xmpp:sid:0}origin-id", id=stanza_id)
        message.append(origin)
        if replace:
            message.append(ET.Element("{urn:xmpp:message-correct:0}replace", id=replace))
        if retract:
            message.append(ET.Element("{urn:xmpp:message-retract:1}retract", id=retract))
            message.append(ET.Element("{urn:xmpp:fallback:0}fallback", {"for": "urn:xmpp:message-retract:1"}))
            message.append(ET.Element("{urn:xmpp:hints}store"))
        if chat_state:
            message.append(ET.Element(f"{{{NS_CHATSTATES}}}{chat_state}"))
        if link is not None:       # an out-of-band link (XEP-0066): (url, description)
            oob = ET.SubElement(message.xml, f"{{{OOB_NS}}}x")
            ET.SubElement(oob, f"{{{OOB_NS}}}url").text = link[0]
            if link[1]:
                ET.SubElement(oob, f"{{{OOB_NS}}}desc").text = link[1]
        if chat_state and body is None:
            message.append(ET.Element("{urn:xmpp:hints}no-store"))
            message.send()
            return
        self._ours[stanza_id] = True
        while len(self._ours) > SENDS_KEPT:
            self._ours.popitem(last=False)
        await self._delivered(message, stanza_id)

    async def _delivered(self, message, stanza_id: str) -> None:
        loop = asyncio.get_running_loop()
        future = self._waiting.get(stanza_id)
        if future is None or future.done():
            future = self._waiting[stanza_id] = loop.create_future()
        sm = self.client.plugin["xep_0198"]
        try:
            message.send()
            if not sm.enabled_out:
                iq = self.client.make_iq_get(ito=self.client.boundjid.domain)
                iq.append(ET.Element("{urn:xmpp:ping}ping"))
                await iq.send(timeout=self.settings["send_wait_s"])
                if not future.done():
                    future.set_result(None)
            await asyncio.wait_for(asyncio.shield(future), self.settings["send_wait_s"])
        except asyncio.TimeoutError:
            raise RetryableError("the server did not acknowledge the message", method="message",
                                 maybe_done=True) from None
        except Exception as exc:  # noqa: BLE001 - slixmpp's own errors (an IQ timeout, no stream) become ours
            if isinstance(exc, (RetryableError, PermanentError)):
                raise
            raise RetryableError(f"{type(exc).__name__}: {exc}", method="message", maybe_done=True) from None
        finally:
            if future.done():
                self._waiting.pop(stanza_id, None)

    def _acked(self, stanza) -> None:
        if not stanza.xml.tag.endswith("}message"):
            return
        future = self._waiting.pop(stanza.xml.get("id", ""), None)
        if future is not None and not future.done():
            future.set_result(None)

    def _fail_waiting(self, why: BaseException) -> None:
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(why)
                future.exception()   # retrieved: nobody may be awaiting it any more

    async def corrects(self, peer: str) -> bool:
        """Whether ``peer`` (a bare JID we chat with) shows corrections: its client, as last heard from, says so in
        service discovery. Unknown (never heard from, no answer) is no."""
        full = self._peers.get(peer)
        if full is None:
            return False
        if full in self._corrections:
            return self._corrections[full]
        try:
            info = await self.client.plugin["xep_0030"].get_info(jid=full, timeout=DISCO_TIMEOUT_S)
            found = CORRECTION_FEATURE in info["disco_info"]["features"]
        except Exception:  # noqa: BLE001 - no answer or an error: the peer is taken to show no corrections
            found = False
        self._corrections[full] = found
        while len(self._corrections) > CORRECTION_CACHE:
            self._corrections.popitem(last=False)
        return found

    # -------------------------------------------------------------------------------------- HTTP upload (XEP-0363)
    async def upload_service(self) -> Optional[tuple[str, int]]:
        """The server's upload service (its JID, its largest file in bytes or 0), found by service discovery among
        the server's items; None where it offers none. Asked once a life where found."""
        if self._upload is not None:
            return self._upload
        await self.wait_ready(None, self.settings["send_wait_s"])
        disco, domain = self.client.plugin["xep_0030"], self.client.boundjid.domain
        try:
            items = await disco.get_items(jid=domain, timeout=DISCO_TIMEOUT_S)
            candidates = [domain] + [item[0] for item in items["disco_items"]["items"]][:UPLOAD_CANDIDATES]
        except Exception:  # noqa: BLE001 - no answer: the server itself may still be the service
            candidates = [domain]
        for jid in candidates:
            try:
                info = await disco.get_info(jid=jid, timeout=DISCO_TIMEOUT_S)
            except Exception:  # noqa: BLE001 - an item that does not answer is no upload service
                continue
            found = service_from_info(str(jid), info.xml.find("{http://jabber.org/protocol/disco#info}query"))
            if found is not None:
                self._upload = found
                return found
        return None

    async def upload_slot(self, service: str, name: str, size: int, mime: str) -> tuple[str, str, dict]:
        """A slot for one file: (put url, get url, headers for the PUT)."""
        iq = self.client.make_iq_get(ito=service)
        ET.SubElement(iq.xml, f"{{{UPLOAD_NS}}}request", filename=name, size=str(size), **{"content-type": mime})
        try:
            answer = await iq.send(timeout=self.settings["send_wait_s"])
        except Exception as exc:  # noqa: BLE001 - an error answer (too large, quota) or none at all
            from slixmpp.exceptions import IqError   # only where an XMPP adapter runs, as in _make_client
            if isinstance(exc, IqError):
                raise PermanentError(f"the upload service refused a slot: {exc.iq['error']['condition']} "
                                     f"{exc.iq['error']['text']}".strip(), method="upload slot") from None
            raise RetryableError(f"no upload slot: {type(exc).__name__}: {exc}", method="upload slot") from None
        return slot_from_answer(answer.xml.find(f"{{{UPLOAD_NS}}}slot"))
