"""FeishuAdapter: one Feishu / Lark custom app: event callbacks or the long connection in, the IM API out
(actors/adapters/feishu/README.md). A leaf process actor: the base (base.py) runs its intake and its lanes.

The open platform's own SDK (lark-oapi) is not used. The calls the adapter makes are a few plain JSON requests
(client.py), made through the kit's HttpSession like every other platform's, so a network failure says whether a
send may have left (``maybe_done``), every error is redacted of the secret and token, and ``base_url`` points them at
the test fake with nothing else to change; the callbacks' crypto is two functions over ``cryptography`` (crypto.py).
Nor is its long-connection client (``lark_oapi.ws.Client``), though it can be pointed at a fake (its ``domain``):
it acknowledges an event when a synchronous handler returns, inside its own event loop (made at import time and run
with ``run_until_complete``), so waiting there for our commit, which happens on the adapter's loop, would stall its
pings and reads; it asks for the endpoint with the blocking ``requests``, owns the connection's life (its own
reconnect loop, forever) where the kit's intake must (reconnect with backoff, "refused" on a bad secret, status, the
silence bound), and keeps fragments bounded by time only, not in number or size. The protocol is small: one POST
for the endpoint, a WebSocket, and a protobuf ``Frame`` of nine fields, written and read by hand (frames.py; its
bytes were checked against the SDK's protobuf classes), so the adapter speaks it (long_connection.py) and no
dependency comes with it.

States: not connected -> connected (a tenant access token was made from the app id and secret and /bot/v3/info
named the bot; with the callbacks, their server listens; with the long connection, its endpoint answered and the
WebSocket is open) -> back to not connected on a failure (the base reconnects with backoff, after a random share of
the platform's ReconnectNonce when a long connection ended; a refused app secret, or an endpoint refusing the app,
is "refused": reported down and asked again every ``refused_retry_s``). The callback server keeps listening from the
first connect on, so an API outage never turns the platform's callbacks away.

Intake by callback (``inbound = "callback"``, callback_server.py): the signature, its age, the decryption and the
verification token are checked before anything is stored; a refused callback is logged once with its reason,
answered 401, nothing stored. The URL check is answered with its challenge. A group message that comes before the
platform has named the bot (the first connect), where mentions are required, is answered 500 and comes again:
whether it mentions the bot cannot be told yet. Intake by the long connection (``inbound = "long_connection"``,
long_connection.py): each event (put together from its fragments first) is answered on the connection only after
its row is committed; pings go at the platform's PingInterval (at most ``max_ping_interval_s`` apart), and every
frame is progress for the kit's silence bound. Either way, an event that is no input (another event type, a bot's
message, a group message not addressed to the bot where mentions are required) is answered and skipped with a log
line; one committed in this life already (its ``event_id``: a redelivery, by either path) is skipped before any
write; any other is stored, and the platform is answered (200, or the frame's answer) only after the transaction
commits. The inbox's (adapter, message id) dedup covers a redelivery after a restart. What survives kill -9: a
committed row (the platform was answered after it); an event cut before its commit was never answered, so the
platform delivers it again; fragments kept in memory are lost and come again with their event.

Outbound: a text part is one ``text`` message, at most 30,000 UTF-8 bytes (refused as too long before it leaves; the
consumer cuts at the limit). In a one-to-one chat it is created in the chat; in a group, where it answers a message,
it is a reply to that message (in a thread under it where the message came in a thread or ``reply_in_thread`` is
on). Either carries the ``uuid`` request field: a UUID made from ``platform_key(op)`` and the chat
(idempotency.py), so every attempt at one part, in any life, carries the same uuid, and the platform answers a
repeat with the first message: a send repeated after a crash shows once. Streaming edits the message (PUT: text
only, at most 20 edits a message): a preview edit past the 18th of one message in this life is answered done
without a call, so the last edits are kept for the final text. A delete recalls the message; one already gone is
done. The turn's status reactions are the platform's emoji types (formatting.py) on the user's message. No typing
indicator (the platform has none for bots). Files out: uploaded, then sent as an image or a file (``send_file``).
"""
from __future__ import annotations

