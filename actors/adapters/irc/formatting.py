"""IRC lines as the protocol has them (RFC 1459 §2.3, RFC 2812 §2.3): pure functions, no network.

A line is at most 512 bytes with its CR LF. A PRIVMSG we send reaches the other side with our prefix in front of it
(``:nick!user@host PRIVMSG target :text``), and that relayed line is the one that must fit: ``privmsg_budget``
counts the prefix the server adds, in UTF-8 bytes. ``split_for_irc`` cuts a text into payloads within a budget:
one per text line (IRC has no line breaks inside a message), long lines at a space where one is near, never inside
a UTF-8 sequence.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

LINE_BYTES = 512                   # with CR LF
# What a prefix may take where the server did not tell us ours: RFC 2812's 9-character nick is widely exceeded
# (ngircd's MaxNickLength, 30 on many networks), idents are cut at 10, and a host name is at most 63 bytes.
MAX_NICK, MAX_USER, MAX_HOST = 30, 10, 63


@dataclass(frozen=True)
class Message:
    prefix: str                    # "" when the line has none
    command: str                   # upper case: PRIVMSG, PING, 001, ...
    params: tuple

    @property
    def nick(self) -> str:
        """The nick of a ``nick!user@host`` prefix (the whole prefix for a server)."""
        return self.prefix.split("!", 1)[0]


class BadLine(ValueError):
    """A line that is no IRC message (empty, a prefix with nothing after it)."""


def parse(raw: bytes) -> Message:
    """One received line (without CR LF). Bytes that are no UTF-8 are replaced, as clients on other encodings send
    them: the message is still read, its odd characters shown as U+FFFD."""
    line = raw.decode("utf-8", "replace").rstrip("\r\n")
    if line.startswith("@"):           # IRCv3 message tags, which we do not ask for: ignored
        line = line.split(" ", 1)[1] if " " in line else ""
    prefix = ""
    if line.startswith(":"):
        prefix, _, line = line[1:].partition(" ")
    line = line.lstrip(" ")
    if not line:
        raise BadLine("no command")
    head, _, trailing = line.partition(" :")
    params = head.split()
    command, params = params[0].upper(), params[1:]
    if " :" in line or line.endswith(" :"):
        params.append(trailing)
    return Message(prefix, command, tuple(params))


def command(name: str, *params: str, trailing: bool = False) -> bytes:
    """One line to send; the last parameter goes as trailing (``:text``) when it must (spaces, a leading colon,
    empty) or ``trailing`` asks (a PRIVMSG's text, so its length is what ``privmsg_budget`` counted). CR, LF and NUL
    in a parameter would end or corrupt the line: they are refused, never passed on."""
    for param in params:
        if any(c in param for c in "\r\n\0"):
            raise ValueError(f"{name}: a parameter holds CR, LF or NUL")
    last = list(params[-1:])
    if last and (trailing or not last[0] or " " in last[0] or last[0].startswith(":")):
        last = [":" + last[0]]
    parts = [name, *params[:-1], *last]
    line = " ".join(parts).encode("utf-8")
    if len(line) + 2 > LINE_BYTES:
        raise ValueError(f"{name}: the line is {len(line) + 2} bytes, over {LINE_BYTES}")
    return line + b"\r\n"


def privmsg_budget(target: str, own_prefix: Optional[str] = None) -> int:
    """Bytes of text one PRIVMSG to ``target`` may carry so that the line the server relays, ``:prefix PRIVMSG
    target :text\\r\\n``, is within 512 bytes. ``own_prefix`` (nick!user@host) as the server showed it to us; None:
    the longest one could be."""
    prefix = own_prefix if own_prefix else "n" * MAX_NICK + "!" + "u" * MAX_USER + "@" + "h" * MAX_HOST
    overhead = len(f":{prefix} PRIVMSG {target} :".encode("utf-8")) + 2
    return LINE_BYTES - overhead


def _cut(data: bytes, budget: int) -> int:
    """Where to end a piece of ``data`` of at most ``budget`` bytes: after the last space in its second half if
    there is one, else at the last character boundary (a UTF-8 continuation byte is 0b10xxxxxx)."""
    if len(data) <= budget:
        return len(data)
    space = data.rfind(b" ", budget // 2, budget + 1)
    if space > 0:
        return space + 1 if space + 1 <= budget else space
    end = budget
    while end > 0 and (data[end] & 0xC0) == 0x80:
        end -= 1
    return end or budget


# Control characters in what we send: none passes. \x01 opens a CTCP request (a model's "\x01DCC SEND ..." would
# reach the other client as one, "\x01ACTION" as an action), and the rest of C0 are mIRC formatting (\x02 bold,
# \x03 colours, \x0f, \x16, \x1d, \x1f), which the gateway never writes (its IRC text is plain) and a model
# could use to hide text or forge the look of another line, or terminal controls (\x1b) for clients in a
# terminal; DEL and C1 (U+0080-U+009F, which a UTF-8 terminal may take for CSI) likewise. Those that separate
# words (NUL, tab, VT, FF, a lone CR) become a space; the others go.
_SPACING_CONTROLS = str.maketrans({c: " " for c in "\0\t\x0b\x0c\r"})
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")


def without_controls(line: str) -> str:
    """One text line (no LF) as it may be sent: no control character (see ``_CONTROLS``)."""
    return _CONTROLS.sub("", line.translate(_SPACING_CONTROLS))


def split_for_irc(text: str, budget: int) -> list[str]:
    """The PRIVMSG payloads for ``text``, in order: each text line on its own, long ones cut within ``budget``
    bytes. Blank lines are dropped (an empty PRIVMSG is an error, ERR_NOTEXTTOSEND); no control character is
    sent (``without_controls``: CTCP, formatting and terminal codes)."""
    if budget < 4:
        raise ValueError("budget too small for one character")
    payloads = []
    for line in text.replace("\r\n", "\n").split("\n"):
        line = without_controls(line).rstrip()
        data = line.encode("utf-8", "replace")
        while data.strip():
            end = _cut(data, budget)
            piece, data = data[:end], data[end:]
            if piece.strip():
                payloads.append(piece.decode("utf-8").rstrip(" ") or piece.decode("utf-8"))
    return payloads


def irc_lower(name: str) -> str:
    """RFC 1459 case mapping: {}|^ are the lower case of []\\~ (nicks and channels compare this way)."""
    return name.lower().translate(str.maketrans("[]\\~", "{}|^"))


def is_channel(target: str) -> bool:
    return bool(target) and target[0] in "#&+!"


def addressed(text: str, nick: str) -> Optional[str]:
    """The rest of a channel message that starts by addressing ``nick`` ("nick: hi", "nick, hi", "@nick hi"),
    or None if it addresses someone else or no one."""
    stripped = text.lstrip()
    at = stripped.startswith("@")
    if at:
        stripped = stripped[1:]
    if not nick or irc_lower(stripped[:len(nick)]) != irc_lower(nick):
        return None
    rest = stripped[len(nick):]
    if rest[:1] in (":", ",") or (at and rest[:1] in (" ", "")):
        return rest[1:].strip()
    return None
