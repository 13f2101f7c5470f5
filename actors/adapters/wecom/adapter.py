"""WeComAdapter: one WeCom (企业微信) application of one corp: callbacks in over HTTP, answers out through the
active message API (actors/adapters/wecom/README.md). A leaf process actor: the base (base.py) runs its intake and its lanes.

States: not connected -> connected (the callback server listens and gettoken accepted the corp id and secret) ->
back to not connected on a failure (the base reconnects with backoff; a refused secret is "refused": reported down
and asked again every ``refused_retry_s``). The callback server keeps listening from the first connect on, so a
gettoken outage never turns WeCom's callbacks away.

Intake (callback_server.py): each callback is checked (signature, timestamp, decryption, ReceiveId, XML) before
anything else; a refused one is logged once with its reason, nothing stored. A message is answered 200 only once
its inbox row is committed, within milliseconds, well inside WeCom's 5 s: no passive reply is ever given (the
module docstring of callback_server.py says why). A retry of a message committed in this life is skipped by its
``MsgId`` before any write; the inbox's (adapter, MsgId) dedup covers the rest (a retry after a restart, or one
that arrives while the first delivery is still being stored: it waits for the lock, then finds the id). Events
(entering the app, subscribing) are answered 200 and skipped. What survives kill -9: a committed row (WeCom was
answered after it); a callback cut before its commit was never answered, so WeCom sends it again (three tries,
within about 15 s: a gateway down longer loses what was sent meanwhile on WeCom's side, never on ours).

Outbound (api.py): message/send of text to ``touser`` = the member; the msgid it returns is the part's id in the
ledger, and message/recall is the delete. WeCom has no edits (pacing ``wecom``: the stream consumer sends the
final text only, once), no typing indicator and no idempotency key: a send whose answer was lost is re-sent with
the marker. An edit asked of this adapter is answered done without a call: a part only ever leaves with its final
text, so an edit (the sweeper or a resumed consumer finishing a recorded part) asks for the text it shows. The
text limit is 2,048 bytes of UTF-8: WeCom truncates longer texts silently, so a longer one is refused here as
too long before it leaves (the consumer cuts at the limit). WeCom drops, silently too, a 31st message to one
member within a minute: pacing ``wecom`` keeps each chat under 30 a minute.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import logging
from typing import Any, Optional

from actors.adapters.intake_styles import WebhookAdapter
from actors.adapters.errors import PermanentError, TooLongError
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.adapters.pacing import utf8_len
from actors.adapters.wecom.client import MediaTooLarge, WeComAPI
from actors.adapters.wecom.callback_server import CallbackServer
from actors.adapters.wecom.crypto import aes_key
from actors.adapters.wecom.inbound import event_from_message, skip_reason
from actors.messages import Attachment, MessageEvent, PlatformOp
from supervision.http_serving import http_limits

REMEMBERED_MESSAGES = 4096     # MsgIds committed in this life, for skipping retries without a write
TEXT_LIMIT_BYTES = 2048


class WeComAdapter(WebhookAdapter):
    def __init__(self):
        super().__init__()
        self.skipped = 0               # callbacks answered without becoming input (events)
        self.retries_skipped = 0       # re-deliveries of messages committed in this life
        self._api: Optional[WeComAPI] = None
        self._emit_lock: Optional[asyncio.Lock] = None
        self._committed: collections.OrderedDict = collections.OrderedDict()

    # -------------------------------------------------------------------------------------------------- intake
    def api(self) -> WeComAPI:
        if self._api is None:
            self._api = WeComAPI(self.settings["corp_id"], self.settings["secret"], self.settings["base_url"],
                                 rate_limit_wait_s=self.settings["rate_limit_wait_s"])
        return self._api

    async def connect(self) -> None:
        if self.push_server.server is None:
            self._emit_lock = asyncio.Lock()
            await self._serve_callbacks()
        await self.api().access_token()   # a wrong corp id or secret fails here: PermanentError (intake._refused)

    async def _serve_callbacks(self) -> None:
        def on_error(text: str) -> None:
            self.say(logging.WARNING, "%s: a callback was not stored (%s); WeCom will send it again", self.name,
                      self.clean_error(text))

        def on_refused(reason: str) -> None:
            self.intake.reject(reason)

        settings = self.settings
        server = CallbackServer(
            settings["callback_host"], settings["callback_port"], settings["callback_path"],
            token=settings["token"], key=aes_key(settings["encoding_aes_key"]), corp_id=settings["corp_id"],
            deliver=functools.partial(self._deliver, self.intake.emit), on_error=on_error, on_refused=on_refused,
            limits=http_limits(self.config), max_skew_s=settings["max_timestamp_skew_s"])
        port = await server.start()   # a port that is taken raises here: retried, nothing half-started is kept
        self.push_server.server = server
        self.say(logging.INFO, "%s: WeCom callbacks on %s:%d%s", self.name, settings["callback_host"], port,
                  settings["callback_path"])

    async def _deliver(self, emit, message: Any) -> None:
        """Store one message (or skip it); WeCom is answered when this returns."""
        if skip_reason(message) is not None:
            self.skipped += 1
            return
        msg_id = message.get("MsgId")
        async with self._emit_lock:   # one transaction at a time; a retry racing its first delivery waits here
            if msg_id in self._committed:
                self.retries_skipped += 1
                return
            await emit([message], None)
        if msg_id:
            self._committed[msg_id] = True
            while len(self._committed) > REMEMBERED_MESSAGES:
                self._committed.popitem(last=False)

    def normalise(self, raw: Any) -> MessageEvent:
        return event_from_message(raw, self.name, self.profile, self.settings.get("agent_id"))

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        try:
            return await self.api().media(attachment.ref, cap)
        except MediaTooLarge as exc:
            raise AttachmentTooLarge(exc.size, cap) from None
        except PermanentError as exc:   # an unknown or expired media_id (kept 3 days)
            raise AttachmentGone(self.clean_error(exc)) from None

    # ------------------------------------------------------------------------------------------------ outbound
    async def send_message(self, op: PlatformOp) -> str:
        size = utf8_len(op.text)
        if size > TEXT_LIMIT_BYTES:
            raise TooLongError(f"{size} bytes of UTF-8, over WeCom's {TEXT_LIMIT_BYTES}", method="message/send")
        if not op.text.strip():
            raise PermanentError("WeCom refuses an empty text", method="message/send")
        return await self.api().send_text(self.settings["agent_id"], op.chat_id, op.text)

    async def delete_message(self, op: PlatformOp) -> None:
        if not op.message_id:
            raise PermanentError("recall: no msgid", method="message/recall")
        await self.api().recall(str(op.message_id))

    async def close(self) -> None:
        await self.push_server.close()
        api, self._api = self._api, None
        if api is not None:
            await api.close()
