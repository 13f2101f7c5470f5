"""The Telegram adapter's search for a lost send's copy (PlatformOp "find_lost", lost_copies.py) on a plain event
loop against the in-process fake Bot API and a real SQLite ledger: a part whose id the ledger already holds is that
copy (its send's answer came back and was recorded; only the answer to the consumer was lost), even though the walk
over the ids skips every id recorded as a part."""
from __future__ import annotations

import asyncio

import pytest

from actors.messages import PlatformOp
from storage import Store, Target
from tests.actors.adapters.telegram.test_telegram_adapter import make_adapter
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.timeout(30)


def record_reply(tmp_path, chat: int, reply_to: int, part_id: str | None) -> tuple:
    """The reply's obligation, claimed, with part 0 recorded as ``part_id`` (or only its send intent)."""
    async def main():
        store = await Store.open(tmp_path / "gateway.db")
        try:
            ob = await store.ledger.record_obligation(f"default.tg.dm.{chat}", "m1", Target("tg", str(chat),
                                                      reply_to=f"{chat}:{reply_to}"), "", chunks=[], claim=True)
            await store.ledger.record_send_intent(ob.obligation_id, ob.fence, 0)
            if part_id is not None:
                await store.ledger.record_part(ob.obligation_id, ob.fence, 0, part_id, replace=True)
            return ob.obligation_id, ob.fence
        finally:
            await store.close()
    return asyncio.run(main())


def perform(adapter, op: PlatformOp):
    """One operation on a fresh loop, with the adapter's store open as it is in the daemon (ready_storage)."""
    async def main():
        try:
            await adapter.ready_storage()
            return await adapter._perform(op)
        finally:
            await adapter.close()
    return asyncio.run(main())


@pytest.mark.parametrize("recorded", [True, False])
def test_a_lost_send_whose_id_the_ledger_holds_is_that_message(tmp_path, recorded):
    with FakeTelegram() as tg:
        question = tg.inject_message("question", chat_id=60)["message"]["message_id"]
        adapter, _ = make_adapter(tg, tmp_path)
        preview = perform(adapter, PlatformOp("s1", "send", "60", "the answer so far ▍", chat_type="dm"))
        oid, fence = record_reply(tmp_path, 60, question, preview.message_id if recorded else None)
        adapter, _ = make_adapter(tg, tmp_path)
        found = perform(adapter, PlatformOp("f1", "find_lost", "60", "the whole answer", chat_type="dm",
                                              ledger=(oid, fence, 0)))
        assert found.ok and found.message_id == preview.message_id, found
        [message] = [m for m in tg.messages(60) if m["outgoing"]]
        assert message["text"] == "the whole answer", message
