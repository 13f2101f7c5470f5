"""The conformance harness for the email adapter: real mail servers (Dovecot for IMAP and LMTP, Postfix for SMTP:
tests/servers/mailserver.py). The bot is the mailbox ``gw@mail.test``; each of the suite's chats is a person with a
mailbox of their own (``<chat>@mail.test``) writing to the bot in one thread, whose root is the chat's first mail.

What mail does not have, the harness says so (``not_applicable``): no 429 (a server refuses with 4xx and the
client tries later; nothing to wait out to the second). The inbox dedups a mail on its Message-ID, so a replay is
the same mail delivered again; "acknowledged" is every copy of it \\Seen in the bot's mailbox (the adapter marks it
after the row is stored). A malformed mail is one with no sender address, put into the mailbox directly (IMAP
APPEND: an SMTP server would not take it). The bot submits through a line relay (tests/adapters/mail_relay.py) that
can hold Postfix's answer to a mail's end of data (the delivery case); what the bot sent is read from the chat's
own mailbox over IMAP, once Postfix's queue is empty, in the order Postfix took them (it delivers in parallel).
The suite's mails carry no subject: the adapter puts a thread's subject before its first mail's text
(tests/adapters/test_email.py covers that), and the suite compares the text alone.

Postfix files a copy of every mail the bot submits in the bot's Sent folder as it takes it (``sent_copy =
"server"``, as Gmail's submission does): in the delivery case the held mail is in the Sent folder although the
adapter never heard Postfix's answer, and the restarted daemon finds it there (finds_lost_copies). Where the adapter
files its replies itself (the default, ``append``), a kill in that window finds nothing and the reply is marked;
tests/adapters/test_email.py kills the adapter after its own filing.
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Optional

from actors.messages import Source
from tests.adapters.mail_client import MailClient, mail
from tests.adapters.mail_relay import SmtpRelay
from tests.servers.mailserver import MailServers

BOT = "gw"


class EmailHarness:
    adapter_type = "email"
    adapter_name = "email"
    adapter_kind = "EmailAdapter"
    text_limit = 100_000
    not_applicable = {
        "floods": "mail has no 429: a server refuses with a 4xx and the client tries again later",
    }

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.servers: Optional[MailServers] = None
        self.client: Optional[MailClient] = None
        self.relay: Optional[SmtpRelay] = None
        self.handles: dict[str, tuple[str, str, bytes]] = {}     # handle -> (chat, Message-ID, the mail)
        self.started: set[str] = set()                           # chats whose thread has its root
        self._numbers = itertools.count(1)

    def start(self) -> None:
        self.servers = MailServers(files_sent=(BOT,)).start()
        self.client = MailClient(self.servers)
        self.relay = SmtpRelay(self.servers.smtp_port).start()

    def stop(self) -> None:
        if self.relay is not None:
            self.relay.close()
        if self.servers is not None:
            self.servers.remove()

    def drop_connection(self) -> None:
        self.servers.restart_imap()

    def hold_next_send(self, chat: str) -> None:
        self.relay.hold_next_send(self.address(chat))

    def send_held(self) -> bool:
        return self.relay.holding.is_set()

    def release_send(self) -> None:
        self.relay.release()

    def adapter_toml(self, imap_port: Optional[int] = None, smtp_port: Optional[int] = None) -> str:
        return (f'[adapters.{self.adapter_name}]\ntype = "{self.adapter_type}"\naccess = "open"\n'
                f'address = "{self.address(BOT)}"\nimap_host = "127.0.0.1"\n'
                f'imap_port = {imap_port or self.servers.imap_port}\nimap_tls = false\n'
                f'username = "{BOT}"\npassword = "{self.servers.password}"\nsmtp_host = "127.0.0.1"\n'
                f'smtp_port = {smtp_port or self.relay.port}\nsmtp_security = "none"\nsmtp_auth = false\n'
                'sent_copy = "server"\n'
                # The suite sends a few dozen mails in seconds to a chat.
                'pacing = { per_chat_ops_per_s = 10.0, per_chat_burst = 10 }\n')

    # -- who is who
    def address(self, chat: str) -> str:
        return self.servers.address(chat)

    def root(self, chat: str) -> str:
        return f"<root.{chat}@{self.servers.domain}>"

    def source(self, chat: str, user: str = "alice") -> Source:
        address = self.address(chat)
        return Source(platform=self.adapter_name, chat_id=f"{address} {self.root(chat)}", chat_type="dm",
                      user_id=address, user_name=address)

    # -- inbound
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        """A mail from the chat's person to the bot, in the chat's thread (its first mail is the thread's root)."""
        message_id, message = self._thread_mail(chat, text)
        self.client.send(message)
        return self._remember(chat, message_id, bytes(message))

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        """A mail whose text is the caption, with the photo attached (image/png, as a mail client attaches one)."""
        message_id, message = self._thread_mail(chat, caption)
        message.add_attachment(data, maintype="image", subtype="png", filename="photo.png")
        self.client.send(message)
        return self._remember(chat, message_id, bytes(message))

    def _thread_mail(self, chat: str, text: str):
        if chat in self.started:
            message_id = f"<{next(self._numbers)}.{chat}@{self.servers.domain}>"
            return message_id, mail(self.address(chat), self.address(BOT), "", text, message_id,
                                    in_reply_to=self.root(chat), references=(self.root(chat),))
        self.started.add(chat)
        return self.root(chat), mail(self.address(chat), self.address(BOT), "", text, self.root(chat))

    def _remember(self, chat: str, message_id: str, data: bytes) -> str:
        handle = f"{chat}/{next(self._numbers)}"
        self.handles[handle] = (chat, message_id, data)
        return handle

    def replay(self, handle: str) -> str:
        """The same mail delivered again (a sender's retry): a second copy with the same Message-ID."""
        chat, message_id, data = self.handles[handle]
        self.client.append(BOT, data)
        return self._remember(chat, message_id, data)

    def inject_malformed(self) -> tuple[str, str]:
        data = (b"From: nobody\r\nTo: gw@mail.test\r\nSubject: no sender\r\nMessage-ID: <malformed."
                + str(next(self._numbers)).encode() + b"@mail.test>\r\n\r\nwho am I?\r\n")
        message_id = data.split(b"Message-ID: ")[1].split(b"\r\n")[0].decode()
        self.client.append(BOT, data)
        return self._remember("malformed", message_id, data), "no From address"

    def platform_message_id(self, handle: str) -> str:
        return self.handles[handle][1]

    def acknowledged(self, handle: str) -> bool:
        return bool(self.client.seen(BOT, self.handles[handle][1]))

    # -- outbound: the mails the chat's person received from the bot
    def sent(self, chat: str) -> list[dict]:
        self.servers.wait_delivered()
        mails = [m for _, _, m in self.client.messages(chat) if self.address(BOT) in str(m.get("From", ""))]
        return [{"message_id": str(m["Message-ID"]).strip(), "text": _text(m), "deleted": False}
                for m in sorted(mails, key=MailServers.arrival)]

    # -- the frozen-connection case (tests/adapters/test_frozen_connections.py)
    # An IDLE ends every 2 s (the intake's proof of life); a command is given 20 s: the kit's bound comes first.
    freeze_silence_s = 8.0

    def start_relayed(self, relay) -> str:
        self.start()
        return (self.adapter_toml(imap_port=relay(self.servers.imap_port), smtp_port=relay(self.relay.port)) +
                f"idle_interval_s = 2.0\nconnect_timeout_s = 20.0\nmax_silence_s = {self.freeze_silence_s}\n")


def _text(message) -> str:
    body = message.get_body(preferencelist=("plain",))
    text = (body.get_content() if body is not None else "").replace("\r\n", "\n")
    return text[:-1] if text.endswith("\n") else text


HARNESS = EmailHarness
