"""Passive replies: which user message a send answers (``msg_id``) and under which ``msg_seq`` (pure, and one
bounded book).

QQ lets a bot write to a C2C user or a group mostly in answer to them: a *passive reply* names the user's message
(``msg_id``) and is taken within a window after it (C2C 60 min, group and guild 5 min) and a few times per message
(QQ's documentation: up to 5). A message without ``msg_id`` is an *active* message, which QQ rations per user and
group per month, or refuses. QQ refuses a second message with the same ``msg_id`` and ``msg_seq`` as a duplicate
(code 40054005): that is what makes a repeated send show once, so:

* ``msg_seq`` is derived from the send's key (``idempotency.platform_key``): a keyed send's key names the reply's
  part, the same for every attempt by every life of the daemon; another send's key is a digest of its op id and
  content. The part index rides in the low bits, so the parts of one reply go with increasing ``msg_seq``.
* the ``msg_id`` must be the same on every attempt too: the op's ``reply_to`` where it has one (a reply's first
  part); otherwise the chat's anchor, the newest user message the intake committed for the chat, which the
  adapter keeps in its offset (``Anchors``), so a restarted adapter finds the same one. The anchor moves when the
  user writes again: a later part re-sent after a new message names the new one, and QQ can no longer see it as a
  duplicate. That window is the one place a repeated part may show twice.

QQ takes at most ``REPLIES_PER_MESSAGE`` passive replies per user message; past that it refuses them (code
40034128, "time or count exceeded"). ``ReplyBook`` counts them: per ``msg_id`` the ``msg_seq`` of each send made
(or being made) as a passive reply to it. A send whose ``msg_seq`` is in the book goes passive again (a repeat: QQ
refuses it as a duplicate, which is what makes it show once); a new one goes passive while the book has room, else
as an active message. The book is held in the offset beside the anchors.

The id the adapter records for a passive reply is ``<msg_id>#<msg_seq>``: the pair QQ deduplicates on names
exactly one message, and a repeat that QQ refuses as a duplicate is recorded under the same id as the send that
made it, whichever attempt's answer arrived.
"""
from __future__ import annotations

import collections
import hashlib
import re
from typing import Any, Optional

PART_BITS = 6                    # the low bits of a msg_seq: the part of the reply (a reply has a handful)
SEQ_SPAN = 1 << 30               # QQ takes msg_seq as a 32-bit number
WINDOWS_S = {"c2c": 3600.0, "group": 300.0, "channel": 300.0, "dms": 300.0}
WINDOW_MARGIN_S = 15.0           # an anchor this close to its window's end is not used: the request takes time
ANCHORS_KEPT = 512               # chats whose anchor the offset holds (the most recently active)
REPLIES_PER_MESSAGE = 5          # passive replies QQ takes per user message (its docs: 5, C2C and groups alike)
BOOKS_KEPT = 512                 # user messages whose replies the offset counts (the most recently answered)


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "big")


def msg_seq(key: str) -> int:
    """The ``msg_seq`` of the send whose key is ``key`` (1 .. 2**30): the same key, the same number, in every
    life. ``<reply>.<part>`` keys (the sender's keyed sends) put the part in the low bits."""
    keyed = re.fullmatch(r"(.+)\.(\d{1,6})", key)
    if keyed:
        reply, part = keyed.group(1), int(keyed.group(2))
        return 1 + (_digest(reply) % (SEQ_SPAN >> PART_BITS) << PART_BITS) + part % (1 << PART_BITS)
    return 1 + _digest(key) % (SEQ_SPAN - 1)


def reply_id(msg_id: str, seq: int) -> str:
    return f"{msg_id}#{seq}"


def usable(kind: str, anchored_at: float, now: float) -> bool:
    """Whether a user message of ``anchored_at`` (unix seconds) may still be answered passively at ``now``."""
    return now - anchored_at < WINDOWS_S.get(kind, 300.0) - WINDOW_MARGIN_S


