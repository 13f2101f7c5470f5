"""A mail found again in a folder of the mailbox by its Message-ID, over one short IMAP connection of its own (the
intake's is in IDLE): the Sent folder's copy of a reply (sent.py), and the mail a reply answers, whose subject and
references the reply carries where the adapter has not seen its thread since it started (adapter.py,
``thread_card_for``). No storage, no actor.

A search by header is a substring match (RFC 3501 §6.4.4): what it finds is checked against the id itself.
"""
from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Optional

from actors.adapters.email.client import MailboxLost, imap_login, logout, said_by, uids_of
from actors.adapters.email.inbound import header, message_ids, parse

MAX_MATCHES = 5            # mails a search by id may name that are read to find the one (a substring match)


def quoted(text: str) -> str:
    """An IMAP quoted string (RFC 3501 §9): a folder name or a search value as one argument."""
    if any(c in text for c in "\r\n\0"):
        raise ValueError(f"{text[:60]!r} cannot be an IMAP argument")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@asynccontextmanager
async def logged_in(settings: dict):
    """A logged-in IMAP connection of its own, logged out after (whatever failed)."""
    imap = None

    def hold(client):
        nonlocal imap
        imap = client
    try:
        await imap_login(settings, lambda _exc: None, hold)
        yield imap
    finally:
        if imap is not None:
            await logout(imap)


async def uids_with_id(imap, folder: str, message_id: str) -> list[int]:
    """The UIDs of the selected ``folder`` whose Message-ID header holds ``message_id``."""
    found = await imap.uid_search("HEADER", "Message-ID", quoted(message_id), charset=None)
    if found.result != "OK":
        raise MailboxLost(f"SEARCH in {folder!r} failed: {said_by(found)}", method="UID SEARCH")
    return uids_of(found.lines, above=0)


async def header_of(settings: dict, folder: str, message_id: str) -> Optional[bytes]:
    """The header of the mail of ``message_id`` in ``folder`` (\\Seen left as it is), or None where the folder
    holds none (deleted, or never there). ``MailboxLost`` where the server could not be asked."""
    async with logged_in(settings) as imap:
        # SELECT (aioimaplib searches only in a selected folder, and EXAMINE does not make it one); BODY.PEEK below
        # leaves the folder as it was.
        selected = await imap.select(quoted(folder))
        if selected.result != "OK":
            raise MailboxLost(f"cannot select {folder!r}: {said_by(selected)}", method="SELECT")
        for uid in (await uids_with_id(imap, folder, message_id))[:MAX_MATCHES]:
            got = await imap.uid("fetch", str(uid), "(UID BODY.PEEK[HEADER])")
            if got.result != "OK":
                raise MailboxLost(f"UID FETCH in {folder!r} failed: {said_by(got)}", method="UID FETCH")
            for literal in (bytes(line) for line in got.lines if isinstance(line, bytearray)):
                if message_ids(header(parse(literal), "Message-ID"))[:1] == [message_id]:
                    return literal
    return None
