"""Email: one mailbox the agent answers, IMAP in (IDLE), SMTP out (README.md beside this file). Anyone can write to
a mailbox, so only the senders the table allows are answered (``access = "allowlist"``): ``allow`` lists their
addresses (any case), or whole domains: ``"@example.org"`` that domain exactly, ``"@.example.org"`` its subdomains
(actors/adapters/access.py, address_admitted). The user id of a mail is its sender's address.

Pacing: no edits (a mail cannot be changed once sent: the final answer goes as one mail); a part is at most 100,000
characters (a mail has no limit of its own worth the name; this keeps one answer readable). One mail per chat per
2 s after a burst of 3: a thread is a conversation, not a stream. A send whose answer was lost is looked for in the
Sent folder before the reply goes again (finds_lost_copies: sent.py)."""
from actors.adapters.access import address_entry_problem
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=False, delete=False, threads=False, reactions=False, files_in=True,
                            files_out=False, voice=False, buttons=False, typing=False)
SECURITY = ("tls", "starttls", "none")
SENT_COPY = ("append", "server", "off")


def _email_problems(table):
    if "@" not in table["address"] or any(c in table["address"] for c in " <>,;\r\n"):
        return "address", f"{table['address']!r} is no email address"
    if not 1 <= table["idle_interval_s"] <= 29 * 60:
        return "idle_interval_s", "between 1 s and 29 min (RFC 2177: servers end an IDLE after 30 min)"
    if table["max_message_bytes"] < 1024:
        return "max_message_bytes", "at least 1024"
    if any(c in table["sent_folder"] for c in "\r\n\0"):
        return "sent_folder", "a folder name on one line"
    for entry in table["allow"]:
        if (problem := address_entry_problem(entry)) is not None:
            return "allow", problem
    return None


PLATFORM = Platform(
    type="email", actor="actors.adapters.email.adapter.EmailAdapter",
    summary="Email: one mailbox, IMAP IDLE in, SMTP submission out; a thread is a conversation", intake="socket",
    capabilities=CAPABILITIES, access="allowlist", addresses=True,
    pacing=paced("email", CAPABILITIES, 100_000, "chars", edit_interval_s=0.0, min_edit_delta_chars=0,
                 per_chat_ops_per_s=0.5, per_chat_burst=3, typing_interval_s=None, finds_lost_copies=True),
    options={
        "address": Option(str, doc="the mailbox's address: the From of every reply"),
        "display_name": Option(str, "", doc="the name shown with it"),
        "imap_host": Option(str, doc="the IMAP server"),
        "imap_port": Option(int, 993, doc="its port (993: TLS; 143 only with imap_tls = false)"),
        "imap_tls": Option(bool, True, doc="IMAP over TLS (false only for a server on loopback)"),
        "username": Option(str, doc="the mailbox's login (IMAP, and SMTP unless smtp_username)"),
        "password": Option(str, secret=True, doc="its password (an app password where the provider has them)"),
        "mailbox": Option(str, "INBOX", doc="the folder the intake reads"),
        "smtp_host": Option(str, doc="the SMTP submission server"),
        "smtp_port": Option(int, 465, doc="its port (465: implicit TLS; 587: STARTTLS)"),
        "smtp_security": Option(str, "tls", allowed=SECURITY, doc="tls (implicit), starttls, or none (loopback)"),
        "smtp_auth": Option(bool, True, doc="log in to the SMTP server"),
        "smtp_username": Option(str, "", doc="the SMTP login (empty: username)"),
        "smtp_password": Option(str, "", secret=True, doc="its password (empty: password)"),
        "tls_verify": Option(bool, True, doc="check the servers' certificates (false only for servers of your own)"),
        "connect_timeout_s": Option(float, 30.0, doc="connecting, logging in, and each command, at most"),
        "idle_interval_s": Option(float, 300.0, doc="an IDLE is ended and begun again this often (proof of life)"),
        "max_message_bytes": Option(int, 10_000_000, doc="a larger mail is taken by its headers only, with a note"),
        "sent_folder": Option(str, "", doc="the folder sent replies are kept in, as the server "
                                           "names it (empty: the one the server marks \\Sent, if any)"),
        "sent_copy": Option(str, "append", allowed=SENT_COPY, doc="who files each reply in the Sent folder: append "
                            "(the adapter, after the SMTP server took it), server (the submission server itself: "
                            "Gmail), off (the folder neither written nor searched)"),
    },
    checks=(_email_problems,))
