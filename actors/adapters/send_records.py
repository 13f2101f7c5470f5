"""What an adapter writes to the ledger around a send (docs/design.md §2.6), on its loop, with the adapter's one store:
the intent just before the request leaves, the returned id in the same step as the platform's answer, the answer of
a search for a lost copy, and a 429 ban before the chat is written to again.

``SendRecords`` is a component of ``PlatformAdapter`` (base.py). Collaborators: ``store()`` (the adapter's store, or
None before it is open), ``say(level, fmt, *args)`` and ``clean(error)`` as the adapter gives them.

What survives kill -9: an intent committed and no id means "this send may have left" (the next owner looks for the
copy or marks its own as re-sent); an id committed means the part is on the platform; a ban committed is honoured
by the next life's budgets (budgets.py).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from actors.adapters.budgets import ChatBudgets
from actors.messages import OpResult, PlatformOp
from storage import IllegalTransition, NotFound, StaleFence, Store


class SendRecords:
    def __init__(self, adapter_name: Callable[[], str], store: Callable[[], Optional[Store]],
                 say: Callable[..., None], clean: Callable[[Any], str]):
        self._name = adapter_name
        self._store = store
        self.say = say
        self.clean = clean

    async def intent(self, op: PlatformOp) -> OpResult | None:
        """Commit, just before the send leaves, that it is about to (G3, docs/design.md §2.6): a kill -9 from here until
        ``part`` leaves the intent behind, and the next owner marks its copy as re-sent. None if recorded;
        otherwise the answer for the sender, and nothing is sent: another owner holds the reply (lost_claim), or
        storage is unavailable (storage)."""
        oid, fence, index = op.ledger
        try:
            await self._store().ledger.record_send_intent(oid, fence, index)
            return None
        except (StaleFence, IllegalTransition, NotFound) as exc:
            return OpResult(op.op_id, False, error_kind="lost_claim", error=self.clean(exc))
        except Exception as exc:  # noqa: BLE001 - unavailable storage, or anything else: nothing leaves unrecorded
            return OpResult(op.op_id, False, error_kind="storage", error=self.clean(exc))

    async def part(self, op: PlatformOp, message_id: str) -> bool:
        """Record the id the platform returned, in the same step as its answer; False if it could not be (the
        sender records it then)."""
        oid, fence, index = op.ledger
        try:
            await self._store().ledger.record_part(oid, fence, index, message_id, replace=True)
            return True
        except Exception as exc:  # noqa: BLE001 - the id still reaches the sender, which tries again
            self.say(logging.WARNING, "%s: the id of part %d of %s could not be recorded here (%s); its consumer "
                      "records it", self._name(), index, oid[:12], self.clean(exc))
            return False

    async def lost_copy_found(self, op: PlatformOp, message_id: Optional[str]) -> OpResult:
        """The search answered: the copy is the part now (its id replaces the intent), or there is none (the intent
        goes). Either way the reply needs no re-sent marker on its account."""
        if message_id is None:
            await self.forget_intent(op)
            return OpResult(op.op_id, True)
        recorded = await self.part(op, str(message_id))
        return OpResult(op.op_id, True, message_id=str(message_id), recorded=recorded)

    async def forget_intent(self, op: PlatformOp) -> None:
        try:
            await self._store().ledger.clear_send_intent(*op.ledger)
        except Exception:  # noqa: BLE001 - best effort: a stale intent only marks a later copy as re-sent
            pass

    async def ban(self, chat_id: str, seconds: float) -> None:
        """Commit a 429 ban before the chat is written to again, so a restart inside it still honours it."""
        store = self._store()
        if store is None:
            return
        try:
            await ChatBudgets.record_ban(store, self._name(), chat_id, seconds)
        except Exception as exc:  # noqa: BLE001 - this life still honours it in memory; only a restart could not
            self.say(logging.WARNING, "%s: could not record the rate-limit ban of chat %s (%s)", self._name(),
                      chat_id, self.clean(exc))
