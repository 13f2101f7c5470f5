"""The adapter for the generic fake platform (tests/fakes/fakeplatform.py): the whole pipeline runs against it.

    [adapters.fake]
    type = "fake"
    base_url = "http://127.0.0.1:8080"
    poll_timeout_s = 1.0           # long-poll wait per round
    profile = "default"

Long polling: the offset is the last update id + 1, and polling with it acknowledges every update before it.
Intake and outbound use separate clients, so a reconnect of the intake never cuts an operation in flight.
"""
from __future__ import annotations

import time
from typing import Any, Optional

from actors.adapters.intake_styles import PollingAdapter
from actors.adapters.payload_fields import MalformedPayload, a_nonempty_string, a_string, an_object
from actors.adapters.fake.client import FakePlatformAPI
from actors.messages import MessageEvent, PlatformOp, Source

CHAT_TYPES = ("dm", "group")
REQUEST_TIMEOUT_S = 30.0    # what a request may take beyond the long poll's wait (the client's default)


class FakePlatformAdapter(PollingAdapter):
    def __init__(self):
        super().__init__()
        self._poller: Optional[FakePlatformAPI] = None
        self._sender: Optional[FakePlatformAPI] = None

    # -------------------------------------------------------------------------------------------------- intake
    async def connect(self) -> None:
        self._poller = FakePlatformAPI(self.settings["base_url"])

    async def disconnect(self) -> None:
        poller, self._poller = self._poller, None
        if poller is not None:
            await poller.close()

    async def fetch(self) -> tuple[list, Any]:
        updates = await self._poller.poll_updates(offset=self.offset or 0,
                                                  timeout=self.settings["poll_timeout_s"])
        ids = [u["id"] for u in updates if isinstance(u, dict) and type(u.get("id")) is int]
        return updates, (max(ids) + 1 if ids else None)

    def normal_silence_s(self) -> float:
        # A round comes back within its long-poll wait, or its request times out (the client's timeout) and the
        # intake reconnects: longer than both together, nothing can be normal.
        return self.settings["poll_timeout_s"] + REQUEST_TIMEOUT_S + 5.0

    def normalise(self, raw: Any) -> MessageEvent:
        where = f"update {an_object(raw, 'update').get('id')!r}"
        chat = a_nonempty_string(raw.get("chat"), f"{where}: chat")
        text, message_id = a_string(raw.get("text"), f"{where}: text"), raw.get("message_id")
        if not isinstance(message_id, (str, int)) or isinstance(message_id, bool) or message_id == "":
            raise MalformedPayload(f"{where}: message_id missing")
        chat_type = raw.get("chat_type") or "dm"
        if chat_type not in CHAT_TYPES:
            raise MalformedPayload(f"{where}: unknown chat_type {chat_type!r}")
        user, thread = raw.get("user"), raw.get("thread")
        source = Source(platform=self.name, chat_id=chat, chat_type=chat_type,
                        thread_id=None if thread is None else str(thread),
                        user_id=None if user is None else str(user),
                        user_name=None if user is None else str(user), profile=self.profile)
        # The fake numbers messages across all chats, so its message id alone is unique: the dedup key as is.
        sent = raw.get("date")     # the fake platform's own clock, like Telegram's ``date``
        mentioned = raw.get("mentioned")   # the fake says whether a group message mentions the bot, if it says
        return MessageEvent(source=source, text=text, platform_message_id=str(message_id), received_at=time.time(),
                            sent_at=float(sent) if type(sent) in (int, float) else None,
                            addressed=mentioned if isinstance(mentioned, bool) else None)

    # ------------------------------------------------------------------------------------------------ outbound
    def _client(self) -> FakePlatformAPI:
        if self._sender is None:
            self._sender = FakePlatformAPI(self.settings["base_url"])
        return self._sender

    async def send_message(self, op: PlatformOp) -> str:
        return await self._client().send(op.chat_id, op.text, reply_to=op.reply_to, thread=op.thread_id)

    async def send_file(self, op: PlatformOp) -> str:
        data = await self.file_bytes(op.file)
        return await self._client().send_file(op.chat_id, op.file.kind, op.file.name, data, op.file.caption,
                                              reply_to=op.reply_to, thread=op.thread_id)

    async def edit_message(self, op: PlatformOp) -> None:
        await self._client().edit(op.chat_id, op.message_id, op.text)  # False (not modified) is success too

    async def delete_message(self, op: PlatformOp) -> None:
        await self._client().delete(op.chat_id, op.message_id)

    async def send_typing(self, op: PlatformOp) -> None:
        await self._client().typing(op.chat_id)

    async def close(self) -> None:
        sender, self._sender = self._sender, None
        if sender is not None:
            await sender.close()
