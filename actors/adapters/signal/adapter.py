"""SignalAdapter: one Signal account, served by signal-cli's HTTP daemon (``signal-cli daemon --http``;
actors/adapters/signal/README.md). Receives on the daemon's event stream (``GET /api/v1/events``, server-sent events), sends through
its JSON-RPC endpoint (``POST /api/v1/rpc``: ``send``, ``sendTyping``, ``remoteDelete``, ``getAttachment``), and
asks ``GET /api/v1/check`` before each connection.

State (loop thread): the bot's identity (number, ACI), the event stream's HTTP session while connected, the RPC
client, ``skipped`` (events that were no person's message). Messages: those of ``PlatformAdapter`` (base.py). What
survives kill -9: the inbox rows and, as the offset, the newest ``serverDeliveredTimestamp`` committed (for the
operator; the stream cannot be resumed from it); nothing else is kept.

What "nothing lost" means here, and where it stops. signal-cli takes each message off Signal's servers, stores it,
acknowledges it to Signal, hands it to every client connected to its stream, and forgets it. There is no position
to resume from and no acknowledgement from us: an event is ours from the moment its row is committed, which the
adapter does for each chunk read off the stream before reading on. So:

* run the daemon with ``--receive-mode=on-connection``: it then takes messages off Signal's servers only while a
  client is connected, and whatever arrives while the gateway is stopped, restarting or reconnecting waits on
  Signal's servers (kept there for weeks) and comes on the next connection. With the default ``on-start`` it keeps
  receiving with no client and those messages go to its log only: lost to the gateway.
* a stream the daemon or the network ends is reconnected at once (backoff from 0.1 s); signal-cli hands each
  message to every stream it has, so one still open when the next arrives gets everything.
* the window no client of this endpoint can close: signal-cli does not read from a stream's connection, so it
  learns that the client is gone (killed, crashed, stopped, even cleanly) only when a write fails, and TCP
  accepts the first write after the peer left and loses it. A message signal-cli writes into the stream in that
  moment, before the next stream is open, is gone, as is one read by an adapter killed before the commit:
  signal-cli already acknowledged it to Signal and keeps no copy. Its keep-alive every 15 s bounds the moment to
  two writes (the lost one and the failing one); then messages wait on Signal's servers again.
* storage unavailable (a full disk, a held lock): the batch read waits in hand, retried, the stream held open but
  unread (closing it would lose the batch); what signal-cli writes meanwhile waits in the socket's buffers.
* twice: signal-cli re-handles a message it stored but had not finished (it was killed), and Signal re-delivers
  one whose acknowledgement was lost; both come with the same sender and timestamp, and the inbox's dedup on
  ``<sender>:<timestamp>`` makes them one row (G2).

Outbound: no edits (pacing ``supports_edit = false``: the stream consumer sends the final answer once, no previews;
Signal's own edits are capped per message and marked "edited", unfit for streaming). A text over 2,000 bytes goes
in one ``send``, and signal-cli sends it as official clients do: the first 2,000 bytes as the body and the whole
text as a ``text/x-signal-plain`` attachment, which clients show as one message ("Read more"); texts beyond 64 KiB
(what Signal Desktop sends as one) are split by the consumer. Signal has no idempotency key: a send whose answer
was lost is re-sent with the marker. A reply's voice note (docs/media.md, voice replies) goes as a ``send`` with the
audio attached and the ``voiceNote`` flag, read from the media cache, so a reply finished after a crash sends the
audio its transcript names.
"""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Optional

import aiohttp

from actors.adapters.intake_styles import StreamingAdapter
from actors.adapters.outbound import backoff_s
from actors.adapters.errors import PermanentError, RetryableError, TooLongError
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.adapters.pacing import utf8_len
from actors.adapters.signal.inbound import (BotIdentity, event_from_receive, is_input, recipient_params,
                                              split_ref)
from actors.adapters.signal.client import AttachmentTooBig, SignalRPC
from actors.adapters.signal.sse import EventStreamDecoder
from actors.messages import Attachment, MessageEvent, PlatformOp
from storage import StorageUnavailable

CONNECT_TIMEOUT_S = 10.0
STORAGE_WAIT_S = (0.2, 5.0)      # retry delays of a batch waiting for storage: first, longest


