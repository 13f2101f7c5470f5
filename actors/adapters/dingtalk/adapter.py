"""DingTalkAdapter: one DingTalk internal app's robot: Stream mode in, the session webhook or the robot OpenAPI out
(actors/adapters/dingtalk/README.md). A leaf process actor: the base (base.py) runs its intake and its lanes.

Why not the official SDK (``dingtalk-stream``): its client cannot be pointed at another host without patching it (the
connection-open URL is a class constant built from a module constant), it makes that request and the token's with
the blocking ``requests`` library inside its event loop and sleeps with ``time.sleep`` between attempts, and it owns
the connection's life (its own reconnect loop) where the kit's intake must (reconnect with backoff, "refused" on a
bad secret, status, the silence bound). What the adapter needs is one POST for a ticket, a WebSocket and three JSON
frame shapes (stream.py), and four JSON requests (client.py), spoken with aiohttp like every other platform, so
every send is attempted exactly as the base decides and a network failure says whether it may have left.

States: not connected -> connected (an access token made from the client id and secret, a ticket, the WebSocket
open) -> back to not connected when the stream ends (a SYSTEM disconnect, a close, a missed pong): the base
reconnects with backoff, with a fresh ticket each time; a refused secret is "refused" (reported down and asked again
every ``refused_retry_s``).

Intake, Stream mode (``inbound = "stream"``, the default; stream.py): each robot message is answered on the stream
only after its inbox row is committed, so one a kill -9 cut short is delivered again. A message's pictures and files
are fetched by their download codes before its row is stored. A message that is no input (a video, audio without
recognition text) is answered and skipped with a log line; one committed in this life already (its ``msgId``: a
redelivery) is skipped before any write; the inbox's (adapter, msgId) dedup covers a redelivery after a restart.
Each message's ``sessionWebhook`` and its expiry are kept per chat, in memory (a restart forgets them: replies then
go by the OpenAPI until the chat writes again). HTTP mode (``inbound = "http"``; callback_server.py): each POST's
``timestamp`` and ``sign`` checked (signing.py), a refused one answered 401 and logged, nothing stored; the message
then goes the same way, answered 200 after its commit. What survives kill -9: committed rows (answered after the
commit); an uncommitted message was never answered.

Outbound: a text part is one ``text`` message of at most 5,000 characters (refused as too long before it leaves).
It goes through the chat's session webhook while that is valid (its ``sessionWebhookExpiredTime`` more than
``webhook_margin_s`` away, and its URL under ``session_webhook_prefix``), else by the robot API: ``batchSend`` to
the user of a one-to-one chat, ``groupMessages/send`` to a group. A webhook that answers it takes nothing (expired
early, unknown) is forgotten and the same part goes by the API in the same attempt: nothing had been sent. Without a
card template there are no edits: a streamed answer is sent whole, in parts at the limit, and no send carries a key
the platform deduplicates on, so a send whose answer was lost is re-sent with the mark. With ``card_template_id``
(cards.py) a part is an AI card: ``createAndDeliver`` under an outTrackId made from the part's key (the same in
every life, so a create repeated after a kill -9 names the card already made, and that refusal is taken for it),
each edit a ``PUT /v1.0/card/streaming`` of the whole text under a guid made from the op and its content, the final
one with ``isFinalize`` (and ``isError`` for a failed turn's text). Every card call waits for the app-wide budget
(pacing ``app_edit_ops_per_s``) as well as the chat's: the platform limits an app's calls per second across its
chats, 20 QPS in a standard-edition organisation (https://developer.aliyun.com/ask/585193; platform.py says what the
documentation read names and where it is silent: no rate of the streaming update's own, no answer named for a
repeated outTrackId). A one-to-one chat with no staff id gets text
parts as before. A delete is answered ok and changes nothing: a part sent through a session webhook has no key to
recall it by.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
from typing import Any, Optional

from actors.adapters.dingtalk.callback_server import CallbackServer
from actors.adapters.dingtalk.cards import (can_hold_card, card_track_id, create_body, is_card, stream_body,
                                             update_guid)
from actors.adapters.dingtalk.client import DingTalkAPI, FileTooLarge, WebhookRefused
from actors.adapters.dingtalk.inbound import chat_of, event_from_callback, message_id, session_webhook, skip_reason
from actors.adapters.dingtalk.stream import StreamLink
from actors.adapters.errors import PermanentError, TooLongError
from actors.adapters.intake_styles import StreamingAdapter
from actors.adapters.liveness import SERVED_SILENCE_S
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.messages import Attachment, MessageEvent, PlatformOp
from supervision.http_serving import http_limits

REMEMBERED_MESSAGES = 4096   # msgIds committed in this life, for skipping redeliveries without a write
REMEMBERED_CHATS = 4096      # chats whose session webhook is kept
TEXT_LIMIT = 5000            # characters of one text part


class DingTalkAdapter(StreamingAdapter):
    def __init__(self):
        super().__init__()
        self.skipped = 0               # messages answered without becoming input
        self.redeliveries_skipped = 0  # redeliveries of messages committed in this life
        self.webhook_fallbacks = 0     # parts sent by the API because the session webhook refused them
        self._api: Optional[DingTalkAPI] = None
        self._link: Optional[StreamLink] = None
        self._server: Optional[CallbackServer] = None
        self._emit_lock: Optional[asyncio.Lock] = None
        self._committed: collections.OrderedDict = collections.OrderedDict()
        self._webhooks: collections.OrderedDict = collections.OrderedDict()   # chat id -> (url, expires at)

    # -------------------------------------------------------------------------------------------------- intake
    def api(self) -> DingTalkAPI:
        if self._api is None:
            s = self.settings
            self._api = DingTalkAPI(s["base_url"], s["client_id"], s["client_secret"], s["robot_code"],
                                    rate_limit_wait_s=s["rate_limit_wait_s"])
        return self._api

    def normal_silence_s(self) -> float:
        if self.settings["inbound"] == "http":
            return SERVED_SILENCE_S   # the kit probes the callback server (liveness.py)
        # A ping goes after ping_interval_s with nothing received and its pong is progress (so are the platform's
        # own SYSTEM pings and every frame).
        return 2 * self.settings["ping_interval_s"] + 15.0

    async def connect(self) -> None:
        await self.api().token()    # a wrong secret fails here: PermanentError (refused)
        if self.settings["inbound"] == "http":
            return                  # the callback server starts with the intake
        link = StreamLink(self.api(), self._say_line, alive=self.report_progress,
                          ping_interval_s=self.settings["ping_interval_s"])
        await link.open()
        self._link = link

    async def disconnect(self) -> None:
        link, self._link = self._link, None
        server, self._server = self._server, None
        if link is not None:
            await link.close()
        if server is not None:
            await server.stop()

    def served_url(self) -> Optional[str]:
        server = self._server
        if server is None or server.port is None:
            return None
        return f"http://{server.host}:{server.port}{server.path}"

    async def run_intake(self, emit) -> None:
        self._emit_lock = asyncio.Lock()
        if self.settings["inbound"] == "http":
            await self._serve_callbacks(functools.partial(self._deliver, emit))   # never returns
        link = self._link
        if link is None:
            return   # not connected: the kit connects again
        await link.serve(functools.partial(self._deliver, emit))   # returns only by raising: the intake reconnects

    async def _deliver(self, emit, data: Any) -> None:
        """Store one robot message (or skip it); the platform is answered when this returns."""
        self._remember_webhook(data)
        if (reason := skip_reason(data)) is not None:
            self.skipped += 1
            self.say(logging.INFO, "%s: skipped %s", self.name, reason)
            return
        key = message_id(data)
        async with self._emit_lock:   # one transaction at a time; a redelivery racing its first delivery waits here
            if key is not None and key in self._committed:
                self.redeliveries_skipped += 1
                return
            await emit([data], None)
            if key is not None:
                self._committed[key] = True
                while len(self._committed) > REMEMBERED_MESSAGES:
                    self._committed.popitem(last=False)

    async def _serve_callbacks(self, deliver) -> None:
        def on_error(text: str) -> None:
            self.say(logging.WARNING, "%s: a message was not stored (%s); the platform sends it again", self.name,
                     self.clean_error(text))

        s = self.settings
        self._server = CallbackServer(s["callback_host"], s["callback_port"], s["callback_path"], s["client_secret"],
                                      s["max_signature_age_s"], deliver, on_error, on_refused=self.intake.reject,
                                      limits=http_limits(self.config))
        port = await self._server.start()
        self.say(logging.INFO, "%s: DingTalk robot callbacks on %s:%d%s", self.name, s["callback_host"], port,
                 s["callback_path"])
        await asyncio.get_running_loop().create_future()   # serve until the intake is cancelled

    def _remember_webhook(self, data: Any) -> None:
        hook = session_webhook(data)
        if hook is None or not hook[0].startswith(self.settings["session_webhook_prefix"]):
            return
        chat_id, _ = chat_of(data)
        if chat_id:
            self._webhooks[chat_id] = hook
            self._webhooks.move_to_end(chat_id)
            while len(self._webhooks) > REMEMBERED_CHATS:
                self._webhooks.popitem(last=False)

    def normalise(self, raw: Any) -> MessageEvent:
        return event_from_callback(raw, self.name, self.profile, self.settings["bot_name"])

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        try:
            return await self.api().download_file(attachment.ref, cap)
        except FileTooLarge as exc:
            raise AttachmentTooLarge(exc.size, cap) from None
        except PermanentError as exc:   # gone (a download code lives a day), or the app may not read it
            raise AttachmentGone(self.clean_error(exc)) from None

    def _say_line(self, level: int, text: str) -> None:
        self.say(level, "%s: %s", self.name, self.clean_error(text))

    # ------------------------------------------------------------------------------------------------ outbound
    def _valid_webhook(self, chat_id: str) -> Optional[str]:
        hook = self._webhooks.get(chat_id)
        if hook is None or hook[1] - time.time() <= self.settings["webhook_margin_s"]:
            return None
        return hook[0]

    async def send_message(self, op: PlatformOp) -> str:
        if len(op.text) > TEXT_LIMIT:
            raise TooLongError(f"{len(op.text)} characters, over {TEXT_LIMIT}", method="send")
        if self.settings["card_template_id"] and can_hold_card(op.chat_id, op.chat_type):
            return await self._send_card(op)
        webhook = self._valid_webhook(op.chat_id)
        if webhook is not None:
            try:
                await self.api().send_by_session(webhook, op.text)
                return f"session:{op.op_id}"    # the webhook names no message: the part's own id stands for it
            except WebhookRefused as exc:
                self.webhook_fallbacks += 1
                self._webhooks.pop(op.chat_id, None)
                self.say(logging.INFO, "%s: the session webhook of %s refused a send (%s); sending by the robot API",
                         self.name, op.chat_id, self.clean_error(exc))
        if op.chat_type == "group":
            return await self.api().send_to_group(op.chat_id, op.text)
        return await self.api().send_to_user(op.chat_id, op.text)

    async def _send_card(self, op: PlatformOp) -> str:
        """A part as an AI card: made and delivered with its text, and finalized at once when the text is the
        reply's final one (a card left streaming shows as still typing). Its outTrackId is the message id."""
        s, track_id = self.settings, card_track_id(op)
        await self._budgets.app_turn(self.pacing)   # card calls count against the app's QPS, across its chats
        await self.api().create_card(create_body(s["card_template_id"], track_id, op.chat_id, op.chat_type,
                                                 self.api().robot_code, s["card_content_key"], op.text))
        if op.final:
            await self._stream_card(op, track_id)
        return track_id

    async def _stream_card(self, op: PlatformOp, track_id: str) -> None:
        error = op.kind == "error"
        await self._budgets.app_turn(self.pacing)
        await self.api().stream_card(stream_body(track_id, update_guid(op, op.final, error),
                                                 self.settings["card_content_key"], op.text, op.final, error))

    async def edit_message(self, op: PlatformOp) -> None:
        """A card's content becomes ``op.text`` (the whole text: isFull), finalized with the reply's final text.
        A text message cannot change. Without a template the kit's rule holds (no previews were sent, so a final
        edit finds its text there: ok; any other refused). With one, a text part is a chat a card cannot reach (or
        a reply begun before the table named a template) whose previews were sent as text: a preview's edit is
        answered ok and the preview left, the final text refused, so it follows as a new message."""
        message_id = str(op.message_id or "")
        if not self.settings["card_template_id"] and not is_card(message_id):
            return await super().edit_message(op)
        if len(op.text) > TEXT_LIMIT:
            raise TooLongError(f"{len(op.text)} characters, over {TEXT_LIMIT}", method="card_stream")
        if is_card(message_id):
            await self._stream_card(op, message_id)
        elif op.final:
            raise PermanentError("a text message cannot be edited: only an AI card can", method="card_stream")

    async def delete_message(self, op: PlatformOp) -> None:
        """Nor taken back (the module docstring): answered ok, changing nothing, so a consumer cleaning up moves
        on."""

    async def close(self) -> None:
        await self.disconnect()
        api, self._api = self._api, None
        if api is not None:
            await api.close()
