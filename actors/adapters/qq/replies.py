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