class Anchors:
    """Each chat's newest committed user message: chat id -> (msg_id, unix seconds), the ``ANCHORS_KEPT`` most
    recent chats. Held in the adapter's offset (``as_offset`` / ``from_offset``), committed with the message."""

    def __init__(self, kept: int = ANCHORS_KEPT):
        self.kept = kept
        self._by_chat: collections.OrderedDict = collections.OrderedDict()

    @classmethod
    def from_offset(cls, offset: Any, kept: int = ANCHORS_KEPT) -> "Anchors":
        anchors = cls(kept)
        saved = offset.get("anchors") if isinstance(offset, dict) else None
        for row in saved if isinstance(saved, list) else []:
            if isinstance(row, list) and len(row) == 3 and all(isinstance(v, str) for v in row[:2]) and \
                    isinstance(row[2], (int, float)):
                anchors.note(row[0], row[1], float(row[2]))
        return anchors

    def note(self, chat_id: str, msg_id: str, at: float) -> None:
        self._by_chat.pop(chat_id, None)
        self._by_chat[chat_id] = (msg_id, at)
        while len(self._by_chat) > self.kept:
            self._by_chat.popitem(last=False)

    def get(self, chat_id: str) -> Optional[tuple[str, float]]:
        return self._by_chat.get(chat_id)

    def as_offset(self) -> list:
        return [[chat, msg_id, at] for chat, (msg_id, at) in self._by_chat.items()]


class ReplyBook:
    """Per user message (``msg_id``) the ``msg_seq`` numbers sent, or being sent, as passive replies to it: at most
    ``per_message`` each, the ``kept`` most recently answered messages. Held in the adapter's offset
    (``as_offset`` / ``from_offset``)."""

    def __init__(self, per_message: int = REPLIES_PER_MESSAGE, kept: int = BOOKS_KEPT):
        self.per_message, self.kept = per_message, kept
        self._by_message: collections.OrderedDict = collections.OrderedDict()   # msg_id -> [msg_seq, ...]

    @classmethod
    def from_offset(cls, offset: Any, per_message: int = REPLIES_PER_MESSAGE, kept: int = BOOKS_KEPT) -> "ReplyBook":
        book = cls(per_message, kept)
        saved = offset.get("replies") if isinstance(offset, dict) else None
        for row in saved if isinstance(saved, list) else []:
            if isinstance(row, list) and len(row) == 2 and isinstance(row[0], str) and isinstance(row[1], list):
                seqs = [s for s in row[1] if isinstance(s, int) and not isinstance(s, bool)][:per_message]
                book._by_message[row[0]] = seqs
                book._trim()
        return book

    def take(self, msg_id: str, seq: int) -> tuple[bool, bool]:
        """Whether the send numbered ``seq`` may answer ``msg_id`` passively, and whether the book changed (a new
        number entered: to be made durable before the send goes)."""
        seqs = self._by_message.get(msg_id)
        if seqs is not None and seq in seqs:
            return True, False
        if seqs is not None and len(seqs) >= self.per_message:
            return False, False
        self._by_message.pop(msg_id, None)
        self._by_message[msg_id] = (seqs or []) + [seq]
        self._trim()
        return True, True

    def used_up(self, msg_id: str) -> bool:
        """QQ refused a passive reply to ``msg_id`` for its count or its time: no more are tried; whether the
        book changed."""
        seqs = self._by_message.get(msg_id) or []
        if len(seqs) >= self.per_message:
            return False
        self._by_message.pop(msg_id, None)
        self._by_message[msg_id] = seqs + [0] * (self.per_message - len(seqs))   # 0: never a msg_seq we send
        self._trim()
        return True

    def count(self, msg_id: str) -> int:
        return len(self._by_message.get(msg_id) or [])

    def _trim(self) -> None:
        while len(self._by_message) > self.kept:
            self._by_message.popitem(last=False)

    def as_offset(self) -> list:
        return [[msg_id, list(seqs)] for msg_id, seqs in self._by_message.items()]
