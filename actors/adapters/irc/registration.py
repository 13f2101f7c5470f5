"""Registration with an IRC server, as a pure state machine: lines in, lines out, no network (RFC 2812 §3.1, IRCv3
capability negotiation and SASL PLAIN).

    start()      -> CAP LS 302 (only with SASL: no other capability is asked for), PASS (a server password, if
                    configured), NICK, USER
    feed(msg)    -> the lines to answer with; ``done`` once 001 (RPL_WELCOME) names our nick

CAP: the server lists its capabilities (``CAP * LS``, continued with ``*``). With SASL configured we ask for
``sasl`` and authenticate with PLAIN (base64 of ``\\0user\\0password``, in 400-byte pieces); a server that offers
no SASL, or refuses it (904), refuses the configuration: going on unauthenticated would run the bot under a nick
anyone may claim. Without SASL there is no negotiation (one command fewer: ngircd throttles a client that sends
more than three at once). A server that knows no CAP answers 421 or simply registers us.

Nick collisions before 001 (433 in use, 436 collision, 432 not allowed): the next of the configured alternates,
then the nick with ``_`` appended, a bounded number of times.
"""
from __future__ import annotations

import base64
from typing import Optional

from actors.adapters.irc.formatting import Message, command

COLLISION_CODES = ("432", "433", "436", "437")
SASL_FAILED = ("902", "904", "905", "906", "908")
REFUSING = {"464": "the server password was refused", "465": "this client is banned from the server",
            "463": "the server does not allow connections from this host"}
MAX_UNDERSCORES = 3


class RegistrationRefused(Exception):
    """The server refuses the configuration (password, SASL, ban): retrying soon will not help."""


class NoNickLeft(Exception):
    """Every nick we may take is in use: worth retrying later (a ghost of our last connection times out)."""


class Registration:
    def __init__(self, nick: str, username: str, realname: str, alt_nicks: tuple = (), password: str = "",
                 sasl_username: str = "", sasl_password: str = ""):
        self.wanted = nick
        self.username, self.realname, self.password = username, realname, password
        self.sasl = (sasl_username, sasl_password) if sasl_username else None
        self.candidates = [*alt_nicks, *(nick + "_" * n for n in range(1, MAX_UNDERSCORES + 1))]
        self.nick = nick                    # the nick asked for last; the one we have once ``done``
        self.own_prefix: Optional[str] = None   # nick!user@host, when the welcome shows it
        self.done = False
        self.capabilities: set[str] = set()
        self._cap_open = self.sasl is not None
        self._authenticated = False

    def start(self) -> list[bytes]:
        lines = [command("CAP", "LS", "302")] if self.sasl is not None else []
        if self.password:
            lines.append(command("PASS", self.password))
        return lines + [command("NICK", self.nick), command("USER", self.username, "0", "*", self.realname)]

    def feed(self, msg: Message) -> list[bytes]:
        code = msg.command
        if code == "CAP":
            return self._cap(msg)
        if code == "AUTHENTICATE":
            return self._authenticate(msg)
        if code == "903":                   # RPL_SASLSUCCESS
            self._authenticated = True
            return self._end_cap()
        if code in SASL_FAILED:
            raise RegistrationRefused(f"SASL authentication failed ({code}: {msg.params[-1] if msg.params else ''})")
        if code == "421" and len(msg.params) > 1 and msg.params[1].upper() == "CAP":
            return self._no_cap()
        if code in COLLISION_CODES and not self.done:
            return self._next_nick(code)
        if code in REFUSING:
            raise RegistrationRefused(REFUSING[code])
        if code == "001":
            return self._welcomed(msg)
        return []

    # ------------------------------------------------------------------------------------------------ CAP
    def _cap(self, msg: Message) -> list[bytes]:
        if len(msg.params) < 2:
            return []
        sub = msg.params[1].upper()
        if sub == "LS":
            more = len(msg.params) > 3 and msg.params[2] == "*"
            self.capabilities.update(c.split("=", 1)[0] for c in msg.params[-1].split())
            if more or not self._cap_open:
                return []
            if self.sasl is None:
                return self._end_cap()
            if "sasl" not in self.capabilities:
                raise RegistrationRefused("SASL is configured but the server offers no SASL (CAP LS: "
                                          f"{' '.join(sorted(self.capabilities)) or 'nothing'})")
            return [command("CAP", "REQ", "sasl")]
        if sub == "ACK" and "sasl" in msg.params[-1].split():
            return [command("AUTHENTICATE", "PLAIN")]
        if sub == "NAK":
            raise RegistrationRefused(f"the server would not enable {msg.params[-1]!r}")
        return []

    def _authenticate(self, msg: Message) -> list[bytes]:
        if self.sasl is None or not msg.params or msg.params[0] != "+":
            return []
        user, password = self.sasl
        blob = base64.b64encode(f"\0{user}\0{password}".encode("utf-8")).decode("ascii")
        pieces = [blob[i:i + 400] for i in range(0, len(blob), 400)]
        if not pieces or len(pieces[-1]) == 400:
            pieces.append("+")              # a payload of exactly n*400 bytes ends with an empty piece
        return [command("AUTHENTICATE", piece) for piece in pieces]

    def _end_cap(self) -> list[bytes]:
        if not self._cap_open:
            return []
        self._cap_open = False
        return [command("CAP", "END")]

    def _no_cap(self) -> list[bytes]:
        self._cap_open = False
        if self.sasl is not None:
            raise RegistrationRefused("SASL is configured but the server knows no CAP (it cannot offer SASL)")
        return []

    # ----------------------------------------------------------------------------------------------- nicks
    def _next_nick(self, code: str) -> list[bytes]:
        if not self.candidates:
            raise NoNickLeft(f"every nick we may take is in use or refused ({code}), the last {self.nick!r}")
        self.nick = self.candidates.pop(0)
        return [command("NICK", self.nick)]

    def _welcomed(self, msg: Message) -> list[bytes]:
        if self.sasl is not None and not self._authenticated:
            raise RegistrationRefused("the server registered us without SASL authentication")
        self.done = True
        self.nick = msg.params[0] if msg.params else self.nick
        last = msg.params[-1].split()[-1] if msg.params and msg.params[-1].split() else ""
        if "!" in last and "@" in last and last.split("!", 1)[0] == self.nick:
            self.own_prefix = last
        return []
