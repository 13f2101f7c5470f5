"""WhatsAppAdapter: one business phone number on Meta's WhatsApp Cloud API: signed webhooks in, the Graph API out
(actors/adapters/whatsapp/README.md). A leaf process actor: the base (base.py) runs its intake and its lanes.

States: not connected -> connected (the webhook server listens and the Graph API accepted the token and the phone
number id) -> back to not connected on a failure (the base reconnects with backoff; a refused token (190) or
unknown number is "refused": reported down with the reason and asked again every ``refused_retry_s``). The webhook
server keeps listening from the first connect on, so a Graph API outage never turns Meta's webhooks away.

Intake (webhook_server.py): each POST is checked (size, ``X-Hub-Signature-256`` over the raw body, JSON) before
anything else; a refused one is logged once with its reason, nothing stored. Its messages are stored in one round
and Meta is answered 200 only once that round is committed. A wamid committed in this life is skipped before any
write; the inbox's (adapter, wamid) dedup covers the rest (a redelivery after a restart, or one racing its first
delivery: it waits for the lock, then finds the id). Reactions are stored as feedback before the answer; status
callbacks (sent, delivered, read, failed) are recorded on their part in the delivery ledger before the answer
(``Ledger.record_receipt``: a failed one makes the reply "not received", with Meta's reason) and logged. A callback
can come before its send's wamid is recorded (the Graph API's answer, which carries the wamid, and the webhook
race): it is then committed as a pending receipt before the answer, and the transaction that records the wamid
applies it (storage/receipts.py). Pending receipts are kept ``PENDING_RECEIPT_KEEP_S`` (an hour) and at most
``PENDING_RECEIPTS_MAX`` for this adapter, the oldest dropped first, each drop logged: a callback of a message the
gateway never sent (another app on the number, a forged one) expires. What survives kill -9: a committed row,
receipt or pending receipt (Meta was answered after it); a body cut before its commit was never answered, so Meta
sends it again.

The 24-hour customer service window: free text reaches a user only within 24 h of their last message. The adapter
keeps, per chat, the newest message time (Meta's own clock) and wamid it stored; a chat it holds none of in this
life (after a restart, or one of more than ``REMEMBERED`` chats) is looked up once per send in the inbox rows it
stored in earlier lives (``Inbox.newest_of``: the chat's newest ``STORED_ROWS_READ`` rows, kept for [storage]
inbox_retention_days), and learned. A text reply past the window goes as the configured ``window_template`` (an
approved template, the reply in its body's one parameter) when there is one; otherwise, and for a file always, it
is refused before it leaves (``WindowClosed``: a permanent failure in the ledger, with the reason). A chat with no
stored row (none kept, or purged) is Meta's to judge: 131047 at once becomes the template, or that failure; a
131047 in a failed status callback (free text accepted, then not delivered) is recorded and logged.

Outbound (client.py): POST /messages of text (4,096 characters, replying with ``context`` when the op names the
message), of files (uploaded with POST /media first, then sent as an image or a document), of reactions, and of
read receipts with the typing indicator. Every send waits for the phone number's throughput
(``PHONE_NUMBER_MESSAGES_PER_S`` in platform.py) across chats; each chat's own pace is the kit's. No edits and no
deletes exist for a sent message: a delete is answered done, changing nothing; an edit asked of this adapter is
answered by the contract's default (a final one done without a call: a part only ever leaves with its final text).
No idempotency key: a send whose answer was lost is re-sent with the kit's mark.

What survives kill -9: the inbox rows (each chat's messages with Meta's times: the windows, relearned on the next
send), the ledger (replies and their receipts, and the pending receipts of sends not recorded yet: applied when the
wamid is recorded within the hour; a send whose wamid died with the process is never recorded, so its callbacks
expire and the reply goes again marked as re-sent, its new copy's callbacks recorded). Lost with the process, and
rebuilt: the wamids committed in this life (the inbox's dedup stands in), the in-memory windows, the throughput
bucket (it starts empty).
"""
from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
from typing import Any, Optional

from actors.adapters.errors import PermanentError, TooLongError
from actors.adapters.intake_styles import WebhookAdapter
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.adapters.pacing import ChatBudget
from actors.adapters.whatsapp.client import (GraphAPI, MediaTooLarge, WindowClosed, template_message,
                                             template_parameter)
from actors.adapters.whatsapp.inbound import (event_from_message, failed_codes, failure_reason, newest_stored,
                                              reaction_of, receipt_of, sent_at_of, skip_reason, status_line,
                                              wamid_of)
