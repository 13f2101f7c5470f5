"""What a person does with a mailbox, for the tests: write a mail over SMTP (to Postfix, which delivers it into
Dovecot), put one straight into a mailbox (IMAP APPEND: mail a server would store whatever it says), and read a
mailbox over IMAP (its mails, their Message-IDs, their \\Seen flags). Blocking (imaplib, smtplib): the tests' own
thread."""
from __future__ import annotations

import imaplib
import re
import smtplib
import time
from email.message import EmailMessage
from email.parser import BytesParser
from email import policy
from typing import Optional

from tests.servers.mailserver import MailServers

UID_FLAGS = re.compile(rb"UID (\d+) FLAGS \(([^)]*)\)")


def mail(sender: str, to: str, subject: str, text: str, message_id: str, in_reply_to: Optional[str] = None,
         references: tuple = (), headers: Optional[dict] = None, html: Optional[str] = None) -> EmailMessage:
    message = EmailMessage()
    message["From"], message["To"] = sender, to
    if subject:
        message["Subject"] = subject
    message["Message-ID"] = message_id
    message["Date"] = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime())
    if in_reply_to:
        message["In-Reply-To"] = in_reply_to
    if references:
        message["References"] = " ".join(references)
    for name, value in (headers or {}).items():
        message[name] = value
    message.set_content(text)
    if html is not None:
        message.add_alternative(html, subtype="html")
    return message


class MailClient:
    def __init__(self, servers: MailServers):
        self.servers = servers

    def send(self, message: EmailMessage) -> None:
        with smtplib.SMTP("127.0.0.1", self.servers.smtp_port, timeout=30) as smtp:
            smtp.send_message(message)

    def append(self, user: str, data: bytes) -> None:
        with self._imap(user) as imap:
            imap.append("INBOX", "", imaplib.Time2Internaldate(time.time()), data)

    def _imap(self, user: str) -> imaplib.IMAP4:
        imap = imaplib.IMAP4("127.0.0.1", self.servers.imap_port, timeout=30)
        imap.login(user, self.servers.password)
        return imap

    def messages(self, user: str, folder: str = "INBOX") -> list[tuple[int, set, EmailMessage]]:
        """(uid, flags, message) of every mail in the user's folder (INBOX, or Sent), oldest first."""
        with self._imap(user) as imap:
            imap.select(folder, readonly=True)
            _, found = imap.uid("SEARCH", "ALL")
            uids = found[0].split()
            result = []
            for uid in uids:
                _, parts = imap.uid("FETCH", uid, "(UID FLAGS BODY.PEEK[])")
                head, body = parts[0]
                flags = UID_FLAGS.search(head)
                result.append((int(uid), set((flags.group(2) if flags else b"").decode().split()),
                               BytesParser(policy=policy.default).parsebytes(body)))
            return result

    def seen(self, user: str, message_id: str) -> Optional[bool]:
        """Whether every copy of the mail in the user's INBOX is \\Seen; None where there is none."""
        copies = [flags for _, flags, m in self.messages(user) if str(m.get("Message-ID", "")).strip() == message_id]
        return all("\\Seen" in flags for flags in copies) if copies else None
