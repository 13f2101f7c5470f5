"""LineAdapter: one LINE Messaging API channel: signed webhooks in, the reply and push APIs out
(actors/adapters/line/README.md). A leaf process actor: the base (base.py) runs its intake and its lanes.

States: not connected -> connected (the webhook server listens and /v2/bot/info accepted the channel access token)
-> back to not connected on a failure (the base reconnects with backoff; a refused token is "refused": reported down
and asked again every ``refused_retry_s``). The webhook server keeps listening from the first connect on, so an API
outage never turns LINE's webhooks away.

Intake (webhook_server.py): the signature is checked before anything is parsed; a refused request is logged once
with its reason, nothing stored. Of a webhook's events, those that are no input (follow, join, unsend, ...) are
skipped with a log line, and those committed in this life already (their ``webhookEventId``: a redelivery) are
skipped before any write; the rest are stored in one transaction, and LINE is answered 200 only after it commits.
The inbox's (adapter, message id) dedup covers a redelivery after a restart. What survives kill -9: a committed row
(LINE was answered after it); a webhook cut before its commit was never answered 2xx, so LINE delivers it again
where the channel's webhook redelivery is on (README.md: without it LINE drops it).

Outbound: a text part is one text message object, at most 5,000 characters (refused as too long before it leaves;
the consumer cuts at the limit). It goes:

* with the event's reply token, where ``use_reply_tokens`` is on, the part is the first of the answer to that event
  and the token came in this life less than ``reply_token_ttl_s`` ago. A token is taken out of memory as it is
  used, so no second request ever carries it; LINE refusing it (used, expired) sends the part as a push instead. A
  reply carries no retry key (LINE takes none on replies), so a reply whose fate is unknown (its answer lost in this
  life, or the daemon killed between the reply leaving and its id being recorded: the next life finds the reply's
  obligation ambiguous in the ledger) may have left a copy no push can be deduplicated against: the push of that
  part then carries the re-sent mark ([sessions] resent_marker) as a message of its own before the text, so the
  chat may show the part twice, never twice unmarked. (After a push the mark is harmless: the repeated key is
  answered with the first push, the mark never shows.)
* otherwise as a push to the chat under ``X-Line-Retry-Key``: a UUID made from ``platform_key(op)`` and the chat
  (idempotency.py), so every attempt at one part, in any life, carries the same key, and LINE shows the part once;
  a repeated key is answered 409 with the first push's message, which is the answer.

A file part (``send_file``, only where the table has a ``public_url``: else its pacing sends no files) is an image,
video or audio message whose URLs the webhook server answers (media.py), its caption a text after it in the same
request, sent as a text part is (reply token or push under the part's retry key). Another kind of file (a PDF) has
no LINE message: refused for good before anything is sent, saying so, and the reply names it in its place. LINE
fetches a URL when a recipient's app shows the message, maybe hours later, not at the push. What survives kill -9:
nothing of the served files (memory only): a file sent by an earlier life is 404 from then on, so a recipient who
had not loaded it sees it unavailable; a file part whose push was not recorded is sent again under the same retry
key, whose token is the same, so the URL the first push named (LINE answers the repeat with that push) is served
again.

No edits: LINE cannot change a sent message (pacing ``line``: the consumer sends the final text only, once); the
contract's default answers a final edit done without a call. Nor deletes: one is answered done, changing nothing
(as IRC's). The typing indicator is the loading animation, which LINE shows in 1:1 chats only: in a group it is
skipped quietly. The monthly push quota used up is a permanent failure that says so (client.py), never retried
into a ban, and ``status`` shows it on the adapter's row (``status_note``) until a later push goes.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
import uuid
from typing import Any, Optional

from actors.adapters.errors import PermanentError, RetryableError, TooLongError
from actors.adapters.idempotency import platform_key
from actors.adapters.intake_styles import WebhookAdapter
from actors.adapters.line.client import ContentTooLarge, LineAPI, QuotaExhausted, ReplyTokenRefused
from actors.adapters.line.inbound import (event_from_webhook, event_id, is_redelivery, platform_message_id,
                                          reply_token_of, skip_reason)
from actors.adapters.line.media import (URL_LIMIT, ServedMedia, media_key, media_token, media_url, message_for,
                                        served_name)
from actors.adapters.line.platform import LOADING_SECONDS
from actors.adapters.line.quick_replies import ANSWER_FIELD, Press, press_of, quick_reply
from actors.adapters.line.webhook_server import WebhookServer
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.adapters.pacing import resent_marker, utf16_len
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.presses import ButtonPresses
from actors.approvals.answers import Answerer
from actors.messages import Attachment, MessageEvent, PlatformOp
from supervision.http_serving import http_limits

REMEMBERED_EVENTS = 4096     # webhookEventIds committed in this life, for skipping redeliveries without a write
REMEMBERED_TOKENS = 4096     # reply tokens not used yet (each lives about a minute)
REMEMBERED_LOST_REPLIES = 1024   # parts whose reply's answer was lost in this life (retried within seconds)
TEXT_LIMIT = 5000            # characters of one text message object
RETRY_KEYS = uuid.UUID("6c1f3a52-0d7e-4b8e-9a51-2f4c7d9e8b10")   # the namespace retry keys are made in


def own_ids(sent: list[str], count: int) -> list[str]:
    """The ids of the last ``count`` messages of a request (LINE answers them in order); a repeated push whose
    answer named only its request stands for each."""
    return sent[-count:] if len(sent) >= count else [sent[-1]] * count


def extension(mime: str) -> str:
    return ".png" if mime == "image/png" else ".jpg"


def retry_key(op: PlatformOp) -> str:
    """The push's X-Line-Retry-Key: one operation with one content (a keyed send: one part of one reply), in every
    life of the daemon, and never another's (idempotency.py)."""
    return str(uuid.uuid5(RETRY_KEYS, f"{op.chat_id}\n{platform_key(op)}"))


