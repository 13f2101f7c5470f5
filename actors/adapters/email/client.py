"""The mailbox's two clients: ``ImapMailbox`` (the intake: IMAP4rev1 with IDLE, RFC 3501 / RFC 2177, through
aioimaplib) and ``send_mail`` (SMTP submission, through aiosmtplib). They only fetch and send: no storage, no actor.

IMAP: one connection, the mailbox selected read-write; ``new_uids`` lists the UIDs above an offset, ``fetch`` takes a
mail without setting \\Seen (BODY.PEEK), ``mark_seen`` sets it (the acknowledgment, after the rows are stored), and
``wait_for_news`` IDLEs until the server pushes a change or the interval ends. Every answer is proof of life.
"""
from __future__ import annotations

import asyncio
import re
import ssl
from email.message import EmailMessage
from typing import Callable, Optional

from actors.adapters.errors import PermanentError, RetryableError

UIDVALIDITY = re.compile(rb"\[UIDVALIDITY (\d+)\]")
UIDNEXT = re.compile(rb"\[UIDNEXT (\d+)\]")
FETCHED = re.compile(rb"UID (\d+)")
SIZE = re.compile(rb"RFC822\.SIZE (\d+)")
MAX_UIDS = 10_000                  # UIDs taken from one search at most (the rest come with the next)


class MailboxLost(RetryableError):
    """The IMAP connection failed or the server refused a command: the intake reconnects."""


