"""Real mail servers for the tests: Debian's Dovecot (IMAP with IDLE, and LMTP) and Postfix (SMTP), on loopback,
their configuration written here into a throwaway directory.

Postfix takes mail on an SMTP port and hands every message for ``@mail.test`` (and ``@friends.test``, a second
domain for senders from elsewhere) to Dovecot's LMTP; Dovecot keeps one Maildir per local part, whatever the domain,
and serves it over IMAP. Every address of the domains is a user (a static userdb: the tests create a user by writing
to it), every user's password is ``PASSWORD``. Every mailbox has a folder ``Sent`` marked ``\\Sent`` (RFC 6154
SPECIAL-USE); mail to ``user+Folder@`` is filed in the user's folder. ``MailServers(files_sent=("gw",))``: Postfix
files a copy of each mail those users submit in their Sent folder as it takes it (sender_bcc_maps), as Gmail's
submission does; without it a client puts its sent mail there itself, as with a plain Dovecot and Postfix. Neither
server can be given port 0, so the ports are picked free by binding to port 0 first and the start is tried again on
another set where one was taken meanwhile. ``restart_imap`` restarts Dovecot on the same ports with the same mail
(every IMAP connection is cut); ``renumber`` gives a mailbox a new UIDVALIDITY (its messages then have other UIDs).

Both need root (Postfix's master and Dovecot's privilege separation); the mail itself is written as ``nobody``, in a
directory of its own under /tmp that the unprivileged processes can reach. A missing server fails the tests with the
install hint under ``CI``; elsewhere the tests that need it skip.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.servers.umask import server_umask

DOVECOT = shutil.which("dovecot") or ("/usr/sbin/dovecot" if os.path.exists("/usr/sbin/dovecot") else None)
POSTFIX = shutil.which("postfix") or ("/usr/sbin/postfix" if os.path.exists("/usr/sbin/postfix") else None)
DOVEADM = shutil.which("doveadm") or "/usr/bin/doveadm"
INSTALL_HINT = ("the mail servers are not installed: apt-get install dovecot-imapd dovecot-lmtpd postfix "
                "(.ci/run installs them)")
DOMAIN = "mail.test"
OTHER_DOMAIN = "friends.test"
PASSWORD = "mail-test-password"
MAIL_UID = 65534
START_S = 30.0

DOVECOT_CONF = """\
base_dir = {root}/dovecot-run
state_dir = {root}/dovecot-state
log_path = {root}/dovecot.log
instance_name = gateway-test-{port}
protocols = imap lmtp
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:{root}/mail/%n
first_valid_uid = {uid}
default_internal_user = dovecot
default_login_user = dovenull
imap_idle_notify_interval = 10 secs
passdb {{
  driver = static
  args = password={password}
}}
userdb {{
  driver = static
  args = uid={uid} gid={uid} home={root}/home/%n allow_all_users=yes
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {lmtp}
  }}
}}
service stats {{
  unix_listener stats-reader {{
    mode = 0666
  }}
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
recipient_delimiter = +
lmtp_save_to_detail_mailbox = yes
namespace inbox {{
  inbox = yes
  mailbox Sent {{
    special_use = \\Sent
    auto = create
  }}
}}
"""

POSTFIX_MAIN = """\
compatibility_level = 3.6
queue_directory = {root}/postfix-queue
data_directory = {root}/postfix-data
mail_owner = postfix
setgid_group = postdrop
inet_interfaces = loopback-only
inet_protocols = ipv4
myhostname = smtp.{domain}
mydomain = {domain}
myorigin = {domain}
mydestination =
relay_domains =
virtual_mailbox_domains = {domain}, {other_domain}
recipient_delimiter = +
sender_bcc_maps = {sender_bcc}
virtual_transport = lmtp:inet:127.0.0.1:{lmtp}
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject_unauth_destination
smtpd_recipient_restrictions = permit_mynetworks, reject
alias_maps =
alias_database =
local_recipient_maps =
maillog_file = {root}/postfix.log
maillog_file_prefixes = {root}
biff = no
enable_long_queue_ids = yes
queue_run_delay = 1s
minimal_backoff_time = 1s
maximal_backoff_time = 2s
smtputf8_enable = no
message_size_limit = 20480000
"""

POSTFIX_MASTER = """\
127.0.0.1:{smtp} inet n - n - - smtpd
cleanup   unix  n - n - 0 cleanup
qmgr      unix  n - n 1 1 qmgr
rewrite   unix  - - n - - trivial-rewrite
bounce    unix  - - n - 0 bounce
defer     unix  - - n - 0 bounce
trace     unix  - - n - 0 bounce
verify    unix  - - n - 1 verify
flush     unix  n - n 1000? 0 flush
proxymap  unix  - - n - - proxymap
smtp      unix  - - n - - smtp
relay     unix  - - n - - smtp
showq     unix  n - n - - showq
error     unix  - - n - - error
retry     unix  - - n - - error
discard   unix  - - n - - discard
lmtp      unix  - - n - - lmtp
anvil     unix  - - n - 1 anvil
scache    unix  - - n - 1 scache
postlog   unix-dgram n - n - 1 postlogd
"""


DOVECOT_PARTS = ("/usr/lib/dovecot/imap", "/usr/lib/dovecot/lmtp")     # dovecot-imapd, dovecot-lmtpd


def require_mail_servers() -> None:
    if DOVECOT is None or POSTFIX is None or not all(os.path.exists(p) for p in DOVECOT_PARTS):
        if os.environ.get("CI"):
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class MailServers:
    def __init__(self, files_sent: tuple = ()):
        require_mail_servers()
        self.files_sent = files_sent
        self.root = Path(tempfile.mkdtemp(prefix="gateway-mail-"))
        os.chmod(self.root, 0o755)
        self.imap_port = self.smtp_port = self.lmtp_port = 0
        self.domain, self.password = DOMAIN, PASSWORD
        self._postfix_up = False

    # ------------------------------------------------------------------------------------------------- life
    def start(self) -> "MailServers":
        """Both servers up on free ports (tried again on others where one was taken meanwhile); where they never
        come up, the directory is removed and the error carries the end of their logs."""
        for _attempt in range(5):
            self.imap_port, self.smtp_port, self.lmtp_port = free_port(), free_port(), free_port()
            with server_umask():
                started = self._start_dovecot() and self._start_postfix()
            if started:
                return self
            self.stop()
        logs = self.log()[-2000:]
        self.remove()
        raise RuntimeError(f"the mail servers did not start: {logs}")

    def _start_dovecot(self) -> bool:
        for sub in ("mail", "home"):
            (self.root / sub).mkdir(exist_ok=True)
            os.chown(self.root / sub, MAIL_UID, MAIL_UID)
        conf = self.root / "dovecot.conf"
        conf.write_text(DOVECOT_CONF.format(root=self.root, port=self.imap_port, imap=self.imap_port,
                                             lmtp=self.lmtp_port, uid=MAIL_UID, password=self.password))
        if not self._daemonise([DOVECOT, "-c", str(conf)], "dovecot.log"):
            return False
        return self._wait_listening(self.imap_port, self.lmtp_port)

    def _start_postfix(self) -> bool:
        confdir = self.root / "postfix"
        confdir.mkdir(exist_ok=True)
        (self.root / "postfix-queue").mkdir(exist_ok=True)   # root's: the start makes its subdirectories
        (self.root / "postfix-data").mkdir(exist_ok=True)
        shutil.chown(self.root / "postfix-data", "postfix")
        copies = ", ".join(f"{self.address(user)}={user}+Sent@{self.domain}" for user in self.files_sent)
        (confdir / "main.cf").write_text(POSTFIX_MAIN.format(root=self.root, domain=self.domain,
                                                             other_domain=OTHER_DOMAIN, lmtp=self.lmtp_port,
                                                             sender_bcc=f"inline:{{ {copies} }}" if copies else ""))
        (confdir / "master.cf").write_text(POSTFIX_MASTER.format(smtp=self.smtp_port))
        if not self._daemonise([POSTFIX, "-c", str(confdir), "start"], "postfix.log"):
            return False
        self._postfix_up = True
        return self._wait_listening(self.smtp_port)

    def _daemonise(self, command: list, log: str) -> bool:
        """Run a server's start command, which forks the server into the background: its output goes to the
        server's log file (a pipe would be held open by the server for its whole life)."""
        with (self.root / log).open("a") as out:
            return subprocess.run(command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, timeout=START_S,
                                  ).returncode == 0

    def _wait_listening(self, *ports: int) -> bool:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if all(listening(p) for p in ports):
                return True
            time.sleep(0.05)
        return False

    def stop_imap(self) -> None:
        self._daemonise([DOVECOT, "-c", str(self.root / "dovecot.conf"), "stop"], "dovecot.log")
        deadline = time.monotonic() + START_S
        while listening(self.imap_port) and time.monotonic() < deadline:
            time.sleep(0.05)

    def restart_imap(self) -> None:
        """Dovecot stopped and started on the same ports: every IMAP connection is cut, the mail stays."""
        self.stop_imap()
        with server_umask():
            started = self._start_dovecot()
        if not started:
            raise RuntimeError(f"dovecot did not start again: {self.log()[-2000:]}")

    def stop(self) -> None:
        if self._postfix_up:
            self._daemonise([POSTFIX, "-c", str(self.root / "postfix"), "stop"], "postfix.log")
            self._postfix_up = False
        if (self.root / "dovecot.conf").exists():
            self.stop_imap()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in (self.root / "dovecot.log", self.root / "postfix.log")
                         if p.exists())

    # ---------------------------------------------------------------------------------------------- mailboxes
    @staticmethod
    def arrival(message) -> str:
        """When Postfix took the mail, as a key that sorts by it: its long queue id (the time of arrival to the
        microsecond, in characters that sort as the digits they are: enable_long_queue_ids), from the Received
        header Postfix wrote. Two mails Dovecot stored in another order (Postfix delivers in parallel) are shown in
        the order they were sent."""
        for received in message.get_all("Received", []):
            found = re.search(r"by smtp\.\S+ \(Postfix\) with E?SMTPS? id (\w+)", str(received))
            if found:
                return found.group(1)
        return ""

    def queued(self) -> int:
        """Mails Postfix holds and has not delivered yet (its queue's files)."""
        queue = self.root / "postfix-queue"
        return sum(1 for sub in ("maildrop", "incoming", "active", "deferred") if (queue / sub).exists()
                   for path in (queue / sub).rglob("*") if path.is_file())

    def wait_delivered(self, timeout: float = 60.0) -> None:
        """Until Postfix's queue is empty: every mail it took is in its mailbox (LMTP answers after the save)."""
        deadline = time.monotonic() + timeout
        while (left := self.queued()) and time.monotonic() < deadline:
            time.sleep(0.02)
        if left:
            raise AssertionError(f"{left} mail(s) still in Postfix's queue after {timeout:.0f} s: "
                                 f"{self.log()[-1500:]}")

    def address(self, user: str) -> str:
        return f"{user}@{self.domain}"

    def renumber(self, user: str, keep_mail: bool = True) -> int:
        """The user's INBOX gets a new UIDVALIDITY (one above the old) and its messages new UIDs from 1, as after a
        server's index was rebuilt; ``keep_mail=False``: its messages are gone too (expunged by a person
        meanwhile), so the next mail gets UID 1 again. Done with Dovecot stopped; returns the new UIDVALIDITY."""
        self.stop_imap()
        maildir = self.root / "mail" / user
        uidlist = maildir / "dovecot-uidlist"
        old = int(uidlist.read_text().split()[1][1:]) if uidlist.exists() else 0
        for found in list(maildir.glob("dovecot.index*")) + list(maildir.glob("dovecot.list.index*")):
            found.unlink()
        if not keep_mail:
            for sub in ("cur", "new"):
                for found in (maildir / sub).glob("*"):
                    found.unlink()
        uidlist.write_text(f"3 V{old + 1} N1\n")
        os.chown(uidlist, MAIL_UID, MAIL_UID)
        if not self._start_dovecot():
            raise RuntimeError(f"dovecot did not start again: {self.log()[-2000:]}")
        return old + 1