import asyncio
import collections
import functools
import logging
import uuid
from typing import Any, Optional

from actors.adapters.errors import MessageNotFoundError, PermanentError, TooLongError
from actors.adapters.feishu.callback_server import CallbackServer
from actors.adapters.feishu.client import FeishuAPI, ResourceTooLarge, file_type
from actors.adapters.feishu.formatting import emoji_type
from actors.adapters.feishu.long_connection import LongConnection
from actors.adapters.feishu.inbound import (event_from_callback, event_id, group_message, parse_resource_ref,
                                            skip_reason)
from actors.adapters.feishu.platform import HOSTS
from actors.adapters.idempotency import platform_key
from actors.adapters.intake_styles import WebhookAdapter
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.messages import Attachment, MessageEvent, PlatformOp
from supervision.http_serving import http_limits

REMEMBERED_EVENTS = 4096     # event ids committed in this life, for skipping redeliveries without a write
REMEMBERED_MESSAGES = 4096   # edits counted per message (a streamed answer is edited within minutes)
TEXT_LIMIT = 30000           # UTF-8 bytes of one text part (the platform's limit is 150 KB of JSON content)
IMAGE_LIMIT = 10 * 2**20      # bytes of an image upload (the platform's limit)
FILE_LIMIT = 30 * 2**20       # bytes of a file upload
CAPTION_LIMIT = 4000          # characters of a caption (a caption is a line under the file, not a reply)
EDITS_PER_MESSAGE = 20       # the platform's cap on the edits of one message
EDITS_KEPT_FOR_FINAL = 2     # preview edits stop this many short of it
SEND_UUIDS = uuid.UUID("3b0e5c1a-7d24-4f6b-8a8e-4c2f1d9b7e61")   # the namespace send uuids are made in


class NotReady(Exception):
    """An event that cannot be judged yet: answered 500, so the platform delivers it again."""


def send_uuid(op: PlatformOp) -> str:
    """The send's ``uuid``: one operation with one content (a keyed send: one part of one reply), in every life of
    the daemon, and never another's (idempotency.py). 36 characters: within the platform's 50."""
    return str(uuid.uuid5(SEND_UUIDS, f"{op.chat_id}\n{platform_key(op)}"))


