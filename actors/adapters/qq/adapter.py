"""QQAdapter: one bot of the QQ open platform (app id and secret); the WebSocket gateway for intake, the OpenAPI
for passive replies (README.md beside this file).

State (loop thread): the OpenAPI client with its cached app token (client.py), the gateway link and its session
(gateway.py) or the callback server (webhook.py), the chats' anchors and the reply book (replies.py), the bot's
guild user id (READY), the active-message quota note. What survives kill -9: the rows committed with the offset,
and the offset itself: the gateway session's position (session id, seq), the chats' anchors, and the reply book
(the passive replies made per user message, committed before each new one goes). A restarted adapter resumes that
session, and QQ replays what came after the committed seq: nothing that reached QQ while the adapter was dead is
lost, and a message replayed is one row (the inbox dedups on its id). The token is not kept: a new life fetches
one.

Intake. ``connect`` fetches the app token (a wrong app id or secret is refused here, a PermanentError the kit shows
in ``status`` and retries slowly) and asks ``GET /gateway`` where to connect. ``run_intake`` serves the gateway:
every message dispatch that is input (inbound.is_input) is committed, with the position that covers it and the
chat's anchor moved to it, in one transaction, before the link's seq moves on and before the next frame is read;
READY commits the new session's position. A message that is no valid event (inbound.event_from_dispatch) is
logged and skipped by the kit, its position committed like any other.

Webhook mode (``mode = "webhook"``, webhook.py): QQ POSTs each event, signed with Ed25519; the callback server
answers the op 13 validation, refuses a request whose signature does not verify (401, nothing stored), and
acknowledges an event (op 12) only after it is committed (or skipped): a failure answers 500 and QQ sends it again.
The offset then holds the anchors only. The server is the intake's: started by ``run_intake``, stopped with it.

Outbound. A send goes to the chat's endpoint (inbound.send_route) as a passive reply where it can be: ``msg_id``
the op's ``reply_to`` or the chat's anchor within its window, ``msg_seq`` derived from the send's key
(replies.msg_seq); QQ refusing the pair as a duplicate (40054005) means an earlier attempt made the message, and
the send is answered with its id. QQ takes 5 passive replies per user message: the reply book counts them, and a
part past the count goes as an active message. Guild channels and DMs take ``msg_id`` but document no
``msg_seq``, nor any key they deduplicate on: a send there whose answer was lost (the kit repeats a keyed send) or
whose reply the ledger holds ambiguous (an earlier owner's send never came back) goes under the re-sent mark
(``_copy_may_exist``; the lost keys and the marked parts are this life's, bounded), so a copy may show twice but
never unmarked. Past the window, or with no message to answer, the
send is an active message, which QQ rations or refuses (its error is the op's; the quota used up shows in
``status`` until an active message goes). QQ has no edits: the contract's default answers a final edit of a sent
part ok, and the reply goes whole, in parts if long.

Markdown (``markdown = true``): a text goes as QQ's native markdown (``msg_type`` 2). QQ refusing it for the bot
(codes 50056, 304036) sends the same part as plain text under the same ``msg_id`` + ``msg_seq`` (nothing was sent),
and every later part in chats of that kind goes plain; ``status`` says so. The refusal is this life's: a new life
tries markdown once more (one refused request), so a permission granted meanwhile is used.

Files. A user's files come as pending attachments naming QQ's URLs (inbound.attachments_of), fetched by the intake
before the row is stored (``download_attachment``: no token goes with it). A reply's file (``send_file``) goes to a
C2C user or a group as QQ's rich media, uploaded and then sent as a ``msg_type`` 7 message, passive and numbered as
a text is; to a guild channel or DM as an image in the send (multipart). What QQ cannot take is refused before
anything is sent (media.py) and the reply names the file in its place.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Any, Optional

import aiohttp

from actors.adapters.errors import PermanentError, RetryableError, TooLongError
from actors.adapters.idempotency import platform_key
from actors.adapters.intake_styles import StreamingAdapter
from actors.adapters.liveness import SERVED_SILENCE_S
from actors.adapters.pacing import resent_marker
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.adapters.qq.client import (ActiveQuotaExhausted, DuplicateReply, FileTooLarge, MarkdownRefused,
                                       PassiveRefused, QQClient)
from actors.adapters.qq.gateway import QQGatewayLink
from actors.adapters.qq.inbound import event_from_dispatch, is_input, send_route, sent_at
from actors.adapters.qq.media import GUILD_KINDS, guild_image, upload_body
from actors.adapters.qq.replies import Anchors, ReplyBook, msg_seq, reply_id, usable
from actors.adapters.qq.webhook import CallbackServer
from actors.messages import Attachment, MessageEvent, PlatformOp
from supervision.http_serving import http_limits
from storage import StorageError

QQ_HEARTBEAT_S = 45.0        # QQ's heartbeat_interval is 41.25 s; a little more
SEQ_KINDS = ("c2c", "group")  # the endpoints that deduplicate on msg_id + msg_seq
REMEMBERED_GUILD_SENDS = 512  # guild parts whose answer was lost, and ambiguous replies, kept in memory


class QQAdapter(StreamingAdapter):
    def __init__(self):
        super().__init__()
        self.bot_id = ""
        self.skipped = 0                  # dispatches handled without becoming input
        self.duplicates = 0               # sends QQ refused as repeats of one it had (answered with its id)
        self.link: Optional[QQGatewayLink] = None
        self.anchors: Optional[Anchors] = None
        self.replies: Optional[ReplyBook] = None
        self.quota_note = ""              # set by an active message QQ refused for its quota, cleared by one that goes
        self.markdown_refused: dict[str, str] = {}   # chat kind -> QQ's refusal of markdown there (this life's)
        # Guild channels and DMs deduplicate nothing: the keys of sends there whose answer was lost (this life's),
        # and per ambiguous reply the one part that carries the re-sent mark (copy_may_exist).
        self._lost_guild_sends: collections.OrderedDict = collections.OrderedDict()
        self._marked_parts: collections.OrderedDict = collections.OrderedDict()   # obligation id -> key
        self._api: Optional[QQClient] = None
        self._ws_http: Optional[aiohttp.ClientSession] = None
        self._callbacks: Optional[CallbackServer] = None

    @property
    def webhook(self) -> bool:
        return self.settings["mode"] == "webhook"

    # -------------------------------------------------------------------------------------------------- intake
    def normal_silence_s(self) -> float:
        if self.webhook:
            return SERVED_SILENCE_S   # the kit probes the callback server (liveness.py)
        # A connected gateway answers a heartbeat every heartbeat_interval (41.25 s); the link itself reconnects
        # after one unacknowledged beat, so this bound is the last wall behind it.
        return 2 * QQ_HEARTBEAT_S + 15.0

    def client(self) -> QQClient:
        if self._api is None:
            s = self.settings
            self._api = QQClient(str(s["app_id"]), s["app_secret"], s["api_base_url"], s["auth_url"])
        return self._api

    async def connect(self) -> None:
        await self.client().token.get()     # a wrong app id or secret is refused here
        if self.webhook and not self.bot_id:  # no READY names the bot: guild messages mention it by this id
            self.bot_id = (await self.client().me())["id"]
        if self.link is None and not self.webhook:
            url = self.settings["gateway_url"] or await self.client().gateway_url()
            self.link = QQGatewayLink(self.client().bearer, lambda: self.client().token.drop(self.client().token.value),
                                      int(self.settings["intents"]), url, self.say, self.name,
                                      report=self.intake.link_changed, alive=self.report_progress)
            self.link.restore(self.offset)   # the session of the previous life, resumed if QQ still has it

    async def disconnect(self) -> None:
        http, self._ws_http = self._ws_http, None
        if http is not None:
            await http.close()
        server, self._callbacks = self._callbacks, None
        if server is not None:
            await server.stop()

    def served_url(self) -> Optional[str]:
        server = self._callbacks
        if server is None or server.port is None:
            return None
        return f"http://{self.settings['listen_host']}:{server.port}{self.settings['callback_path']}"

    async def run_intake(self, emit) -> None:
        await self.disconnect()
        if self.webhook:
            await self._serve_callbacks(emit)     # never returns
        self._ws_http = aiohttp.ClientSession()
        link, anchors = self.link, self._anchors()

        async def deliver(name: str, data: Any, seq: Any) -> None:
            if name == "READY":
                user = data.get("user") if isinstance(data, dict) else None
                self.bot_id = str(user.get("id") or "") if isinstance(user, dict) else self.bot_id
                await emit([], self._position(seq))   # a new session: the position to resume from after a restart
                return
            if not is_input(name, data, self.bot_id, self.settings["require_mention"]):
                self.skipped += 1
                return
            chat = _chat_of(name, data)
            if chat is not None:
                anchors.note(chat, str(data["id"]), sent_at(data.get("timestamp")) or time.time())
            await emit([{"t": name, "d": data}], self._position(seq))   # committed before the seq moves
        await link.serve(self._ws_http, deliver)

    async def _serve_callbacks(self, emit) -> None:
        """Webhook mode: QQ POSTs each event; it is committed (or skipped) before the 200 that acknowledges it.
        The offset holds the anchors only: QQ keeps the order and the retries, there is no session to resume."""
        anchors, lock = self._anchors(), asyncio.Lock()

        async def deliver(name: str, data: Any) -> None:
            self.report_progress()
            if not is_input(name, data, self.bot_id, self.settings["require_mention"]):
                self.skipped += 1
                return
            async with lock:          # one transaction at a time, in the order the POSTs came
                chat = _chat_of(name, data)
                if chat is not None:
                    anchors.note(chat, str(data["id"]), sent_at(data.get("timestamp")) or time.time())
                await emit([{"t": name, "d": data}], {"anchors": anchors.as_offset(),
                                                      "replies": self._book().as_offset()})

        def on_error(text: str) -> None:
            self.say(logging.WARNING, "%s: an event was not stored (%s); QQ will send it again", self.name,
                     self.clean_error(text))
        s = self.settings
        self._callbacks = CallbackServer(s["listen_host"], int(s["listen_port"]), s["callback_path"], s["app_secret"],
                                         deliver, on_error, lambda reason: self.intake.reject(reason),
                                         limits=http_limits(self.config))
        port = await self._callbacks.start()
        self.say(logging.INFO, "%s: taking QQ's callbacks on %s:%d%s", self.name, s["listen_host"], port,
                 s["callback_path"])
        await asyncio.get_running_loop().create_future()   # serve until the intake is cancelled

    def _position(self, seq: Any) -> dict:
        position = dict(self.link.position() or {})
        if isinstance(seq, int):
            position["seq"] = seq
        position["anchors"] = self._anchors().as_offset()
        position["replies"] = self._book().as_offset()
        return position

    def normalise(self, raw: Any) -> MessageEvent:
        return event_from_dispatch(raw.get("t"), raw.get("d"), self.name, self.profile, self.bot_id)

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        try:
            return await self.client().fetch_file(attachment.ref, cap)
        except FileTooLarge as exc:
            raise AttachmentTooLarge(exc.size, cap) from None
        except PermanentError as exc:    # QQ's media URLs expire: the file is gone
            raise AttachmentGone(self.clean_error(exc)) from None

    # ------------------------------------------------------------------------------------------------ outbound
    async def send_message(self, op: PlatformOp) -> str:
        kind, route, path = self._route(op)
        if len(op.text) > self.pacing.text_limit:
            raise TooLongError(f"{len(op.text)} characters, over the {self.pacing.text_limit} a message carries",
                               method=route)
        if self.settings["markdown"] and kind not in self.markdown_refused:
            try:
                return await self._reply(op, kind, route, path, markdown_body(kind, op.text))
            except MarkdownRefused as exc:
                # Not allowed here (QQ grants markdown per bot, passive markdown apart): noted, and this part and
                # every later one in chats of this kind go as plain text. Nothing was sent: the same msg_id and
                # msg_seq carry the plain one.
                self.markdown_refused[kind] = self.clean_error(exc)
                self.say(logging.WARNING, "%s: %s; %s messages go as plain text from now on", self.name,
                         self.markdown_refused[kind], kind)
        return await self._reply(op, kind, route, path, {"content": op.text, "msg_type": 0})

    async def send_file(self, op: PlatformOp) -> str:
        """A C2C user's or group's file: uploaded (``srv_send_msg`` false), then sent as a ``msg_type`` 7 message
        naming its ``file_info``, passive like a text; a guild channel's or DM's image goes in the send itself
        (multipart ``file_image``). What QQ cannot take is refused before anything is sent (media.py), and the
        reply names the file in its place."""
        kind, route, path = self._route(op)
        file = op.file
        if kind in GUILD_KINDS:
            guild_image(file.mime, file.name)
            data = await self.file_bytes(file)
            body = {"content": file.caption} if file.caption.strip() else {}
            return await self._reply(op, kind, route, path, body, image=(data, file.name, file.mime))
        data = await self.file_bytes(file)
        upload = await asyncio.to_thread(upload_body, file.mime, file.name, data)   # base64 of up to 10 MB
        info = await self.client().upload(f"upload_{kind}", path.rsplit("/", 1)[0] + "/files", upload)
        # QQ's docs: a msg_type 7 message needs some content, a space where there is no caption.
        body = {"content": file.caption if file.caption.strip() else " ", "msg_type": 7, "media": {"file_info": info}}
        return await self._reply(op, kind, route, path, body)

    def _route(self, op: PlatformOp) -> tuple[str, str, str]:
        try:
            return send_route(op.chat_id)
        except ValueError as exc:
            raise PermanentError(str(exc), method="send") from None

    async def _reply(self, op: PlatformOp, kind: str, route: str, path: str, body: dict,
                     image: Optional[tuple] = None) -> str:
        """``body`` sent as a passive reply where it may be (``msg_id``, and ``msg_seq`` where QQ dedups on it),
        else as an active message -> the id recorded for it."""
        anchor, seq = self._anchor(kind, op), msg_seq(platform_key(op))
        if kind in GUILD_KINDS:
            if await self._copy_may_exist(op):
                body = marked(body, resent_marker(self.config))
            try:
                return await self._reply_once(op, kind, route, path, body, image, anchor, seq)
            except RetryableError as exc:
                if exc.maybe_done:     # it may be in the chat: a retry of this part says it is re-sent
                    remember(self._lost_guild_sends, platform_key(op), True)
                raise
        return await self._reply_once(op, kind, route, path, body, image, anchor, seq)

    async def _reply_once(self, op: PlatformOp, kind: str, route: str, path: str, body: dict,
                          image: Optional[tuple], anchor: Optional[str], seq: int) -> str:
        if anchor is not None and await self._may_answer(anchor, seq):
            passive = dict(body, msg_id=anchor, **({"msg_seq": seq} if kind in SEQ_KINDS else {}))
            try:
                answer = await self.client().send(route, path, passive, image)
            except DuplicateReply:
                if kind not in SEQ_KINDS:
                    raise
                self.duplicates += 1     # an earlier attempt (this life's or a previous one's) made the message
                return reply_id(anchor, seq)
            except PassiveRefused:
                # QQ counts more replies to this message than the book did (a book older than the message's
                # last replies), or its window closed early: none more are tried, this part goes active.
                if self._book().used_up(anchor):
                    await self._save_book()
            else:
                return reply_id(anchor, seq) if kind in SEQ_KINDS else answer["id"]
        return await self._send_active(route, path, body, image)

    async def _copy_may_exist(self, op: PlatformOp) -> bool:
        """Whether an earlier attempt at this guild part may have left a copy QQ will not refuse: its answer was
        lost in this life, or its reply is ambiguous in the ledger (an earlier owner's send never came back; only
        the first part this life sends of such a reply carries the mark, as the consumer marks one part where the
        platform has no key)."""
        key = platform_key(op)
        if key in self._lost_guild_sends:
            return True
        if op.ledger is None:
            return False
        if op.ledger[0] in self._marked_parts:
            return self._marked_parts[op.ledger[0]] == key
        try:
            obligation = await (await self.ready_storage()).ledger.get(op.ledger[0])
        except Exception:  # noqa: BLE001 - the ledger cannot tell now: the mark is the side that hides nothing
            obligation = None
        if obligation is not None and not obligation.ambiguous:
            return False
        remember(self._marked_parts, op.ledger[0], key)
        return True

    async def _send_active(self, route: str, path: str, body: dict, image: Optional[tuple] = None) -> str:
        """A message without ``msg_id``: QQ rations these per chat (a few a month) and says when they are used up,
        which ``status`` shows until an active message goes again."""
        try:
            answer = await self.client().send(route, path, body, image)
        except ActiveQuotaExhausted:
            self.quota_note = (f"active-message quota used up (QQ refused one at "
                               f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}): only answers to a user's "
                               "message go until it renews")
            raise
        self.quota_note = ""
        return answer["id"]

    async def _may_answer(self, msg_id: str, seq: int) -> bool:
        """Whether the send numbered ``seq`` may go as a passive reply to ``msg_id`` (replies.ReplyBook). A number
        new to the book is made durable before the send goes: after a kill -9 the same part finds it there and goes
        passive again, to be refused as the duplicate it is, never as a second, active, copy."""
        allowed, changed = self._book().take(msg_id, seq)
        if changed:
            await self._save_book()
        return allowed

    async def _save_book(self) -> None:
        """The reply book committed into the offset, the rest of the offset as the intake last committed it. An
        intake commit in flight meanwhile may be overwritten by this older position: QQ then replays from it after
        a restart, and the inbox's dedup makes no second row of what it sends again."""
        try:
            store = await self.intake.open_store()      # the committed offset is read first
            saved = dict(self.offset) if isinstance(self.offset, dict) else {}
            saved["replies"] = self._book().as_offset()
            await store.inbox.set_offset(self.name, saved)
        except StorageError as exc:
            raise RetryableError(f"the reply count could not be stored ({exc}); nothing was sent",
                                 method="send") from None
        self.intake.offset = saved

    async def delete_message(self, op: PlatformOp) -> None:
        """Nor taken back: a reply is recorded by its msg_id + msg_seq pair, not by the id QQ's recall needs (a
        repeat QQ refused as a duplicate names none), and recall works only within minutes of the send. Answered
        ok, changing nothing, so that a consumer cleaning up moves on."""

    def _anchors(self) -> Anchors:
        """The chats' anchors, as the committed offset holds them until this life's intake moves them."""
        if self.anchors is None:
            self.anchors = Anchors.from_offset(self.offset)
        return self.anchors

    def _book(self) -> ReplyBook:
        """The passive replies made per user message, as the committed offset holds them."""
        if self.replies is None:
            self.replies = ReplyBook.from_offset(self.offset)
        return self.replies

    def _anchor(self, kind: str, op: PlatformOp) -> Optional[str]:
        """The user message this send answers: the op's ``reply_to``, else the chat's newest; None when there is
        none or its window has passed (an active message)."""
        noted = self._anchors().get(op.chat_id)
        if op.reply_to:
            if noted is not None and noted[0] == op.reply_to and not usable(kind, noted[1], time.time()):
                return None
            return op.reply_to
        if noted is not None and usable(kind, noted[1], time.time()):
            return noted[0]
        return None

    def status_note(self) -> str:
        link, api = self.link, self._api    # made on the loop; read here as they stand
        parts = [f"app {self.settings['app_id']}"]
        if self.webhook:
            parts.append(f"webhook at {self.served_url() or '(not listening yet)'}")
        elif link is not None:
            parts.append(f"gateway: {link.identifies} identify, {link.resumes} resume(s) by this life")
        parts.append(f"{api.token.fetches if api is not None else 0} token(s) fetched")
        if self.duplicates:
            parts.append(f"{self.duplicates} repeated send(s) refused by QQ as duplicates")
        if self.quota_note:
            parts.append(self.quota_note)
        for kind, refusal in list(self.markdown_refused.items()):
            parts.append(f"markdown refused in {kind} chats ({refusal}): plain text goes")
        return "; ".join(parts)

    async def close(self) -> None:
        api, self._api = self._api, None
        if api is not None:
            await api.close()