class LineAdapter(ButtonPresses, WebhookAdapter):
    def __init__(self):
        super().__init__()
        self.init_presses()
        self.skipped = 0               # events answered without becoming input
        self.redeliveries_skipped = 0  # redeliveries of events committed in this life
        self.replies = self.pushes = self.replies_refused = 0
        self.quota_note = ""           # set by a push refused for the monthly quota, cleared by a push that goes
        self._api: Optional[LineAPI] = None
        self._emit_lock: Optional[asyncio.Lock] = None
        self._committed: collections.OrderedDict = collections.OrderedDict()
        self._reply_tokens: collections.OrderedDict = collections.OrderedDict()   # message id -> (token, when)
        self._lost_replies: collections.OrderedDict = collections.OrderedDict()   # parts a reply may have sent
        self.media: Optional[ServedMedia] = None   # the files LINE fetches (only with a public_url)
        self._media_key = b""

    # -------------------------------------------------------------------------------------------------- intake
    def api(self) -> LineAPI:
        if self._api is None:
            s = self.settings
            self._api = LineAPI(s["channel_access_token"], s["api_base_url"], s["data_base_url"],
                                rate_limit_wait_s=s["rate_limit_wait_s"])
        return self._api

    async def connect(self) -> None:
        if self.push_server.server is None:
            self._emit_lock = asyncio.Lock()
            await self._serve_webhooks()
        await self.api().bot_info()   # a wrong or revoked token fails here: PermanentError (refused)

    async def _serve_webhooks(self) -> None:
        def on_error(text: str) -> None:
            self.say(logging.WARNING, "%s: a webhook was not stored (%s); LINE redelivers it if the channel's "
                     "webhook redelivery is on", self.name, self.clean_error(text))

        s = self.settings
        server = WebhookServer(s["webhook_host"], s["webhook_port"], s["webhook_path"],
                               channel_secret=s["channel_secret"],
                               deliver=functools.partial(self._deliver, self.intake.emit), on_error=on_error,
                               on_refused=self.intake.reject, limits=http_limits(self.config),
                               media=self.served_media(), media_path=s["media_path"])
        port = await server.start()   # a port that is taken raises here: retried, nothing half-started is kept
        self.push_server.server = server
        self.say(logging.INFO, "%s: LINE webhooks on %s:%d%s", self.name, s["webhook_host"], port, s["webhook_path"])

    async def _deliver(self, emit, events: list) -> None:
        """Store one webhook's events (or skip them); LINE is answered when this returns."""
        taken = []
        for event in events:
            if (reason := skip_reason(event)) is not None:
                self.skipped += 1
                self.say(logging.INFO, "%s: skipped %s (not input)", self.name, reason)
            else:
                taken.append(event)
        if not taken:
            return
        async with self._emit_lock:   # one transaction at a time; a redelivery racing its first delivery waits here
            fresh = [e for e in taken if event_id(e) is None or event_id(e) not in self._committed]
            self.redeliveries_skipped += len(taken) - len(fresh)
            kept, refused = await self._judge_presses(fresh)
            if kept:
                await emit(kept, None)
            self._remember(fresh)
        for press, notice in refused:   # told once the webhook's rows are committed, off the intake
            self.acknowledge_press(press.press_id, functools.partial(self._tell_presser, press, notice))

    async def _judge_presses(self, events: list) -> tuple[list, list]:
        """The events to store (a press of our buttons that may answer becomes the presser's typed answer, under
        the postback's webhookEventId, so a redelivery after a restart is the inbox's duplicate) and the presses
        that may not, each with what its presser is told (not theirs, answered, expired, unknown)."""
        kept, refused = [], []
        for event in events:
            try:
                press = press_of(event, self.name, self.profile)
            except MalformedPayload:
                press = None   # stored as it is: normalise refuses it with its reason
            if press is None:
                kept.append(event)
                continue
            judged = await self.judge_press(event, Answerer(self.name, press.chat_id, press.user_id), press.data,
                                            ANSWER_FIELD)
            if judged.kept:
                kept.append(judged.raw)
            else:
                refused.append((press, judged.notice))
        return kept, refused

    async def _tell_presser(self, press: Press, notice: str) -> None:
        """A press that may not answer is told why with its reply token (free of the push quota; a redelivered
        press has none and is not told again). LINE has no message to one member of a group only."""
        if press.reply_token is not None and notice:
            await self.api().reply(press.reply_token, [{"type": "text", "text": notice}])

    def _remember(self, committed: list) -> None:
        """The events just committed: their ids (a redelivery is skipped without a write) and reply tokens."""
        for event in committed:
            if (key := event_id(event)) is not None:
                self._committed[key] = True
            token, message = reply_token_of(event), platform_message_id(event) if isinstance(event, dict) else None
            if token and message and not is_redelivery(event):   # a redelivery's token is as old as its first try
                self._reply_tokens[message] = (token, time.monotonic())
        for book, limit in ((self._committed, REMEMBERED_EVENTS), (self._reply_tokens, REMEMBERED_TOKENS)):
            while len(book) > limit:
                book.popitem(last=False)

    def normalise(self, raw: Any) -> MessageEvent:
        return event_from_webhook(raw, self.name, self.profile)

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        try:
            return await self.api().content(attachment.ref, cap)
        except ContentTooLarge as exc:
            raise AttachmentTooLarge(exc.size, cap) from None
        except PermanentError as exc:   # gone: LINE keeps a user's content for a limited time
            raise AttachmentGone(self.clean_error(exc)) from None

    # ------------------------------------------------------------------------------------------------ outbound
    def take_reply_token(self, op: PlatformOp) -> Optional[str]:
        """The reply token of the message ``op`` answers, if it may be used now; taken out either way, so no two
        requests ever carry it."""
        if not self.settings["use_reply_tokens"] or not op.reply_to:
            return None
        token, since = self._reply_tokens.pop(str(op.reply_to), (None, 0.0))
        if token is None or time.monotonic() - since >= self.settings["reply_token_ttl_s"]:
            return None
        return token

    async def send_message(self, op: PlatformOp) -> str:
        size = utf16_len(op.text)
        if size > TEXT_LIMIT:
            raise TooLongError(f"{size} characters, over LINE's {TEXT_LIMIT}", method="push")
        if not op.text.strip():
            raise PermanentError("LINE refuses an empty text", method="push")
        messages = [{"type": "text", "text": op.text}]
        if (buttons := quick_reply(await self.question_buttons(op), op.text)) is not None:
            messages[0]["quickReply"] = buttons   # LINE shows them on the chat's last message until one is used
        return (await self.send_objects(op, messages))[0]

    async def send_file(self, op: PlatformOp) -> str:
        """An image, mp4 video or m4a audio as its message, with URLs under ``public_url`` that the webhook server
        answers (media.py), and its caption as a text message after it in the same request (LINE's media messages
        carry no text). Anything else is refused before anything is sent, saying why: the reply names the file in
        its place."""
        if self.served_media() is None:
            raise PermanentError("files go to LINE only with [adapters.NAME] public_url set", method="push")
        data = await self.file_bytes(op.file)
        media = await asyncio.to_thread(message_for, op.file.kind, op.file.mime, op.file.name, data)
        key, name = retry_key(op), served_name(op.file.name, op.file.mime)
        message = {"type": media.type, "originalContentUrl": self.serve(key, "original", media.original, name)}
        if media.preview is not None:
            message["previewImageUrl"] = self.serve(key, "preview", media.preview,
                                                    "preview" + extension(media.preview[1]))
        elif media.type == "image":   # within LINE's 1 MB, an image is its own preview
            message["previewImageUrl"] = message["originalContentUrl"]
        if media.type == "audio":
            message["duration"] = media.duration_ms
        messages = [message] + ([{"type": "text", "text": op.file.caption}] if op.file.caption.strip() else [])
        return (await self.send_objects(op, messages))[0]

    def served_media(self) -> Optional[ServedMedia]:
        """The files the webhook server answers LINE's fetches with, made once; None without a public_url."""
        if self.media is None and self.settings["public_url"]:
            self.media = ServedMedia(self.settings["media_ttl_s"])
            self._media_key = media_key(self.settings["channel_secret"])
        return self.media

    def serve(self, key: str, role: str, content: tuple[bytes, str], name: str) -> str:
        """The URL LINE fetches ``content`` at: put in the served files under the token this part's retry key makes
        (media.py: the same in every life, so a push repeated after a restart names the URLs served again)."""
        token = media_token(self._media_key, key, role)
        self.media.put(token, content[0], content[1], name)
        url = media_url(self.settings["public_url"], self.settings["media_path"], token, name)
        if len(url) > URL_LIMIT:
            raise PermanentError(f"the file's URL would be {len(url)} characters, over LINE's {URL_LIMIT}",
                                 method="push")
        return url

    async def send_objects(self, op: PlatformOp, messages: list[dict]) -> list[str]:
        """Send one part's message objects: with the reply token where one may be used, else pushed under the
        part's retry key -> the ids of ``messages`` (the re-sent mark, where it goes first, not among them)."""
        if (token := self.take_reply_token(op)) is not None:
            try:
                sent = await self.api().reply(token, messages)
                self.replies += 1
                return own_ids(sent, len(messages))
            except ReplyTokenRefused as exc:
                self.replies_refused += 1
                self.say(logging.INFO, "%s: the reply token for %s was refused (%s); pushing instead", self.name,
                         op.reply_to, self.clean_error(exc))
            except RetryableError as exc:
                if exc.maybe_done:   # the reply may be in the chat: the push that follows says it is re-sent
                    self._lost_replies[retry_key(op)] = True
                    while len(self._lost_replies) > REMEMBERED_LOST_REPLIES:
                        self._lost_replies.popitem(last=False)
                raise
        marked = messages
        if await self.reply_copy_may_exist(op):
            marked = [{"type": "text", "text": resent_marker(self.config)}] + messages
        try:
            sent = await self.api().push(op.chat_id, marked, retry_key(op))
        except QuotaExhausted:
            self.quota_note = (f"monthly push quota used up (LINE refused a push at "
                               f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}): nothing is pushed until it "
                               "renews or the plan allows more")
            raise
        self.quota_note = ""
        self.pushes += 1
        return own_ids(sent, len(messages))   # the part's own messages: the last ones (the mark comes first)

    def status_note(self) -> str:
        """The monthly push quota, while the last push LINE answered was refused for it (actor thread: reads the
        string the loop set; not kept across a restart, where the next push finds out again); and, without a
        ``public_url``, that files are named in text."""
        notes = [self.quota_note] if self.quota_note else []
        if not self.settings.get("public_url"):
            notes.append("files named in text, not sent: no public_url for LINE to fetch them from")
        return "; ".join(notes)

    async def reply_copy_may_exist(self, op: PlatformOp) -> bool:
        """Whether an earlier attempt at this part may have gone with a reply token and left a copy: its answer was
        lost in this life, or (only the first part of an answer is ever a reply) its obligation is ambiguous in the
        ledger, which a claim makes it when an earlier owner's send never came back."""
        if not self.settings["use_reply_tokens"] or not op.reply_to:
            return False
        if retry_key(op) in self._lost_replies:
            return True
        if op.ledger is None:
            return False
        try:
            obligation = await (await self.ready_storage()).ledger.get(op.ledger[0])
        except Exception:  # noqa: BLE001 - the ledger cannot tell now: the mark is the side that hides nothing
            return True
        return obligation is None or obligation.ambiguous

    async def delete_message(self, op: PlatformOp) -> None:
        """Nor taken back: LINE has no such call. Answered done, so a consumer cleaning up extra parts moves on."""

    async def send_typing(self, op: PlatformOp) -> None:
        if op.chat_id.startswith("U"):   # a user: LINE shows the loading animation in 1:1 chats only
            await self.api().show_loading(op.chat_id, LOADING_SECONDS)

    async def close(self) -> None:
        await self.push_server.close()
        api, self._api = self._api, None
        if api is not None:
            await api.close()