def tls_context(verify: bool) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class ImapMailbox:
    def __init__(self, settings: dict, alive: Callable[[], None]):
        self.settings, self.alive = settings, alive
        self.imap = None
        self.uidvalidity: Optional[int] = None
        self.lost = asyncio.Event()        # the connection ended (aioimaplib says so; its waits do not end)

    async def open(self) -> None:
        s = self.settings
        self.imap = await imap_login(s, self._lost, lambda imap: setattr(self, "imap", imap))
        selected = await self.imap.select(s["mailbox"])
        if selected.result != "OK":
            raise PermanentError(f"cannot select {s['mailbox']!r}: {said_by(selected)}", method="SELECT")
        found = UIDVALIDITY.search(b" ".join(bytes(line) for line in selected.lines))
        if found is None:
            raise MailboxLost("the server named no UIDVALIDITY for the mailbox", method="SELECT")
        self.uidvalidity = int(found.group(1))
        self.alive()

    def _lost(self, _exc) -> None:
        self.lost.set()

    def _checked(self, response, command: str):
        if response.result != "OK":
            raise MailboxLost(f"{command} failed: {said_by(response)}", method=command)
        self.alive()
        return response

    async def new_uids(self, after: int) -> list[int]:
        """UIDs above ``after``, oldest first ("n:*" names the highest UID even when it is below n: left out)."""
        found = self._checked(await self.imap.uid_search(f"UID {after + 1}:*", charset=None), "UID SEARCH")
        return uids_of(found.lines, above=after)

    async def unseen_uids(self) -> list[int]:
        found = self._checked(await self.imap.uid_search("UNSEEN", charset=None), "UID SEARCH")
        return uids_of(found.lines, above=0)

    async def highest_uid(self) -> int:
        """The highest UID in the mailbox, 0 where it is empty ("UID *" names the last message)."""
        found = self._checked(await self.imap.uid_search("UID *", charset=None), "UID SEARCH")
        return max(uids_of(found.lines, above=0), default=0)

    async def sizes(self, uids: list[int]) -> dict[int, int]:
        got = self._checked(await self.imap.uid("fetch", _set(uids), "(UID RFC822.SIZE)"), "UID FETCH")
        sizes = {}
        for line in got.lines:
            uid, size = FETCHED.search(bytes(line)), SIZE.search(bytes(line))
            if uid and size:
                sizes[int(uid.group(1))] = int(size.group(1))
        return sizes

    async def fetch(self, uid: int, headers_only: bool = False) -> Optional[bytes]:
        """The mail's bytes (\\Seen left as it is), or None where the server has no such UID now."""
        part = "BODY.PEEK[HEADER]" if headers_only else "BODY.PEEK[]"
        got = self._checked(await self.imap.uid("fetch", str(uid), f"(UID {part})"), "UID FETCH")
        literals = [bytes(line) for line in got.lines if isinstance(line, bytearray)]
        return literals[0] if literals else None

    async def mark_seen(self, uids: list[int]) -> None:
        if uids:
            self._checked(await self.imap.uid("store", _set(uids), "+FLAGS.SILENT (\\Seen)"), "UID STORE")

    async def wait_for_news(self, interval_s: float) -> None:
        """IDLE until the server pushes a change to the mailbox (a new mail: EXISTS) or ``interval_s`` passes, then
        DONE. A server without IDLE is asked with NOOP instead, each interval."""
        if not self.imap.has_capability("IDLE"):
            await asyncio.sleep(interval_s)
            self._checked(await self.imap.noop(), "NOOP")
            return
        idle = await self.imap.idle_start(timeout=interval_s + 60)   # ended here first: DONE below
        deadline = asyncio.get_running_loop().time() + interval_s
        try:
            while (left := deadline - asyncio.get_running_loop().time()) > 0:
                pushing = asyncio.ensure_future(self.imap.wait_server_push(timeout=left))
                ending = asyncio.ensure_future(self.lost.wait())
                try:
                    await asyncio.wait({pushing, ending}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    ending.cancel()
                    if not pushing.done():
                        pushing.cancel()
                if self.lost.is_set():
                    raise MailboxLost("the server closed the connection", method="IDLE")
                try:
                    pushed = pushing.result()
                except asyncio.TimeoutError:
                    break                                   # the interval ended: DONE, and the next round
                self.alive()
                lines = pushed if isinstance(pushed, list) else [pushed]
                if any(b"EXISTS" in bytes(line) for line in lines if isinstance(line, (bytes, bytearray))):
                    break
        finally:
            if self.imap.has_pending_idle() and not self.lost.is_set():
                self.imap.idle_done()
        done = await asyncio.wait_for(idle, self.settings["connect_timeout_s"])
        self._checked(done, "IDLE")

    async def close(self) -> None:
        imap, self.imap = self.imap, None
        if imap is not None:
            await logout(imap)


async def imap_login(settings: dict, on_lost: Callable, hold: Callable = lambda imap: None):
    """A connected IMAP client, logged in (``hold`` is given it first, so a caller can close it whatever fails
    after): ``MailboxLost`` where no server answers, ``PermanentError`` for a refused login."""
    import aioimaplib    # only where an email adapter runs: finding the platform loads no client library
    s = settings
    timeout = s["connect_timeout_s"]
    if s["imap_tls"]:
        imap = aioimaplib.IMAP4_SSL(host=s["imap_host"], port=s["imap_port"], timeout=timeout,
                                    ssl_context=tls_context(s["tls_verify"]), conn_lost_cb=on_lost)
    else:
        imap = aioimaplib.IMAP4(host=s["imap_host"], port=s["imap_port"], timeout=timeout, conn_lost_cb=on_lost)
    hold(imap)
    try:
        await asyncio.wait_for(imap.wait_hello_from_server(), timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        raise MailboxLost(f"no IMAP server answers at {s['imap_host']}:{s['imap_port']} ({exc!r})",
                          method="connect") from None
    login = await imap.login(s["username"], s["password"])
    if login.result != "OK":
        raise PermanentError(f"the IMAP server refused the login of {s['username']!r}: {said_by(login)}",
                             method="LOGIN")
    return imap


async def logout(imap) -> None:
    try:
        await asyncio.wait_for(imap.logout(), 5)
    except Exception:  # noqa: BLE001 - a connection that is gone is closed
        pass


def said_by(response) -> str:
    return " ".join(bytes(line).decode("utf-8", "replace") for line in response.lines if
                    isinstance(line, (bytes, bytearray)))[:200]


def uids_of(lines, above: int) -> list[int]:
    numbers = []
    for line in lines:
        text = bytes(line).replace(b"SEARCH", b" ")
        if text.strip() and all(part.isdigit() for part in text.split()):
            numbers.extend(int(part) for part in text.split())
    return sorted(n for n in set(numbers) if n > above)[:MAX_UIDS]


def _set(uids: list[int]) -> str:
    return ",".join(str(u) for u in uids)


async def _submission(settings: dict):
    """A connected (and logged in) SMTP client; ``PermanentError`` for a refused login, ``RetryableError`` for a
    server that cannot be reached (nothing was sent)."""
    import aiosmtplib    # only where an email adapter runs: finding the platform loads no client library
    s = settings
    client = aiosmtplib.SMTP(hostname=s["smtp_host"], port=s["smtp_port"], timeout=s["connect_timeout_s"],
                             use_tls=s["smtp_security"] == "tls", start_tls=s["smtp_security"] == "starttls",
                             tls_context=tls_context(s["tls_verify"]) if s["smtp_security"] != "none" else None)
    try:
        await client.connect()
        user = s["smtp_username"] or s["username"]
        if user and s["smtp_auth"]:
            await client.login(user, s["smtp_password"] or s["password"])
    except aiosmtplib.SMTPAuthenticationError as exc:
        _close(client)
        raise PermanentError(f"the SMTP server refused the login: {exc.code} {exc.message[:200]}",
                             method="AUTH") from None
    except (aiosmtplib.SMTPException, OSError, asyncio.TimeoutError) as exc:
        _close(client)
        raise RetryableError(f"cannot submit to {s['smtp_host']}:{s['smtp_port']}: {exc!r}"[:300],
                             method="connect") from None
    return client


def _close(client) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001 - closing a connection that is gone
        pass


async def check_submission(settings: dict) -> None:
    """Connect and log in to the SMTP server, then QUIT: what the doctor asks."""
    client = await _submission(settings)
    try:
        await client.quit()
    except Exception:  # noqa: BLE001 - the check was the login
        _close(client)


async def send_mail(settings: dict, message: EmailMessage) -> None:
    """Submit one message. Raises ``PermanentError`` for a refusal that a retry would meet again (5xx),
    ``RetryableError`` for the rest; ``maybe_done`` where the connection failed once the message was on its way
    (the server may have taken it)."""
    import aiosmtplib    # only where an email adapter runs: finding the platform loads no client library
    client = await _submission(settings)
    try:
        await client.send_message(message)
    except aiosmtplib.SMTPRecipientsRefused as exc:
        first = exc.recipients[0] if exc.recipients else None
        raise PermanentError(f"the recipient was refused: {first.code if first else ''} "
                             f"{first.message[:200] if first else ''}", method="RCPT") from None
    except aiosmtplib.SMTPResponseException as exc:
        if 400 <= exc.code < 500:
            raise RetryableError(f"{exc.code} {exc.message[:200]}", method="DATA", status=exc.code) from None
        raise PermanentError(f"{exc.code} {exc.message[:200]}", method="DATA", status=exc.code) from None
    except (aiosmtplib.SMTPException, OSError, asyncio.TimeoutError) as exc:
        raise RetryableError(f"the connection failed during the submission: {exc!r}"[:300], method="DATA",
                             maybe_done=True) from None
    finally:
        _close(client)
