"""TelegramAdapter: one bot token, Bot API over HTTPS, long polling or a webhook (actors/adapters/telegram/README.md).

Intake. Polling: ``getUpdates`` from the committed offset (last update_id + 1); the base commits the round's rows and
that offset in one transaction, and only the next poll tells Telegram, so nothing acknowledged is lost and nothing
re-delivered is stored twice. Webhook: each pushed update is answered 2xx only after its row is committed.

Button presses (``callback_query``): a press on a tool approval's question is looked up (its approval, by the id in
its data) before its round is stored: one that may answer is stored as the clicker's answer in the button's chat, a
row deduplicated on the press's id, so a press delivered again after a kill -9 (its offset not yet committed) is
the same row; the session then answers it as a typed ``approve CODE`` (first answer wins). Every press is answered
(answerCallbackQuery, at most once per press and life, after its round is stored, never awaited by the intake) with
what storage says at that moment: Approved / Denied, already answered, expired, not yours, or no longer valid. The
question is then edited to what became of it (approved or denied by whom, expired), its buttons removed: once the
session has decided, for a stored press; at once, for a press on a question already settled.

Outbound. Sends and edits are rendered to the configured parse mode and resent as plain text if Telegram refuses
the entities. The base paces each chat (shared by sends and edits) and waits out 429s; on top of that a bot-wide
budget (``bot_ops_per_s``) keeps the whole bot under Telegram's ~30 messages per second, which no chat's lane can
see alone. Intake and outbound use separate clients, so a reconnect never cuts an operation in flight.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from typing import Any, Optional

from actors.adapters.intake_styles import PollingAdapter
from actors.adapters.liveness import SERVED_SILENCE_S
from actors.adapters.errors import FormattingError, MessageNotFoundError, PermanentError, PlatformError
from actors.adapters.lost_copies import NOTHING, OTHERS, OURS, Unresolved, search, search_floor
from actors.adapters.telegram.formatting import render
from actors.adapters.telegram.inbound import (ALLOWED_UPDATES, ANSWER_FIELD, Click, click_of, event_from_update,
                                              is_input, message_id_of, reaction_of, update_ids)
from actors.adapters.telegram.webhook import WebhookServer
from actors.adapters.presses import SETTLED, STORED, ButtonPresses, JudgedPress, press_outcome
from actors.approvals.answers import Answerer
from actors.adapters.telegram.client import FileTooLarge, TelegramAPI
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.messages import Attachment, MessageEvent, PlatformOp
from actors.adapters.pacing import ChatBudget
from supervision.http_serving import http_limits

OUTBOUND_TIMEOUT_S = 30.0


class TelegramAdapter(ButtonPresses, PollingAdapter):
    def __init__(self):
        super().__init__()
        self.bot_username = ""
        self.skipped = 0               # updates acknowledged without becoming input (edits, stickers, joins)
        self._poller: Optional[TelegramAPI] = None
        self._sender: Optional[TelegramAPI] = None
        self._webhook: Optional[WebhookServer] = None
        self._webhook_cleared = False
        self._bot_budget: Optional[ChatBudget] = None
        self._emit_lock: Optional[asyncio.Lock] = None
        self._acks_due: list[tuple[Click, JudgedPress]] = []   # answered once their round is stored
        self.init_presses()

    def on_start(self, args) -> None:
        super().on_start(args)
        if self.settings.get("per_user_in_groups") is not None:  # this bot's own choice beats [sessions]
            self.per_user_in_groups = bool(self.settings["per_user_in_groups"])

    def on_PlatformOp(self, op: PlatformOp, sender) -> None:
        # Telegram gives groups, supergroups and channels negative ids. Not every sender names the chat type (the
        # sweeper does not), and the chat's budget is sized by the first op it sees: a group must get group pacing.
        if op.chat_type == "dm" and str(op.chat_id).startswith("-"):
            op = dataclasses.replace(op, chat_type="group")
        super().on_PlatformOp(op, sender)

    # -------------------------------------------------------------------------------------------------- intake
    @property
    def push_style(self) -> bool:
        # Both modes run through run_intake: a webhook is pushed to, and polling loops there too, so that the
        # adapter counts as connected once getMe answers (connect), not after its first long poll of up to 25 s.
        return True

    def normal_silence_s(self) -> float:
        if self.settings["mode"] == "webhook":
            return SERVED_SILENCE_S   # the kit probes the webhook server (liveness.py)
        # A getUpdates comes back within its wait, or times out past OUTBOUND_TIMEOUT_S and the intake reconnects.
        return max(1, math.ceil(self.settings["poll_timeout_s"])) + OUTBOUND_TIMEOUT_S + 5.0

    def _client(self, request_timeout: float) -> TelegramAPI:
        return TelegramAPI(self.settings["token"], self.settings["base_url"], request_timeout=request_timeout)

    async def connect(self) -> None:
        self._poller = self._client(OUTBOUND_TIMEOUT_S)
        me = await self._poller.get_me()  # a revoked token fails here: PermanentError (intake._refused)
        self.bot_username = str(me.get("username") or "") if isinstance(me, dict) else ""
        if self.settings["mode"] == "polling" and not self._webhook_cleared:
            # getUpdates answers 409 for as long as a webhook is set (left by an earlier webhook-mode run).
            await self._poller.delete_webhook()
            self._webhook_cleared = True

    def served_url(self) -> Optional[str]:
        webhook = self._webhook
        if webhook is None or webhook.port is None:
            return None
        return f"http://{self.settings['webhook_host']}:{webhook.port}{self.settings['webhook_path']}"

    async def disconnect(self) -> None:
        webhook, self._webhook = self._webhook, None
        poller, self._poller = self._poller, None
        if webhook is not None:
            await webhook.stop()
        if poller is not None:
            await poller.close()

    async def fetch(self) -> tuple[list, Any]:
        # The Bot API takes whole seconds (0 spins); on a host sharing the database the wait also ends while this
        # host surely holds the intake's lease, so its poll never overlaps the next holder's (connection_lease.py).
        timeout = max(1, math.floor(await self.intake.poll_window(math.ceil(self.settings["poll_timeout_s"]))))
        updates = await self._poller.get_updates(offset=self.offset, timeout=timeout,
                                                 allowed_updates=ALLOWED_UPDATES)
        if not isinstance(updates, list):
            raise PermanentError(f"getUpdates returned {type(updates).__name__}, not a list", method="getUpdates")
        ids = update_ids(updates)
        updates = await self.read_clicks(updates)
        wanted = [u for u in updates if is_input(u)]
        self.skipped += len(updates) - len(wanted)
        # Before the offset is committed with the rows: a crash between the two gets them again (an upsert).
        await self.record_feedback([r for u in updates if (r := reaction_of(u, self.name)) is not None])
        return wanted, (max(ids) + 1 if ids else None)

    async def run_intake(self, emit) -> None:
        if self.settings["mode"] == "webhook":
            await self._serve_webhook(emit)
        while True:
            raws, offset = await self.fetch()
            self.report_progress()     # a round came back (liveness.py)
            if raws or (offset is not None and offset != self.offset):
                await emit(raws, offset)   # rows and offset committed together; the next poll acknowledges
            self.answer_presses()

    async def _serve_webhook(self, emit) -> None:
        secret = self.settings["webhook_secret"]
        if not secret:
            raise PermanentError("webhook mode needs webhook_secret: without it anyone could post updates")
        self._emit_lock = asyncio.Lock()

        async def deliver(update: Any) -> None:
            if (reaction := reaction_of(update, self.name)) is not None:
                await self.record_feedback([reaction])   # acknowledged once stored, like a message
                return
            [update] = await self.read_clicks([update])
            if not is_input(update):
                self.skipped += 1
                self.answer_presses()
                return
            async with self._emit_lock:  # one transaction at a time on the adapter's store
                await emit([update], None)
            self.answer_presses()

        def on_error(text: str) -> None:
            self.say(logging.WARNING, "%s: a webhook update was not stored (%s); Telegram will send it again",
                      self.name, self.clean_error(text))

        def on_refused(reason: str) -> None:
            self.intake.reject(f"webhook request refused: {reason}")

        self._webhook = WebhookServer(self.settings["webhook_host"], self.settings["webhook_port"],
                                      self.settings["webhook_path"], secret, deliver, on_error, on_refused,
                                      limits=http_limits(self.config))
        port = await self._webhook.start()
        url = self.settings["webhook_url"] or (f"http://{self.settings['webhook_host']}:{port}"
                                               f"{self.settings['webhook_path']}")
        await self._poller.set_webhook(url, secret_token=secret, allowed_updates=ALLOWED_UPDATES)
        self.say(logging.INFO, "%s: webhook listening on %s:%d%s", self.name, self.settings["webhook_host"], port,
                  self.settings["webhook_path"])
        await asyncio.get_running_loop().create_future()  # serve until the intake is cancelled: never returns

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        """``getFile`` for the path, then the download (on the intake's client: fetching belongs to the round)."""
        if self._poller is None:          # not connected (a webhook round cut by a reconnect): a client of its own
            async with self._client(OUTBOUND_TIMEOUT_S) as api:
                return await self._download(api, attachment, cap)
        return await self._download(self._poller, attachment, cap)

    async def _download(self, api: TelegramAPI, attachment: Attachment, cap: int) -> bytes:
        try:
            file = await api.get_file(attachment.ref)
        except PermanentError as exc:
            if "file is too big" in exc.description.lower():
                raise AttachmentTooLarge(max(attachment.size, cap + 1), cap) from None
            raise AttachmentGone(self.clean_error(exc)) from None
        size, path = file.get("file_size"), file.get("file_path")
        if type(size) is int and size > cap:
            raise AttachmentTooLarge(size, cap)
        if not isinstance(path, str) or not path:
            raise AttachmentGone("getFile gave no file_path")
        try:
            return await api.download_file(path, cap)
        except FileTooLarge as exc:
            raise AttachmentTooLarge(exc.size, cap) from None
        except PermanentError as exc:
            raise AttachmentGone(self.clean_error(exc)) from None

    # ------------------------------------------------------------------------------------------- button presses
    async def read_clicks(self, updates: list) -> list:
        """The updates, each press read: one that may answer a question gets the answer's words (``ANSWER_FIELD``)
        and is stored with the round; any other is only answered (an unknown or malformed button, a question
        answered or expired, a clicker it is not for). Its answer is due once the round is stored."""
        out = []
        for update in updates:
            click = click_of(update)
            if click is None:
                out.append(update)
                continue
            judged = await self.judge_press(update, Answerer(self.name, click.chat_id, click.user_id), click.data,
                                            ANSWER_FIELD)
            self._acks_due.append((click, judged))
            out.append(judged.raw)
        return out

    def answer_presses(self) -> None:
        """Answer the presses whose round is stored (presses.py ``acknowledge_press``: once each in this life)."""
        due, self._acks_due = self._acks_due, []
        for click, judged in due:
            self.acknowledge_press(click.query_id, lambda c=click, j=judged: self._answer_press(c, j))

    async def _answer_press(self, click: Click, judged: JudgedPress) -> None:
        """answerCallbackQuery with what storage said; then the question shows what became of it, its buttons
        gone: at once for a press on a settled question, once the session has decided for a stored one."""
        def mention(user_id: str) -> str:   # a plain text edit names the presser by name, anyone else by id
            return click.user_name if user_id == click.user_id and click.user_name else user_id

        async def settle(settled: str) -> None:
            await self._bot_turn()
            await self._api().edit_message_text(click.chat_id, click.message_id, settled)   # no buttons: removed
        kind, text = press_outcome(judged, Answerer(self.name, click.chat_id, click.user_id), click.message_text,
                                   time.time(), mention)
        try:
            await asyncio.wait_for(self._api().answer_callback_query(click.query_id, judged.notice),
                                   OUTBOUND_TIMEOUT_S)
        except (PlatformError, asyncio.TimeoutError) as exc:   # too old (replayed after a restart): the edit goes
            self.say(logging.INFO, "%s: a button press was not answered (%s)", self.name, self.clean_error(exc))
        if kind == STORED and judged.approval is not None:   # (a /model button's: the session's reply says)
            self.edit_when_settled(judged.approval.approval_id, click.message_text, settle, mention)
        elif kind == SETTLED:
            await settle(text)

    def normalise(self, raw: Any) -> MessageEvent:
        return event_from_update(raw, self.name, self.profile, self.bot_username)

    # ------------------------------------------------------------------------------------------------ outbound
    def _api(self) -> TelegramAPI:
        if self._sender is None:
            self._sender = self._client(OUTBOUND_TIMEOUT_S)
        return self._sender

    async def _bot_turn(self) -> None:
        """Wait for the bot-wide budget: Telegram also limits a bot as a whole, whatever the chats."""
        loop = asyncio.get_running_loop()
        if self._bot_budget is None:
            rate = self.settings["bot_ops_per_s"]
            # Spent at start, like the chats' budgets: the previous life may have used it up just before dying.
            self._bot_budget = ChatBudget(rate, max(1, int(rate)), loop.time(), spent_at=self._budgets.started_at)
        while (wait := self._bot_budget.wait_time(loop.time())) > 0:
            await asyncio.sleep(wait)
        self._bot_budget.consume(loop.time())

    async def _formatted(self, op: PlatformOp, call) -> Any:
        """``call(text, parse_mode)`` with the rendered text; on an entity-parse refusal, once more as plain text."""
        text, parse_mode = render(op.text, self.settings["parse_mode"])
        await self._bot_turn()
        try:
            return await call(text, parse_mode)
        except FormattingError as exc:
            if parse_mode is None:
                raise
            self.say(logging.WARNING, "%s: chat %s refused the %s markup of %s %s (%s); sent as plain text",
                      self.name, op.chat_id, parse_mode, op.action, op.op_id, self.clean_error(exc))
        await self._bot_turn()
        return await call(op.text, None)

    async def send_message(self, op: PlatformOp) -> str:
        thread_id, reply_to = message_id_of(op.thread_id), message_id_of(op.reply_to)
        buttons = await self.question_buttons(op)

        async def call(text: str, parse_mode: Optional[str]) -> int:
            return await self._api().send_message(op.chat_id, text, parse_mode, thread_id=thread_id,
                                                  reply_to=reply_to, buttons=buttons)
        return str(await self._formatted(op, call))

    async def send_file(self, op: PlatformOp) -> str:
        data, file = await self.file_bytes(op.file), op.file
        await self._bot_turn()
        return str(await self._api().send_file(op.chat_id, file.kind, data, file.name, file.mime, file.caption,
                                               thread_id=message_id_of(op.thread_id),
                                               reply_to=message_id_of(op.reply_to)))

    async def set_reaction(self, op: PlatformOp) -> None:
        await self._bot_turn()
        await self._api().set_message_reaction(op.chat_id, _message_id(op), op.text)

    async def edit_message(self, op: PlatformOp) -> None:
        message_id = _message_id(op)
        buttons = await self.question_buttons(op)   # a preview edited into the question gets them then

        async def call(text: str, parse_mode: Optional[str]) -> bool:
            return await self._api().edit_message_text(op.chat_id, message_id, text, parse_mode, buttons=buttons)
        await self._formatted(op, call)   # False (not modified: already this text) is success too

    async def delete_message(self, op: PlatformOp) -> None:
        message_id = _message_id(op)
        await self._bot_turn()
        await self._api().delete_message(op.chat_id, message_id)

    async def find_lost_copy(self, op: PlatformOp) -> Optional[str]:
        """In a private chat Telegram numbers the messages of both sides in one sequence, and a bot may edit only
        its own: the ids after the last one known before the lost send tell whether it landed (lost_copies.py).
        A group's ids are not this chat's own sequence: there the reply is marked instead."""
        if str(op.chat_id).startswith("-") or op.chat_type != "dm" or op.ledger is None:
            raise Unresolved("only a private chat numbers its messages in sequence")
        oid, _fence, index = op.ledger
        ob = await self.store.ledger.get(oid)
        floor = None if ob is None else search_floor(message_id_of(ob.target.reply_to),   # "chat:id" -> id
                                                     [m for i, m in sorted(ob.parts.items()) if i < index])
        if floor is None:
            raise Unresolved("no message is known to be older than the lost copy")
        ours = await self.store.ledger.part_ids_in_chat(self.name, str(op.chat_id))
        highest = max([floor] + [int(i) for i in ours if i.isdigit()])
        budget = self._budgets.of(op.chat_id, op.chat_type, self.pacing)
        probes = 0

        async def probe(message_id: int) -> str:
            nonlocal probes
            if probes:
                await self._spend(budget)   # the first probe spent the operation's own turn
            probes += 1
            try:
                await self.edit_message(dataclasses.replace(op, action="edit", message_id=str(message_id)))
                return OURS            # "not modified" is success too: the copy shows this text already
            except MessageNotFoundError:
                return NOTHING
            except PermanentError as exc:
                if "can't be edited" in exc.description:
                    return OTHERS
                raise
        recorded = ob.parts.get(index)
        if recorded is not None and str(recorded).isdigit() and await probe(int(recorded)) == OURS:
            found = int(recorded)   # its id came back and was recorded, only the answer to the sender was lost
        else:
            found = await search(probe, floor, ours, highest)
        self.say(logging.INFO, "%s: the lost send of part %d of %s %s", self.name, index, oid[:12],
                  "never landed" if found is None else f"is message {found}, edited into place")
        return None if found is None else str(found)

    async def send_typing(self, op: PlatformOp) -> None:
        await self._api().send_chat_action(op.chat_id, "typing", thread_id=message_id_of(op.thread_id))

    async def close(self) -> None:
        sender, self._sender = self._sender, None
        if sender is not None:
            await sender.close()


def _message_id(op: PlatformOp) -> int:
    message_id = message_id_of(op.message_id)
    if message_id is None:
        raise PermanentError(f"{op.action}: {op.message_id!r} is no Telegram message id")
    return message_id
