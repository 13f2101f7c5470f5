"""Operation ids and the keys a platform deduplicates on: pure functions and one bounded book, testable without
actors (the rule itself: ``PlatformOp``'s docstring in actors/messages/platform_ops.py, docs/design.md §7).

A platform that deduplicates by key (Matrix's transaction id, a retry key, a request id) answers a repeated key with
what the first request did and does nothing more. So a key may come back only for a genuine retry of one operation
with one content; reused for a new edit it turns that edit into a silent no-op, reported as a success. A turn keeps
its id across restarts and its replies are edited by every life that resumes it, so neither an op id nor a key may
be a counter that starts again in each life:

* ``op_id`` numbers a sender's operations under its claim: the ledger's fence, which every new claim of the
  obligation increments (storage/ledger.py), so no two lives of the daemon (nor two consumers of one turn, nor the
  sweeper after them) share a number; without a claim, a token drawn at random for this life.
* ``platform_key`` is the key an adapter hands the platform: derived from the op id *and* the content (target,
  text, file), so even an op id that came back in another life with other content cannot produce the same key.
  The exception is a keyed send (``PlatformOp.idempotency_key``, pacing ``idempotent_send``): its key names the
  reply's part, the same for every attempt by any life, so a send whose answer was lost is not shown twice; the
  earlier copy the platform may answer with is always edited to the wanted text after (the sender forgets what
  that part shows), so that key is never relied on for its text.
* ``KeyBook`` is the adapter's check (actors/adapters/base.py): an op id or a send key offered again in this life
  for a different operation is refused before anything reaches the platform.
"""
from __future__ import annotations

import collections
import hashlib
import secrets
from typing import Optional

REMEMBERED_KEYS = 20_000   # op ids and send keys an adapter life remembers (oldest forgotten first)
UNCHECKED_ACTIONS = ("typing",)   # nothing the chat keeps: repeated under one id by design (reply_status.py)


def life_token() -> str:
    """A token for a sender that has no claim to number its operations under: random, so no other life has it."""
    return "l" + secrets.token_hex(6)


def op_id(owner: str, claim, number: int) -> str:
    """The id of operation ``number`` of ``owner`` (a turn's reply, a swept obligation) under ``claim``: the
    ledger fence of the owner's claim, or ``life_token()`` where there is none."""
    return f"{owner}:{claim}.{number}"


def _file_key(op) -> Optional[str]:
    return op.file.cache_key if op.file is not None else None


def operation(op) -> tuple:
    """Everything an operation does to the chat: two ops with one id must agree on all of it."""
    return (op.action, op.chat_id, op.thread_id, op.message_id, op.reply_to, op.text, _file_key(op),
            op.idempotency_key)


def send_part(op) -> tuple:
    """What a keyed send's key names: the part of the reply in its chat (not the text it carries: see above)."""
    return ("send", op.chat_id, op.thread_id, op.idempotency_key)


def platform_key(op) -> str:
    """The key of ``op`` for a platform that deduplicates: a keyed send's own key, else a digest of the op id with
    the operation's content, so the same key means the same operation with the same content."""
    if op.action == "send" and op.idempotency_key:
        return op.idempotency_key
    digest = hashlib.sha256(repr((op.op_id,) + operation(op)).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:32]


class KeyBook:
    """The op ids and send keys one adapter life was handed, each with the operation it named (bounded: the
    oldest are forgotten first; a retry comes within seconds, long before)."""

    def __init__(self, limit: int = REMEMBERED_KEYS):
        self.limit = limit
        self._named: collections.OrderedDict = collections.OrderedDict()

    def admit(self, op) -> Optional[str]:
        """None if ``op`` may go (new, or a retry of the very operation its id named); else why it may not."""
        if op.action in UNCHECKED_ACTIONS:
            return None
        names = [(("op", op.op_id), operation(op))]
        if op.action == "send" and op.idempotency_key:
            names.append((("key", op.idempotency_key), send_part(op)))
        for name, what in names:
            earlier = self._named.get(name)
            if earlier is not None and earlier != what:
                return (f"{name[0]} {name[1]!r} was already used for another operation ({earlier[0]} in chat "
                        f"{earlier[1]}); a key names one operation with one content, so this {op.action} is refused")
        for name, what in names:
            self._named[name] = what
            self._named.move_to_end(name)
        while len(self._named) > self.limit:
            self._named.popitem(last=False)
        return None
