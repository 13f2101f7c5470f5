"""EmailAdapter: one mailbox the agent answers, IMAP in, SMTP out (actors/adapters/email/README.md).

Intake (push style). ``ImapMailbox`` (client.py) holds one IMAP connection with the mailbox selected. Each round
lists the UIDs above the offset, fetches them without setting \\Seen, hands the mails that are input to the kit
(``emit``), which stores the rows together with the offset ``{"uidvalidity", "uid"}`` of the last one in one
transaction; only then are they marked \\Seen. Then IDLE until the server pushes a new mail, or the interval ends
(every answer of the server is proof of life). A lost connection ends ``run_intake`` and the kit reconnects with
backoff.

The offset is the acknowledgment; \\Seen is for the people who read the mailbox too. Where the offset's UIDVALIDITY
is not the mailbox's (the first start, or the server renumbered the mailbox), UIDs say nothing, and the unseen mail
is taken instead: a mail stored before the change was marked \\Seen, or it is taken again and the inbox's dedup on
its Message-ID keeps it one row.

Outbound. A reply is one mail to the chat's correspondent, in its thread (``In-Reply-To`` the message it answers,
``References`` the thread), text with an HTML alternative, ``Auto-Submitted: auto-replied`` so that other robots do
not answer it (RFC 3834). Its ``Message-ID`` is derived from the reply's part and its text (formatting.reply_key:
the obligation and the part's index, recorded in the ledger as the send's intent before the mail leaves), so every
attempt at one send, by any owner of the reply in any life, carries the same id. Once the SMTP server took it, the
mail is filed in the Sent folder (sent.py, ``sent_copy = "append"``); a send whose answer was lost (a kill -9, a
connection cut mid-submission) is looked for there by that id before the reply goes again (``find_lost_copy``):
found, it is the part, and the correspondent gets one mail. No edits, no deletes: a mail once sent is the
recipient's.

State: the connection, the Sent folder (its name once found), the mails of the round being stored (their files are
decoded from them: download_attachment), the thread cards (subject and references of each chat's last mail,
bounded, THREADS_KEPT; after a restart a reply to a chat not seen since reads the card of the mail it answers from
the mailbox: mail_lookup.py, ``thread_card_for``).
Messages: those of every ``PlatformAdapter`` (base.py): PlatformOp in, OpResult out; doorbells to the sessions.

What survives kill -9: the rows and the offset (one transaction); a mail stored and not yet marked \\Seen is marked at
the next connection (its UID is at or below the offset) and never taken again. The thread cards do not survive:
the mails they are read from do, in the mailbox. A reply filed in the Sent folder is on the server: the next owner
of the reply finds it there.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Any, Optional

from actors.adapters.email.client import ImapMailbox, send_mail
from actors.adapters.email.formatting import reply_key, reply_mail, reply_message_id, root_card
from actors.adapters.email.inbound import (attachment_bytes, chat_id, chat_parts, event_from_mail, header,
                                           message_ids, parse, refusal, sender_address, thread_card, thread_root)
from actors.adapters.email.mail_lookup import header_of
from actors.adapters.email.sent import SentFolder
from actors.adapters.errors import PermanentError, TooLongError
from actors.adapters.intake_styles import StreamingAdapter
from actors.adapters.lost_copies import Unresolved
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.messages import Attachment, MessageEvent, PlatformOp

BATCH = 20                         # mails stored in one round at most
THREADS_KEPT = 10_000              # thread cards kept (subject, references) at most


class EmailAdapter(StreamingAdapter):
    def __init__(self):
        super().__init__()
        self.box: Optional[ImapMailbox] = None
        self.threads: collections.OrderedDict = collections.OrderedDict()
        self.refused = 0                   # mails not answered (loop protection)
        self.in_round: dict = {}           # (uidvalidity, uid) -> the mail, while its round is being stored
        self._sent: Optional[SentFolder] = None   # made from the settings at first use (they come with the start)

    # -------------------------------------------------------------------------------------------------- intake
    def normal_silence_s(self) -> float:
        # An IDLE ends every idle_interval_s and the next round's commands are answered within connect_timeout_s.
        return self.settings["idle_interval_s"] + 2 * self.settings["connect_timeout_s"]

    async def connect(self) -> None:
        if self.box is None or self.box.imap is None or self.box.lost.is_set():
            await self.disconnect()
            box = ImapMailbox(self.settings, alive=self.report_progress)
            try:
                await box.open()
            except BaseException:
                await box.close()
                raise
            self.box = box

    async def disconnect(self) -> None:
        box, self.box = self.box, None
        if box is not None:
            await box.close()

    async def run_intake(self, emit) -> None:
        box = self.box
        offset = self.offset if isinstance(self.offset, dict) else {}
        if offset.get("uidvalidity") == box.uidvalidity and isinstance(offset.get("uid"), int):
            after: Optional[int] = offset["uid"]
            # Stored before a kill -9 and not yet marked: the offset says they are had.
            await box.mark_seen([uid for uid in await box.unseen_uids() if uid <= after])
        else:
            if offset:
                self.say(logging.WARNING, "%s: the mailbox's UIDVALIDITY changed (%s -> %s): taking its unseen "
                         "mail (what was stored before is known by its Message-ID)", self.name,
                         offset.get("uidvalidity"), box.uidvalidity)
            after = None
        while True:
            # By \Seen (after is None): the mail seen by a person and above the last unseen one is had too, so the
            # round's last offset is the highest UID there was before the search (newer mail is in the search).
            ceiling = await box.highest_uid() if after is None else 0
            uids = await (box.unseen_uids() if after is None else box.new_uids(after))
            if after is None and not uids:
                await emit([], {"uidvalidity": box.uidvalidity, "uid": ceiling})   # the new UIDVALIDITY, kept
            for start in range(0, len(uids), BATCH):
                batch = uids[start:start + BATCH]
                last = max(batch[-1], ceiling) if start + BATCH >= len(uids) else batch[-1]
                raws = await self._fetched(box, batch)
                # The round's files are taken from the mails themselves while it is stored (download_attachment).
                self.in_round = {(raw["uidvalidity"], raw["uid"]): raw["mail"] for raw in raws}
                try:
                    await emit([raw for raw in raws if self._is_input(raw)],
                               {"uidvalidity": box.uidvalidity, "uid": last})
                finally:
                    self.in_round = {}
                await box.mark_seen(batch)   # after the commit: a kill -9 before this is the case above
                after = last if after is None else max(after, last)
            after = ceiling if after is None else after
            await box.wait_for_news(self.settings["idle_interval_s"])

    async def _fetched(self, box: ImapMailbox, uids: list[int]) -> list[dict]:
        sizes = await box.sizes(uids)
        raws = []
        for uid in uids:
            too_large = sizes.get(uid, 0) > self.settings["max_message_bytes"]
            mail = await box.fetch(uid, headers_only=too_large)
            if mail is not None:
                raws.append({"uid": uid, "uidvalidity": box.uidvalidity, "mail": mail,
                             "too_large": sizes[uid] if too_large else 0})
        return raws

    def _is_input(self, raw: dict) -> bool:
        """A person's mail, and the thread card of its chat kept for the reply. Loop protection (inbound.refusal)
        leaves the rest out, logged; a mail that cannot be read goes on, for ``normalise`` to refuse loudly."""
        try:
            message = parse(raw["mail"])
        except Exception:  # noqa: BLE001 - normalise says why
            return True
        why = refusal(message, self.settings["address"])
        if why is not None:
            self.refused += 1
            self.say(logging.INFO, "%s: mail %s not answered: %s", self.name, header(message, "Message-ID")[:100], why)
            return False
        address, _ = sender_address(message)
        ids = message_ids(header(message, "Message-ID"))
        if address and ids:
            self.keep_card(chat_id(address, thread_root(message, ids[0])), thread_card(message))
        return True

    def normalise(self, raw: Any) -> MessageEvent:
        event = event_from_mail(raw, self.name, self.profile)
        if isinstance(raw, dict) and raw.get("too_large"):
            note = (f"(the mail was {raw['too_large']} bytes, over the limit of "
                    f"{self.settings['max_message_bytes']}: only its headers were read)")
            event = MessageEvent(**{**vars(event), "text": f"{event.text}\n\n{note}".strip()})
        return event

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        """A file of a mail of the round being stored: decoded from the mail the intake fetched (nothing more is
        asked of the server)."""
        try:
            uidvalidity, uid, index = (int(part) for part in attachment.ref.split(":"))
            data = attachment_bytes(self.in_round[(uidvalidity, uid)], index)
        except (ValueError, KeyError, IndexError) as exc:
            raise AttachmentGone(f"no such attachment in the round's mail: {attachment.ref[:60]} ({exc!r})"[:200])
        if len(data) > cap:
            raise AttachmentTooLarge(len(data), cap)
        return data

    # ------------------------------------------------------------------------------------------------ outbound
    async def reply_mail(self, op: PlatformOp):
        try:
            recipient, root = chat_parts(op.chat_id)
        except ValueError as exc:
            raise PermanentError(str(exc), method="send") from None
        return reply_mail(op.text, reply_key(op), self.settings["address"], self.settings["display_name"],
                          recipient, await self.thread_card_for(op.chat_id, root, op.reply_to), op.reply_to,
                          time.time())

    async def thread_card_for(self, chat: str, root: str, reply_to: Optional[str]) -> tuple[str, list[str]]:
        """The subject and references a reply to the chat carries: the card the intake kept from the thread's last
        mail; where there is none (the thread not seen since this adapter started: the cards die with it), the card
        of the mail answered, else of the thread's root, read again from the mailbox, so the reply goes under its
        thread's subject (clients that thread by subject as well as References, Gmail's, keep it in the thread).
        Neither found (deleted, or the server not answering): the root alone and a generic subject."""
        card = self.threads.get(chat)
        if card is not None:
            return card
        for wanted in dict.fromkeys(message_ids(reply_to or "")[:1] + ([root] if root else [])):
            try:
                found = await asyncio.wait_for(header_of(self.settings, self.settings["mailbox"], wanted),
                                               self.settings["connect_timeout_s"])
            except Exception as exc:  # noqa: BLE001 - the reply goes with the root card; the send is what matters
                self.say(logging.WARNING, "%s: the thread of %s not read from the mailbox: %s", self.name,
                         wanted[:100], self.clean_error(exc))
                break
            if found is not None:
                card = thread_card(parse(found))
                self.keep_card(chat, card)
                return card
        return root_card(root)

    def keep_card(self, chat: str, card: tuple[str, list[str]]) -> None:
        self.threads[chat] = card
        self.threads.move_to_end(chat)
        while len(self.threads) > THREADS_KEPT:
            self.threads.popitem(last=False)

    def sent_folder(self) -> SentFolder:
        if self._sent is None:
            self._sent = SentFolder(self.settings)
        return self._sent

    async def send_message(self, op: PlatformOp) -> str:
        if len(op.text) > self.pacing.text_limit:
            raise TooLongError(f"{len(op.text)} characters, over {self.pacing.text_limit}", method="send")
        message = await self.reply_mail(op)
        await send_mail(self.settings, message)
        # The mail is sent: filing it is a record of that, and nothing that fails here may make the send fail
        # (it would go again). A kill -9 before the append leaves a sent mail that the Sent folder does not show:
        # its next owner cannot tell, and marks the reply as re-sent (find_lost_copy).
        try:
            await asyncio.wait_for(self.sent_folder().file(message), self.settings["connect_timeout_s"])
        except Exception as exc:  # noqa: BLE001 - logged; the send stands
            self.say(logging.WARNING, "%s: reply %s was sent but not filed in the Sent folder: %s", self.name,
                     message["Message-ID"], self.clean_error(exc))
        return message["Message-ID"]

    async def find_lost_copy(self, op: PlatformOp) -> Optional[str]:
        """The Message-ID of the mail a lost send of this part left, where the Sent folder holds it (it was filed
        after the server took it: it left, whole, with this text). Not there, or no Sent folder: ``Unresolved``
        (the server may have taken it just before the crash, before its filing), and the reply goes again under
        the re-sent mark. The found mail cannot be edited: it shows the text it was sent with, which is this part's
        (its id is derived from that text). ``MailboxLost`` where the server could not be asked (asked again)."""
        if op.ledger is None:
            raise Unresolved("the send names no part of a reply")
        try:
            recipient, _root = chat_parts(op.chat_id)
        except ValueError as exc:
            raise Unresolved(str(exc)) from None
        message_id = reply_message_id(reply_key(op), self.settings["address"])
        held = await self.sent_folder().holds(message_id)
        if held is None:
            raise Unresolved("the mailbox has no Sent folder to look in (or sent_copy = \"off\")")
        if not held:
            raise Unresolved(f"{message_id} is not in the Sent folder: it may have left before it was filed")
        self.say(logging.INFO, "%s: the reply %s to %s was sent before: found in the Sent folder, not sent again",
                 self.name, message_id, recipient)
        return message_id

    async def delete_message(self, op: PlatformOp) -> None:
        """A mail once sent is the recipient's: nothing to take back (answered ok so a consumer cleaning up moves
        on)."""
