"""The mailbox's Sent folder, for the outbound side: where a reply that left is kept, so that the copy a lost send
left can be found before the reply goes again (the adapter's ``find_lost_copy``).

Which folder: ``sent_folder`` where the table names one, else the one the server marks ``\\Sent`` (RFC 6154
SPECIAL-USE, in the attributes of LIST); none: the mailbox has no Sent folder, and nothing here is done.

Who files a reply there (``sent_copy``): ``append``, the adapter, once the SMTP server took the mail (IMAP APPEND,
after a search for its Message-ID, so a reply filed before, by the server or by an attempt that died after its
append, is not filed twice); ``server``, the submission server itself, as it takes the mail (Gmail, a Postfix with
sender_bcc_maps): the adapter only searches; ``off``: the folder is neither written nor searched.

A copy in the folder proves that its mail left (it is filed only after the server took it). Its absence proves
nothing: a kill -9 between the server taking the mail and its filing (the APPEND, or the server's own queue) leaves
a mail sent and not filed. So a copy found is the reply's part, and a copy not found is unresolved (the reply goes
again under the re-sent mark, as where there is no Sent folder).

One short IMAP connection per use (connect, log in, SELECT the folder, search, append, log out): the
intake's connection is in IDLE most of the time, and a reply is one mail. The folder's name, once found, is kept
for the adapter's life. No storage, no actor.
"""
from __future__ import annotations

import re
from contextlib import asynccontextmanager
from email.message import EmailMessage
from typing import Optional

from actors.adapters.email.client import MailboxLost, said_by
from actors.adapters.email.mail_lookup import logged_in, quoted, uids_with_id
from actors.adapters.errors import PermanentError

LIST_LINE = re.compile(rb'^\((?P<attributes>[^)]*)\) (?:"(?:[^"\\]|\\.)*"|NIL) (?P<name>.+)$', re.IGNORECASE)
MAX_FOLDERS = 10_000       # LIST lines read at most (a mailbox of more folders has its Sent folder named)
NONE = ""                  # the mailbox has no Sent folder (found so once: kept for the adapter's life)


def sent_folder_of(lines) -> Optional[str]:
    """The name of the folder a LIST response marks ``\\Sent`` (as the server spells it: a quoted name unquoted),
    or None."""
    for line in list(lines)[:MAX_FOLDERS]:
        if not isinstance(line, (bytes, bytearray)):
            continue
        found = LIST_LINE.match(bytes(line).strip())
        if found is None or b"\\sent" not in found.group("attributes").lower().split():
            continue
        name = found.group("name").decode("utf-8", "replace")
        if name.startswith('"') and name.endswith('"') and len(name) >= 2:
            name = re.sub(r'\\(.)', r"\1", name[1:-1])
        return name
    return None


class SentFolder:
    """The adapter's Sent folder (loop thread). State: its name (None until looked for, NONE where there is none)."""

    def __init__(self, settings: dict):
        self.settings = settings
        self.name: Optional[str] = settings["sent_folder"] or None   # None: not looked for yet

    @property
    def used(self) -> bool:
        return self.settings["sent_copy"] != "off"

    async def holds(self, message_id: str) -> Optional[bool]:
        """Whether the folder holds a mail of this Message-ID; None where the mailbox has none (or ``off``).
        ``MailboxLost`` where the server could not be asked (the caller may ask again)."""
        if not self.used:
            return None
        async with self._opened() as imap:
            return None if imap is None else bool(await uids_with_id(imap, self.name, message_id))

    async def file(self, message: EmailMessage) -> Optional[bool]:
        """Put the mail in the folder unless it is there already (``sent_copy = "append"`` only): True if it was
        appended, False if it was there, None where there is nothing to do."""
        if self.settings["sent_copy"] != "append":
            return None
        async with self._opened() as imap:
            if imap is None:
                return None
            if await uids_with_id(imap, self.name, str(message["Message-ID"])):
                return False
            appended = await imap.append(bytes(message), mailbox=quoted(self.name), flags="(\\Seen)")
            if appended.result != "OK":
                raise MailboxLost(f"APPEND to {self.name!r} failed: {said_by(appended)}", method="APPEND")
            return True

    @asynccontextmanager
    async def _opened(self):
        """A logged-in connection with the folder selected, or None where the mailbox has no Sent folder."""
        async with logged_in(self.settings) as imap:
            if self.name is None:
                listed = await imap.list('""', '"*"')
                if listed.result != "OK":
                    raise MailboxLost(f"LIST failed: {said_by(listed)}", method="LIST")
                self.name = sent_folder_of(listed.lines) or NONE
            if self.name == NONE:
                yield None
                return
            selected = await imap.select(quoted(self.name))   # (aioimaplib searches only in a SELECTed folder)
            if selected.result != "OK":
                raise PermanentError(f"cannot select the Sent folder {self.name!r}: {said_by(selected)}",
                                     method="SELECT")
            yield imap