from actors.adapters.whatsapp.platform import (CUSTOMER_SERVICE_WINDOW_S, PHONE_NUMBER_BURST,
                                               PHONE_NUMBER_MESSAGES_PER_S, TEMPLATE_PARAMETER_LIMIT_CHARS)
from actors.adapters.whatsapp.webhook_server import WebhookServer
from actors.messages import Attachment, MessageEvent, PlatformOp, Source
from storage import StorageError
from supervision.http_serving import http_limits

REMEMBERED = 4096              # wamids committed in this life, and chats whose window and last message are known
STORED_ROWS_READ = 16          # a chat's newest inbox rows read to learn its window (a bound on one send's read)
# A status callback of a wamid no reply's part holds yet is kept this long for the send's record, and at most this
# many are kept (the oldest dropped first): a send is recorded within seconds of the Graph API's answer.
PENDING_RECEIPT_KEEP_S = 3600.0
PENDING_RECEIPTS_MAX = 10_000
TEXT_LIMIT_CHARS = 4096
CAPTION_LIMIT_CHARS = 1024
INLINE_IMAGES = ("image/jpeg", "image/png")   # what WhatsApp shows as an image; any other file goes as a document


class WhatsAppAdapter(WebhookAdapter):
    def __init__(self):
        super().__init__()
        self.skipped = 0               # messages acknowledged without becoming input (system, unsupported)
        self.redeliveries_skipped = 0  # redeliveries of messages committed in this life
        self.statuses_seen = 0
        self._api: Optional[GraphAPI] = None
        self._emit_lock: Optional[asyncio.Lock] = None
        self._committed: collections.OrderedDict = collections.OrderedDict()
        self._chats: collections.OrderedDict = collections.OrderedDict()   # chat -> (last message time, wamid)
        self._throughput: Optional[ChatBudget] = None

    # -------------------------------------------------------------------------------------------------- intake
    def api(self) -> GraphAPI:
        if self._api is None:
            settings = self.settings
            self._api = GraphAPI(settings["phone_number_id"], settings["access_token"], settings["base_url"],
                                 settings["api_version"], rate_limit_wait_s=settings["rate_limit_wait_s"])
        return self._api

    async def connect(self) -> None:
        if self.push_server.server is None:
            self._emit_lock = asyncio.Lock()
            await self._serve_webhooks()
        await self.api().phone_number()   # a refused token (190) or a wrong number id: PermanentError (refused)

    async def _serve_webhooks(self) -> None:
        def on_error(text: str) -> None:
            self.say(logging.WARNING, "%s: a webhook was not stored (%s); Meta will send it again", self.name,
                     self.clean_error(text))

        settings = self.settings
        server = WebhookServer(
            settings["webhook_host"], settings["webhook_port"], settings["webhook_path"],
            app_secret=settings["app_secret"], verify_token=settings["verify_token"],
            phone_number_id=settings["phone_number_id"],
            deliver=functools.partial(self._deliver, self.intake.emit), on_error=on_error,
            on_refused=self.intake.reject, limits=http_limits(self.config))
        port = await server.start()   # a port that is taken raises here: retried, nothing half-started is kept
        self.push_server.server = server
        self.say(logging.INFO, "%s: WhatsApp webhooks on %s:%d%s", self.name, settings["webhook_host"], port,
                 settings["webhook_path"])

    async def _deliver(self, emit, messages: list, statuses: list) -> None:
        """Store one webhook's messages (and reactions); Meta is answered 200 when this returns."""
        for status in statuses:
            await self._status_seen(status)
        await self.record_feedback([r for raw in messages if (r := reaction_of(raw, self.name)) is not None])
        fresh = []
        for raw in messages:
            if skip_reason(raw) is not None:
                self.skipped += 1
            else:
                fresh.append(raw)
        if not fresh:
            return
        async with self._emit_lock:   # one round at a time; a redelivery racing its first delivery waits here
            new = [raw for raw in fresh if wamid_of(raw) not in self._committed]
            self.redeliveries_skipped += len(fresh) - len(new)
            if not new:
                return
            await emit(new, None)
        for raw in new:
            self._remember(raw)

    def _remember(self, raw: dict) -> None:
        """A committed message: its wamid (redeliveries skipped) and its chat's window and newest message."""
        if (wamid := wamid_of(raw)) is None:
            return   # refused as malformed: no message of the user's to mark read
        self._committed[wamid] = True
        while len(self._committed) > REMEMBERED:
            self._committed.popitem(last=False)
        message = raw.get("message") or {}
        chat, at = message.get("from"), sent_at_of(message)
        if isinstance(chat, str) and at is not None:
            self._note_message(chat, at, wamid)

    def _note_message(self, chat: str, at: float, wamid: str) -> None:
        """The chat's newest message so far (a late delivery of an older one changes nothing); the most recently
        noted ``REMEMBERED`` chats are kept."""
        if at >= self._chats.get(chat, (0.0, None))[0]:
            self._chats[chat] = (at, wamid)
        if chat in self._chats:
            self._chats.move_to_end(chat)
        while len(self._chats) > REMEMBERED:
            self._chats.popitem(last=False)

    async def _status_seen(self, status: dict) -> None:
        """A status callback of a message we sent, recorded on its part in the delivery ledger before Meta is
        answered (a failure to record answers 500: Meta sends it again), or kept pending for that part when its
        wamid is not recorded yet (the Graph API's answer and the callback race); a failed one is logged with its
        reason."""
        self.statuses_seen += 1
        codes = failed_codes(status)
        why = " (the 24-hour customer service window had closed)" if 131047 in codes else ""
        receipt = receipt_of(status)
        if receipt is not None:
            store = await self.ready_storage()
            outcome = await store.ledger.record_receipt(self.name, receipt[0], receipt[1],
                                                        self.clean_error(failure_reason(status)) + why,
                                                        keep_s=PENDING_RECEIPT_KEEP_S, keep_max=PENDING_RECEIPTS_MAX)
            self._say_pending(receipt, outcome)
        if not codes:
            self.say(logging.DEBUG, "%s: %s", self.name, self.clean_error(status_line(status)))
            return
        self.say(logging.WARNING, "%s: not delivered: %s%s", self.name, self.clean_error(status_line(status)), why)

    def _say_pending(self, receipt: tuple[str, str], outcome) -> None:
        if outcome.kept:
            self.say(logging.DEBUG, "%s: the %s status of %s is kept until its send is recorded (at most %.0f s)",
                     self.name, receipt[1], receipt[0][:60], PENDING_RECEIPT_KEEP_S)
        if outcome.expired:
            self.say(logging.INFO, "%s: dropped %d status callback(s) kept %.0f s for a send never recorded "
                     "(a message not sent by the gateway, or whose send was lost)", self.name, outcome.expired,
                     PENDING_RECEIPT_KEEP_S)
        if outcome.over_bound:
            self.say(logging.WARNING, "%s: dropped the %d oldest status callback(s) kept for sends not recorded "
                     "yet: over %d kept", self.name, outcome.over_bound, PENDING_RECEIPTS_MAX)

    def normalise(self, raw: Any) -> MessageEvent:
        return event_from_message(raw, self.name, self.profile)

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        try:
            data, _claimed = await self.api().media(attachment.ref, cap)
            return data
        except MediaTooLarge as exc:
            raise AttachmentTooLarge(exc.size, cap) from None
        except PermanentError as exc:   # an unknown or expired media id (Meta keeps them 30 days)
            raise AttachmentGone(self.clean_error(exc)) from None

    # ------------------------------------------------------------------------------------------------ outbound
    async def last_message(self, chat_id: str) -> Optional[tuple[float, str]]:
        """(time, wamid) of the chat's newest message: known in this life, else learned from the inbox rows an
        earlier life stored, else None (the chat never wrote, its rows were purged, or the store cannot tell now:
        Meta judges the window then)."""
        if (known := self._chats.get(chat_id)) is not None:
            return known
        source = Source(platform=self.name, chat_id=chat_id, chat_type="dm", user_id=chat_id)
        try:
            _, key = self.intake.addressing.keyed(source, self.profile)   # the key its messages were stored under
            rows = await (await self.ready_storage()).inbox.newest_of(key, self.name, STORED_ROWS_READ)
        except (StorageError, ValueError) as exc:
            self.say(logging.DEBUG, "%s: the window of %s is not known (%s)", self.name, chat_id,
                     self.clean_error(exc))
            return None
        if (learned := newest_stored(rows, chat_id)) is not None:
            self._note_message(chat_id, *learned)
        return learned

    async def window_closed(self, chat_id: str, now: float) -> Optional[float]:
        """Hours since the chat's last message when the 24-hour window is known to be closed, else None."""
        last = await self.last_message(chat_id)
        if last is None or now - last[0] <= CUSTOMER_SERVICE_WINDOW_S:
            return None
        return (now - last[0]) / 3600

    async def _closed_window(self, chat_id: str, method: str, what: str) -> Optional[WindowClosed]:
        """The failure a send of ``what`` past the chat's window is, or None while the window is open or unknown."""
        if (hours := await self.window_closed(chat_id, time.time())) is None:
            return None
        return WindowClosed(f"the 24-hour customer service window is closed: the user last wrote {hours:.0f} h "
                            f"ago; {what} cannot reach them, only a template message", method=method)

    async def _paced(self) -> None:
        """Wait for the phone number's throughput, shared by every chat (a send over it is refused: 130429)."""
        if self._throughput is None:
            self._throughput = ChatBudget(PHONE_NUMBER_MESSAGES_PER_S, PHONE_NUMBER_BURST, time.monotonic())
        while (wait := self._throughput.wait_time(time.monotonic())) > 0:
            await asyncio.sleep(wait)
        self._throughput.consume(time.monotonic())

    async def send_message(self, op: PlatformOp) -> str:
        if len(op.text) > TEXT_LIMIT_CHARS:
            raise TooLongError(f"{len(op.text)} characters, over WhatsApp's {TEXT_LIMIT_CHARS}",
                               method="messages:text")
        if not op.text.strip():
            raise PermanentError("WhatsApp refuses an empty text", method="messages:text")
        closed = await self._closed_window(op.chat_id, "messages:text", "free text")
        if closed is None:
            await self._paced()
            try:
                return await self.api().send(op.chat_id, "text", {"body": op.text, "preview_url": False},
                                             op.reply_to)
            except WindowClosed as refused:   # 131047 at once: nothing was delivered, so a template may go instead
                closed = refused
        if not self.settings["window_template"]:
            raise closed
        return await self._send_as_template(op)

    async def _send_as_template(self, op: PlatformOp) -> str:
        """The reply past the window as the configured approved template, the text in its body's parameter (made
        one line, cut to the parameter's limit): what reaches the user then. Meta's refusal of the template
        (unknown, paused, its parameter) is a permanent failure with Meta's code."""
        name, language = self.settings["window_template"], self.settings["window_template_language"]
        parameter = template_parameter(op.text, TEMPLATE_PARAMETER_LIMIT_CHARS)
        await self._paced()
        wamid = await self.api().send(op.chat_id, "template", template_message(name, language, parameter))
        self.say(logging.INFO, "%s: the 24-hour window of %s had closed: the reply went as the template %r (%d of "
                 "%d characters)", self.name, op.chat_id, name, len(parameter), len(op.text))
        return wamid

    async def send_file(self, op: PlatformOp) -> str:
        """Upload the file, then a message carrying it: an image WhatsApp shows inline (JPEG or PNG within 5 MB),
        any other file as a document with its name. An upload whose message never left is seen by no one."""
        if (closed := await self._closed_window(op.chat_id, "messages:file", "a file")) is not None:
            raise closed   # a template carries text only
        data = await self.file_bytes(op.file)
        media_id = await self.api().upload(op.file.name, op.file.mime, data)
        caption = op.file.caption[:CAPTION_LIMIT_CHARS]
        await self._paced()
        if op.file.kind == "photo" and op.file.mime in INLINE_IMAGES and len(data) <= self.pacing.photo_limit_bytes:
            return await self.api().send(op.chat_id, "image", {"id": media_id, **({"caption": caption} if caption
                                                                                  else {})}, op.reply_to)
        document = {"id": media_id, "filename": op.file.name or "file", **({"caption": caption} if caption else {})}
        return await self.api().send(op.chat_id, "document", document, op.reply_to)

    async def set_reaction(self, op: PlatformOp) -> None:
        if not op.message_id:
            raise PermanentError("a reaction names no message", method="messages:reaction")
        await self._paced()
        await self.api().send(op.chat_id, "reaction", {"message_id": str(op.message_id), "emoji": op.text or ""})

    async def send_typing(self, op: PlatformOp) -> None:
        """The user's newest message shows read, with the typing indicator (both need a message to attach to: a
        chat with no stored message shows nothing)."""
        if not self.settings["mark_read"] or (last := await self.last_message(op.chat_id)) is None:
            return
        if time.time() - last[0] > CUSTOMER_SERVICE_WINDOW_S:
            return
        await self.api().mark_read(last[1], typing=True)

    async def delete_message(self, op: PlatformOp) -> None:
        """Nor taken back: the Cloud API has no delete for a sent message (a consumer cleaning up moves on)."""

    async def close(self) -> None:
        await self.push_server.close()
        api, self._api = self._api, None
        if api is not None:
            await api.close()