class FeishuAdapter(WebhookAdapter):
    def __init__(self):
        super().__init__()
        self.skipped = 0               # events answered without becoming input
        self.redeliveries_skipped = 0  # redeliveries of events committed in this life
        self.edits_kept_back = 0       # preview edits answered without a call (the edit cap)
        self._api: Optional[FeishuAPI] = None
        self._link: Optional[LongConnection] = None
        self._bot_open_id = ""
        self._emit_lock: Optional[asyncio.Lock] = None
        self._committed: collections.OrderedDict = collections.OrderedDict()
        self._edits: collections.OrderedDict = collections.OrderedDict()   # message id -> edits made in this life

    # -------------------------------------------------------------------------------------------------- intake
    def api(self) -> FeishuAPI:
        if self._api is None:
            s = self.settings
            self._api = FeishuAPI(s["base_url"] or HOSTS[s["domain"]], s["app_id"], s["app_secret"],
                                  rate_limit_wait_s=s["rate_limit_wait_s"])
        return self._api

    @property
    def long_connection(self) -> bool:
        return self.settings["inbound"] == "long_connection"

    def normal_silence_s(self) -> float:
        if not self.long_connection:
            return super().normal_silence_s()   # the kit probes the callback server (liveness.py)
        # A ping goes every PingInterval (capped at max_ping_interval_s) and its pong is progress, as is every frame.
        return 2 * self.settings["max_ping_interval_s"] + 15.0

    async def connect(self) -> None:
        if self._emit_lock is None:
            self._emit_lock = asyncio.Lock()
        if self.push_server.server is None and not self.long_connection:
            await self._serve_callbacks()
        bot = await self.api().bot_info()   # a wrong app secret fails here: PermanentError (refused)
        self._bot_open_id = str(bot.get("open_id") or "")
        if self.long_connection:
            link = LongConnection(self.api(), self._say_line, alive=self.report_progress,
                                  max_ping_interval_s=self.settings["max_ping_interval_s"])
            await link.open()   # the endpoint refusing the app: PermanentError (refused) too
            self._link = link

    async def disconnect(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            await link.close()
        await super().disconnect()

    async def run_intake(self, emit) -> None:
        if not self.long_connection:
            await super().run_intake(emit)   # the callback server delivers; serve until cancelled
            return
        link = self._link
        if link is None:
            return   # not connected: the kit connects again
        await link.serve(functools.partial(self._deliver, emit))   # returns only by raising: reconnected

    def _say_line(self, level: int, text: str) -> None:
        self.say(level, "%s: %s", self.name, self.clean_error(text))

    async def _serve_callbacks(self) -> None:
        def on_error(text: str) -> None:
            self.say(logging.WARNING, "%s: an event was not stored (%s); the platform delivers it again",
                     self.name, self.clean_error(text))

        s = self.settings
        server = CallbackServer(s["callback_host"], s["callback_port"], s["callback_path"],
                                encrypt_key=s["encrypt_key"], verification_token=s["verification_token"],
                                max_age_s=s["max_signature_age_s"],
                                deliver=functools.partial(self._deliver, self.intake.emit), on_error=on_error,
                                on_refused=self.intake.reject, limits=http_limits(self.config))
        port = await server.start()   # a port that is taken raises here: retried, nothing half-started is kept
        self.push_server.server = server
        self.say(logging.INFO, "%s: Feishu event callbacks on %s:%d%s", self.name, s["callback_host"], port,
                 s["callback_path"])

    async def _deliver(self, emit, payload: dict) -> None:
        """Store one callback's event (or skip it); the platform is answered when this returns."""
        if not self._bot_open_id and self.settings["require_mention"] and group_message(payload):
            # Whether it mentions the bot cannot be told before the platform has named the bot (connect): not
            # answered 200, so the platform delivers it again, rather than skipped for good.
            raise NotReady("the bot's open_id is not known yet (no answer from /bot/v3/info)")
        if (reason := skip_reason(payload, self._bot_open_id, self.settings["require_mention"])) is not None:
            self.skipped += 1
            self.say(logging.INFO, "%s: skipped %s", self.name, reason)
            return
        key = event_id(payload)
        async with self._emit_lock:   # one transaction at a time; a redelivery racing its first delivery waits here
            if key is not None and key in self._committed:
                self.redeliveries_skipped += 1
                return
            await emit([payload], None)
            if key is not None:
                self._committed[key] = True
                while len(self._committed) > REMEMBERED_EVENTS:
                    self._committed.popitem(last=False)

    def normalise(self, raw: Any) -> MessageEvent:
        return event_from_callback(raw, self.name, self.profile, self._bot_open_id)

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        message_id, key, resource_type = parse_resource_ref(attachment.ref)
        try:
            return await self.api().resource(message_id, key, resource_type, cap)
        except ResourceTooLarge as exc:
            raise AttachmentTooLarge(exc.size, cap) from None
        except PermanentError as exc:   # gone, or the app lacks the permission to read it
            raise AttachmentGone(self.clean_error(exc)) from None

    # ------------------------------------------------------------------------------------------------ outbound
    async def send_message(self, op: PlatformOp) -> str:
        size = len(op.text.encode("utf-8", "surrogatepass"))
        if size > TEXT_LIMIT:
            raise TooLongError(f"{size} bytes, over {TEXT_LIMIT}", method="create")
        if not op.text.strip():
            raise PermanentError("the platform refuses an empty text", method="create")
        return await self._send(op, "text", {"text": op.text}, send_uuid(op))

    async def _send(self, op: PlatformOp, msg_type: str, content: dict, key: str) -> str:
        """One message in the op's chat, or, in a group, a reply to the message it answers (in a thread where that
        came in one, or ``reply_in_thread`` says so), under ``key``."""
        if op.reply_to and op.chat_type != "dm":
            in_thread = bool(op.thread_id) or self.settings["reply_in_thread"]
            return await self.api().reply(str(op.reply_to), msg_type, content, key, in_thread)
        return await self.api().create(op.chat_id, msg_type, content, key)

    async def send_file(self, op: PlatformOp) -> str:
        """Upload, then one message carrying it under the send's uuid: a photo as an image (with a caption: a rich
        text post of the image and the caption), a document as a file. A file message carries no text, so a
        document's caption goes first as a text message under a uuid of its own. An upload whose message never
        came is an orphan key nobody sees; uploads are not deduplicated, so a retried part uploads again."""
        file, api = op.file, self.api()
        data = await self.file_bytes(file)
        cap = IMAGE_LIMIT if file.kind == "photo" else FILE_LIMIT
        if len(data) > cap:
            raise PermanentError(f"{len(data)} bytes, over the platform's {cap} for a {file.kind}", method="upload")
        caption = file.caption.strip()[:CAPTION_LIMIT]
        if file.kind == "photo":
            image = await api.upload_image(data, file.name, file.mime)
            if not caption:
                return await self._send(op, "image", {"image_key": image}, send_uuid(op))
            post = {"zh_cn": {"title": "", "content": [[{"tag": "img", "image_key": image}],
                                                       [{"tag": "text", "text": caption}]]}}
            return await self._send(op, "post", post, send_uuid(op))
        name = file.name or "file"
        key = await api.upload_file(data, name, file.mime, file_type(file.mime, name))
        if caption:
            await self._send(op, "text", {"text": caption}, str(uuid.uuid5(SEND_UUIDS, "caption\n" + send_uuid(op))))
        return await self._send(op, "file", {"file_key": key}, send_uuid(op))

    async def edit_message(self, op: PlatformOp) -> None:
        message_id = str(op.message_id)
        made = self._edits.get(message_id, 0)
        if not op.final and made >= EDITS_PER_MESSAGE - EDITS_KEPT_FOR_FINAL:
            self.edits_kept_back += 1   # the final text comes in one of the edits kept for it
            return
        size = len(op.text.encode("utf-8", "surrogatepass"))
        if size > TEXT_LIMIT:
            raise TooLongError(f"{size} bytes, over {TEXT_LIMIT}", method="update")
        await self.api().update(message_id, "text", {"text": op.text})
        self._edits[message_id] = made + 1
        self._edits.move_to_end(message_id)
        while len(self._edits) > REMEMBERED_MESSAGES:
            self._edits.popitem(last=False)

    async def delete_message(self, op: PlatformOp) -> None:
        try:
            await self.api().recall(str(op.message_id))
        except MessageNotFoundError:
            pass      # recalled already: what a delete wants

    async def set_reaction(self, op: PlatformOp) -> None:
        """The bot's reaction on the message becomes ``op.text`` (none for ""): its other reactions there are
        removed. The platform's list of the message's reactions says which are the bot's (``operator_type`` app,
        its app id), so a reaction left by an earlier life is replaced too."""
        if not op.message_id:
            raise PermanentError("a reaction names no message", method="add_reaction")
        try:
            wanted = emoji_type(op.text) if op.text.strip() else ""
        except ValueError as exc:
            raise PermanentError(str(exc), method="add_reaction") from None
        api, message_id = self.api(), str(op.message_id)
        mine = [r for r in await api.reactions(message_id) if isinstance(r.get("operator"), dict)
                and r["operator"].get("operator_type") == "app" and r["operator"].get("operator_id") == api.app_id]
        shown = set()
        for reaction in mine:
            kind = (reaction.get("reaction_type") or {}).get("emoji_type")
            if kind == wanted and kind not in shown:
                shown.add(kind)
            elif isinstance(reaction.get("reaction_id"), str):
                await api.remove_reaction(message_id, reaction["reaction_id"])
        if wanted and wanted not in shown:
            await api.add_reaction(message_id, wanted)

    async def close(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            await link.close()
        await self.push_server.close()
        api, self._api = self._api, None
        if api is not None:
            await api.close()