def marked(body: dict, marker: str) -> dict:
    """A send's body with the re-sent mark on top of what it shows: its markdown, or its content (a caption)."""
    if isinstance(body.get("markdown"), dict):
        return dict(body, markdown={"content": f"{marker}\n{body['markdown']['content']}"})
    text = str(body.get("content") or "").strip()
    return dict(body, content=f"{marker}\n{text}" if text else marker)


def remember(book: collections.OrderedDict, key: str, value) -> None:
    book.pop(key, None)
    book[key] = value
    while len(book) > REMEMBERED_GUILD_SENDS:
        book.popitem(last=False)


def markdown_body(kind: str, text: str) -> dict:
    """A text as QQ's native markdown (api-v2 "发送消息": ``msg_type`` 2 and ``markdown: {"content"}``; a guild
    channel's or DM's send has no ``msg_type``: its ``markdown`` field is the message)."""
    if kind in GUILD_KINDS:
        return {"markdown": {"content": text}}
    return {"msg_type": 2, "markdown": {"content": text}}


def _chat_of(name: str, data: Any) -> Optional[str]:
    """The chat id of a message dispatch that is input, as ``normalise`` will make it (None: it will refuse it)."""
    try:
        return event_from_dispatch(name, data, "", "").source.chat_id
    except Exception:   # noqa: BLE001 - a malformed event: normalise says why
        return None
