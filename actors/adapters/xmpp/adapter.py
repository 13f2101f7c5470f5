"""XmppAdapter: one XMPP account (RFC 6120/6121) through slixmpp, on the adapter's loop (actors/adapters/xmpp/README.md).

Intake (push style). ``XmppLink`` (client.py) logs in with STARTTLS and SASL, resumes the last stream management
session where the server still has it (XEP-0198), else starts one (initial presence, the configured rooms joined
without history, and the rooms joined on invitation in earlier lives) and queues each message that is input
(inbound.py); ``run_intake`` hands them to the intake, which commits them before the next batch is taken. A lost
connection ends ``run_intake`` and the kit reconnects with backoff; the same client resumes, so nothing the server
routed to the hibernating session is lost. A message the server delivers twice (a resumed stream, offline storage)
carries its ids again: the inbox keeps one.

Outbound. A message's ``id`` and ``origin-id`` (XEP-0359) are derived from the op's ``platform_key`` (its op id with
its content), so a retry of one operation, in any life of the daemon, carries the same id, and another edit never
does. Each returns once the server acknowledged the stanza (client.py). Replies stream as corrections (XEP-0308:
``<replace id=...>`` naming the reply's first message, each with the whole text) where corrections are shown: always
in rooms (``corrections = "never"`` aside), in a one-to-one chat where the peer's client says so in service
discovery (``corrections = "auto"``). Elsewhere a preview goes nowhere (the peer is shown the bot composing): the
send answers the id its message will have and the final edit sends the whole text under it, once. A delete is a
retraction (XEP-0424); an edit of a retracted message is refused as not found. Typing is the ``composing`` chat
state (XEP-0085). A file goes by HTTP upload (XEP-0363, upload.py) where the server offers it, else it is refused as
not supported here; a user's file, a link to the upload service of the bot's own server, is fetched as an
attachment (``download_attachment``; links elsewhere stay text).

Invitations (XEP-0045 mediated, XEP-0249 direct): with ``join_on_invite = "allowlist"`` (the default) the inviter
must be someone the access rules admit (inbound.py ``invite_refusal``), ``"anyone"`` takes every one, ``"off"``
none; at most ``max_invited_rooms``. A room taken is written to the adapter state row ``NAME#invited-rooms`` before
it is joined, and joined at every new session after.

State: the link (one stream at a time), the rooms joined by invitation (read once from storage), the messages
withheld for a peer without corrections and those sent whole (bounded), the ids retracted (bounded). Messages: those
of every ``PlatformAdapter`` (base.py): PlatformOp in, OpResult out; doorbells to the sessions of committed
messages.

What survives kill -9: the ledger's record of each part's id (the id the server got, derived from the op); the rooms
joined by invitation (committed before the join). The stream management session dies with the process: the server
hibernates it, and replaces it when the next life binds the same resource; messages routed to it meanwhile are what
the server keeps or bounces (README.md). A withheld preview is nothing on the server: the next life's final edit
sends the whole text under the recorded id.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Any, Optional

from actors.adapters.errors import MessageNotFoundError, PermanentError, TooLongError
from actors.adapters.idempotency import platform_key
from actors.adapters.intake_styles import StreamingAdapter
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.adapters.queued_intake import next_batch
from actors.adapters.xmpp.client import LinkLost, XmppLink
from actors.adapters.xmpp.formatting import to_xmpp
from actors.adapters.xmpp.inbound import bare, event_from_raw, invite_refusal, is_input
from actors.adapters.xmpp.upload import file_url_allowed, get, http_origin, put
from actors.messages import Attachment, MessageEvent, PlatformOp

BATCH = 100                        # inbound messages committed in one round at most
KEPT = 2000                        # withheld, whole-sent and retracted message ids remembered (oldest forgotten)
RETRACT_FALLBACK = "(this message was retracted)"
INVITED_ROOMS = "{}#invited-rooms"   # the adapter state row of the rooms joined by invitation (no adapter name has #)
INVITES_AT_ONCE = 10               # invitations being decided at once; more meanwhile are dropped (a flood)


def stanza_id(op: PlatformOp) -> str:
    """The id of the stanza that carries ``op``: the same for every attempt at it, in any life."""
    return "gw" + platform_key(op)[:30]


def _remember(book: collections.OrderedDict, key: str, value: Any) -> None:
    book[key] = value
    book.move_to_end(key)
    while len(book) > KEPT:
        book.popitem(last=False)


class XmppAdapter(StreamingAdapter):
    def __init__(self):
        super().__init__()
        self.link: Optional[XmppLink] = None
        self.skipped = 0                   # room messages that did not address the bot
        self._withheld: collections.OrderedDict = collections.OrderedDict()   # id -> chat, nothing sent yet
        self._whole: collections.OrderedDict = collections.OrderedDict()      # id -> text sent whole
        self._retracted: collections.OrderedDict = collections.OrderedDict()
        self._invited: Optional[dict] = None       # room -> {"password", "by", "at"}: the durable record, once read
        self._deciding: set = set()                # invitations being decided, rooms being forgotten
        self._record_lock = asyncio.Lock()         # one change of the record at a time (each reads, then writes)

    def _link(self) -> XmppLink:
        if self.link is None:
            self.link = XmppLink(self.settings, self.name, self.say, alive=self.report_progress,
                                 invited=self._on_invitation, removed=self._on_removal)
        return self.link

    # ---------------------------------------------------------------------------------- rooms joined on invitation
    async def _invited_rooms(self) -> dict:
        """The rooms joined by invitation in any earlier life (the adapter state row ``NAME#invited-rooms``)."""
        if self._invited is None:
            store = await self.ready_storage()
            saved = await store.inbox.get_offset(INVITED_ROOMS.format(self.name), {})
            self._invited = {bare(room): dict(record) for room, record in (saved or {}).items()
                             if isinstance(room, str) and isinstance(record, dict)}
        return self._invited

    def _on_invitation(self, invite: dict) -> None:
        """An invitation came (on the loop, from the link's handler): decided in a task of its own."""
        if self.settings["join_on_invite"] == "off":
            self.say(logging.INFO, "%s: invitation to %s from %s ignored (join_on_invite = \"off\")", self.name,
                     invite["room"], invite["inviter"])
            return
        if len(self._deciding) >= INVITES_AT_ONCE:
            self.say(logging.WARNING, "%s: invitation to %s from %s dropped: %d being decided", self.name,
                     invite["room"], invite["inviter"], len(self._deciding))
            return
        task = asyncio.get_running_loop().create_task(self._decide_invitation(invite))
        self._deciding.add(task)
        task.add_done_callback(self._deciding.discard)

    def _on_removal(self, room: str, why: str) -> None:
        """A room kicked, banned or refused us for good (on the loop): one joined by invitation is forgotten (a
        configured one is joined again, as the table says). Out of the link's rooms at once; out of the record in a
        task: a kill -9 before that write leaves it there, and the next life's join is refused or taken again."""
        if self._invited is None or room not in self._invited or room in {bare(r) for r in self.settings["rooms"]}:
            return
        self._link().rooms.pop(room, None)
        self.say(logging.INFO, "%s: leaving %s for good (%s)", self.name, room, why)
        task = asyncio.get_running_loop().create_task(self._forget_room(room))
        self._deciding.add(task)
        task.add_done_callback(self._deciding.discard)

    async def _forget_room(self, room: str) -> None:
        try:
            async with self._record_lock:
                record = {r: v for r, v in (await self._invited_rooms()).items() if r != room}
                await (await self.ready_storage()).inbox.set_offset(INVITED_ROOMS.format(self.name), record)
                self._invited = record
        except Exception as exc:  # noqa: BLE001 - a storage error: the next life finds the room and is refused
            self.say(logging.WARNING, "%s: %s not forgotten: %s", self.name, room, self.clean_error(exc))

    async def _decide_invitation(self, invite: dict) -> None:
        link, room = self._link(), invite["room"]
        try:
            async with self._record_lock:
                invited = await self._invited_rooms()
                if room in link.rooms:
                    link.join(room, link.rooms[room])          # ours already: joined again if it is not now
                    return
                granted = False
                if self.settings["join_on_invite"] == "allowlist" and not self.intake.gatekeeper.policy \
                        .admits_without_lookup(invite["inviter"]):
                    store = await self.ready_storage()
                    granted = invite["inviter"] in await store.access.granted_among(self.name, {invite["inviter"]})
                refusal = invite_refusal(invite, self.settings["join_on_invite"], self.intake.gatekeeper.policy,
                                         granted, len(invited), self.settings["max_invited_rooms"])
                if refusal:
                    self.say(logging.INFO, "%s: invitation to %s from %s refused: %s", self.name, room,
                             invite["inviter"], refusal)
                    return
                record = dict(invited, **{room: {"password": invite["password"], "by": invite["inviter"],
                                                 "at": time.time()}})
                # Durable before the join: a kill -9 after this line finds the room in the record and joins it at
                # the next session; one before it loses the invitation (the inviter invites again).
                await (await self.ready_storage()).inbox.set_offset(INVITED_ROOMS.format(self.name), record)
                self._invited = record
                self.say(logging.INFO, "%s: joining %s, invited by %s (%s)", self.name, room, invite["inviter"],
                         invite["how"])
                link.join(room, invite["password"])
        except Exception as exc:  # noqa: BLE001 - a storage error: the invitation is not taken, nothing half-done
            self.say(logging.WARNING, "%s: invitation to %s not taken: %s", self.name, room, self.clean_error(exc))

    # -------------------------------------------------------------------------------------------------- intake
    def normal_silence_s(self) -> float:
        # The link pings the server after ping_interval_s of silence and gives the stream up after ping_timeout_s
        # with nothing at all (client.py): a stanza comes at least that often on a live stream.
        return self.settings["ping_timeout_s"] + self.settings["ping_interval_s"]

    async def connect(self) -> None:
        link = self._link()
        for room, record in (await self._invited_rooms()).items():   # joined at the next new session
            link.rooms.setdefault(room, str(record.get("password") or ""))
        if not link.ready.is_set():
            await link.open()

    async def disconnect(self) -> None:
        if self.link is None:
            return
        if self.intake_stopped and self.link.ready.is_set():
            return            # draining: the answers in flight still go out on this stream
        await self.link.drop()   # the session stays resumable: the next connect resumes it

    async def run_intake(self, emit) -> None:
        link = self._link()
        while True:
            batch = await next_batch(link.inbound, link.closed, lambda: link.failure or LinkLost("the stream ended"), BATCH)
            wanted = [raw for raw in batch if is_input(raw, self.settings["require_mention"])]
            self.skipped += len(batch) - len(wanted)
            if wanted:
                await emit(wanted)

    def _file_hosts(self) -> tuple:
        """Where a user's file may be fetched from: the bot's own server over https (its domain, its subdomains,
        ``host``), and the plain-HTTP origins ``http_file_origins`` names (upload.file_url_allowed)."""
        return (self.settings["jid"].split("@", 1)[1], self.settings["host"],
                *(http_origin(o) for o in self.settings["http_file_origins"]))

    def normalise(self, raw: Any) -> MessageEvent:
        return event_from_raw(raw, self.name, self.profile, self.settings["require_mention"], self._file_hosts())

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        """A file a user sent as a link to the upload service of the bot's own server (inbound.py)."""
        if not file_url_allowed(attachment.ref, self._file_hosts()):
            raise AttachmentGone(f"{attachment.ref!r} is not on this server")
        return await get(attachment.ref, cap, self.settings["ca_file"], lambda size: AttachmentTooLarge(size, cap),
                         AttachmentGone)

    # ------------------------------------------------------------------------------------------------ outbound
    async def _kind(self, chat_id: str) -> str:
        """A room (configured, or joined by invitation in any life) or a one-to-one chat."""
        room = bare(chat_id)
        return "groupchat" if room in self._link().rooms or room in await self._invited_rooms() else "chat"

    async def _corrections(self, chat_id: str) -> bool:
        mode = self.settings["corrections"]
        if mode != "auto":
            return mode == "always"
        return await self._kind(chat_id) == "groupchat" or await self._link().corrects(bare(chat_id))

    def _text(self, op: PlatformOp) -> str:
        text = to_xmpp(op.text)
        if len(text) > self.pacing.text_limit:
            raise TooLongError(f"{len(text)} characters, over {self.pacing.text_limit}", method="message")
        if not text.strip():
            raise PermanentError("an empty message", method="message")
        return text

    async def send_message(self, op: PlatformOp) -> str:
        text, sid = self._text(op), stanza_id(op)
        if not op.final and not await self._corrections(op.chat_id):
            _remember(self._withheld, sid, op.chat_id)     # a preview the peer could not see replaced: the peer
            await self.send_typing(op)                     # sees the bot composing until the whole answer
            return sid
        await self._link().send(op.chat_id, await self._kind(op.chat_id), text, sid)
        _remember(self._whole, sid, text)
        return sid

    async def edit_message(self, op: PlatformOp) -> None:
        target = op.message_id or ""
        if target in self._retracted:
            raise MessageNotFoundError(f"{target} was retracted", method="correction")
        text = self._text(op)
        if await self._corrections(op.chat_id):
            await self._link().send(op.chat_id, await self._kind(op.chat_id), text, stanza_id(op), replace=target)
            return
        if not op.final or self._whole.get(target) == text:
            return                                          # previews stay unseen; the final text went already
        if target in self._whole:                           # a final text changed after it went whole: corrected
            await self._link().send(op.chat_id, await self._kind(op.chat_id), text, stanza_id(op), replace=target)
        else:                                               # the withheld message goes now, whole, under its id
            await self._link().send(op.chat_id, await self._kind(op.chat_id), text, target)
        self._withheld.pop(target, None)
        _remember(self._whole, target, text)

    async def delete_message(self, op: PlatformOp) -> None:
        target = op.message_id or ""
        if target in self._retracted:
            return
        if self._withheld.pop(target, None) is None:
            await self._link().send(op.chat_id, await self._kind(op.chat_id), RETRACT_FALLBACK, stanza_id(op),
                                    retract=target)
        _remember(self._retracted, target, True)

    async def send_file(self, op: PlatformOp) -> str:
        """The file by HTTP upload (XEP-0363): a slot from the server's upload service, the bytes PUT there, then a
        message whose body is the file's address, with the same address as an out-of-band link (XEP-0066, the
        caption its description), which clients show inline. A server without the service: refused, permanently.
        A retry asks for a new slot (the one before, if its PUT went, is an orphan on the server, seen by no one);
        its message carries the op's id as every attempt does."""
        link = self._link()
        service = await link.upload_service()
        if service is None:
            raise PermanentError("files are not supported here: the server offers no HTTP upload (XEP-0363)",
                                 method="upload")
        jid, limit = service
        data = await self.file_bytes(op.file)
        if limit and len(data) > limit:
            raise PermanentError(f"{len(data)} bytes, over the upload service's {limit}", method="upload")
        name = op.file.name or ("image" if op.file.kind == "photo" else "file")
        put_url, get_url, headers = await link.upload_slot(jid, name, len(data), op.file.mime)
        await put(put_url, headers, data, op.file.mime, self.settings["ca_file"])
        sid = stanza_id(op)
        await link.send(op.chat_id, await self._kind(op.chat_id), get_url, sid,
                        link=(get_url, to_xmpp(op.file.caption)))
        return sid

    async def send_typing(self, op: PlatformOp) -> None:
        link = self._link()
        if link.ready.is_set():
            await link.send(op.chat_id, await self._kind(op.chat_id), None, stanza_id(op), chat_state="composing")

    async def close(self) -> None:
        if self.link is not None:
            await self.link.close()