class SignalAdapter(StreamingAdapter):
    def __init__(self):
        super().__init__()
        self.bot = BotIdentity("")
        self.skipped = 0
        self._rpc: Optional[SignalRPC] = None
        self._events_http: Optional[aiohttp.ClientSession] = None

    # -------------------------------------------------------------------------------------------------- intake
    async def connect(self) -> None:
        self.bot = BotIdentity(self.settings["account"], self.settings["account_uuid"])
        await self._api().check()    # the daemon is up; a refusal of the stream itself shows in run_intake

    async def disconnect(self) -> None:
        http, self._events_http = self._events_http, None
        if http is not None:
            await http.close()

    def events_url(self) -> str:
        return self.settings["base_url"].rstrip("/") + "/api/v1/events"

    def normal_silence_s(self) -> float:
        # signal-cli writes a keep-alive every 15 s; the stream's read timeout (idle_timeout_s) reopens a silent
        # one first, so this bound only catches a stream stuck past its own timeout.
        return self.settings["idle_timeout_s"] + CONNECT_TIMEOUT_S + 15.0

    async def run_intake(self, emit) -> None:
        await self.disconnect()
        self._events_http = aiohttp.ClientSession()
        params = {"account": self.bot.number} if self.settings["multi_account"] else None
        # No total timeout (the stream is endless); a stream silent for idle_timeout_s (signal-cli writes a
        # keep-alive every 15 s) is taken for dead and opened again.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S,
                                        sock_read=self.settings["idle_timeout_s"])
        try:
            async with self._events_http.get(self.events_url(), params=params, timeout=timeout,
                                             headers={"Accept": "text/event-stream"}) as resp:
                if resp.status != 200:
                    why = "no such account on the daemon" if resp.status == 400 else \
                        "the daemon refused the Host header" if resp.status == 421 else f"HTTP {resp.status}"
                    raise (RetryableError if resp.status >= 500 else PermanentError)(
                        f"event stream: {why}", method="events", status=resp.status)
                decoder = EventStreamDecoder()
                async for chunk in resp.content.iter_any():
                    self.report_progress()    # an event or signal-cli's keep-alive comment (liveness.py)
                    raws = [_decoded(e.data) for e in decoder.feed(chunk) if e.event == "receive"]
                    batch = [raw for raw in raws if is_input(raw, self.bot, self.settings["require_mention"])]
                    self.skipped += len(raws) - len(batch)
                    offset = self._delivered_offset(raws)
                    if batch or offset is not None:
                        # Committed before the next read: the stream has no acknowledgement, so the only thing
                        # that shortens the window of loss is not holding events in memory.
                        await self._store(emit, batch, offset)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise RetryableError(f"event stream: {type(exc).__name__}: {exc}", method="events") from None

    async def _store(self, emit, batch: list, offset: Optional[dict]) -> None:
        """``emit`` until it commits. Storage that is unavailable (a full disk, a lock held) is waited out with the
        batch in hand and the stream left open but unread: dropping the connection would lose the batch for good
        (signal-cli keeps no copy), while what signal-cli writes meanwhile waits in the socket's buffers."""
        failures = 0
        while True:
            try:
                await emit(batch, offset)
                return
            except StorageUnavailable as exc:
                # Waiting for storage with the batch in hand is no zombie: a restart would lose the batch.
                self.report_progress()
                failures += 1
                if failures == 1 or failures % 20 == 0:
                    self.say(logging.WARNING, "%s: %d event(s) read from the stream wait for storage (%s, %d "
                              "tries); the stream is held, not read", self.name, len(batch), self.clean_error(exc),
                              failures)
                await asyncio.sleep(backoff_s(failures, STORAGE_WAIT_S[0], STORAGE_WAIT_S[1]))

    def _delivered_offset(self, raws: list) -> Optional[dict]:
        """The newest ``serverDeliveredTimestamp`` among ``raws`` and the committed offset: when Signal last
        delivered something this adapter stored (a re-delivery has a later one than the first delivery)."""
        previous = self.offset.get("delivered", 0) if isinstance(self.offset, dict) else 0
        stamps = [raw["envelope"].get("serverDeliveredTimestamp") for raw in raws
                  if isinstance(raw, dict) and isinstance(raw.get("envelope"), dict)]
        newest = max([s for s in stamps if type(s) is int] + [previous])
        return {"delivered": newest} if newest > previous else None

    def normalise(self, raw: Any) -> MessageEvent:
        return event_from_receive(raw, self.name, self.profile, self.bot)

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        """``getAttachment``: signal-cli downloaded the file before it put the message on the stream (unless it
        runs with ``--ignore-attachments``: then there is nothing to get)."""
        try:
            chat_id, attachment_id = split_ref(attachment.ref)
        except ValueError as exc:
            raise AttachmentGone(str(exc)) from None
        try:
            return await self._api().get_attachment(attachment_id, recipient_params(chat_id), cap)
        except AttachmentTooBig as exc:
            raise AttachmentTooLarge(max(exc.size, cap + 1), cap) from None
        except PermanentError as exc:
            raise AttachmentGone(self.clean_error(exc)) from None

    # ------------------------------------------------------------------------------------------------ outbound
    def _api(self) -> SignalRPC:
        if self._rpc is None:
            self._rpc = SignalRPC(self.settings["base_url"],
                                  self.settings["account"] if self.settings["multi_account"] else None)
        return self._rpc

    async def send_message(self, op: PlatformOp) -> str:
        size = utf8_len(op.text)
        if size > self.pacing.text_limit:
            raise TooLongError(f"{size} bytes is over the {self.pacing.text_limit} one message carries",
                               method="send")
        if not op.text.strip():
            raise PermanentError("signal-cli sends no empty message", method="send")
        return str(await self._api().send(recipient_params(op.chat_id), op.text))

    async def send_file(self, op: PlatformOp) -> str:
        """A reply's voice note (the only file this adapter is given: pacing ``sends_voice`` without
        ``sends_files``), from the media cache: the audio the transcript names, the same in every life."""
        if op.file.kind != "voice":
            raise PermanentError(f"Signal replies carry no {op.file.kind} here, only voice notes", method="send")
        data = await self.file_bytes(op.file)
        return str(await self._api().send_voice_note(recipient_params(op.chat_id), data, op.file.mime,
                                                     op.file.name, op.file.caption))

    async def delete_message(self, op: PlatformOp) -> None:
        if not (isinstance(op.message_id, str) and op.message_id.isascii() and op.message_id.isdigit()):
            raise PermanentError(f"delete: {op.message_id!r} is no Signal message timestamp", method="delete")
        await self._api().remote_delete(recipient_params(op.chat_id), int(op.message_id))

    async def send_typing(self, op: PlatformOp) -> None:
        await self._api().send_typing(recipient_params(op.chat_id))

    async def close(self) -> None:
        rpc, self._rpc = self._rpc, None
        if rpc is not None:
            await rpc.close()


def _decoded(data: str) -> Any:
    """The event's JSON, or its text when it is none (normalise then refuses it, and the log says why)."""
    try:
        return json.loads(data)
    except ValueError:
        return data
