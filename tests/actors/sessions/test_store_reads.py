"""actors/sessions/store_reads.py: a worker shard's answer to the admin CLI, on a real SQLite store."""
from __future__ import annotations

import asyncio

from actors.messages import StoreRead
from actors.sessions import store_reads
from storage import Store, session_key
from tests.storage.helpers import Src


def test_only_the_named_reads_run_and_errors_are_said(tmp_path):
    loop = asyncio.new_event_loop()
    store = loop.run_until_complete(Store.open(tmp_path / "gateway.db"))
    try:
        key = session_key(Src())
        loop.run_until_complete(store.sessions.get_or_create(key))
        answer = store_reads.answer(StoreRead("sessions_list", (("limit", 10),)), loop.run_until_complete, store,
                                    "shard:w1/0")
        assert answer.shard == "shard:w1/0" and answer.error is None
        assert [s["session_key"] for s in answer.result["sessions"]] == [key]
        missing = store_reads.answer(StoreRead("session_show", (("key_or_id", "nobody"),)), loop.run_until_complete,
                                     store, "shard:w1/0")
        assert missing.result is None and "no session" in missing.error
        refused = store_reads.answer(StoreRead("session_forget", (("path", "/etc/passwd"),)),
                                     loop.run_until_complete, store, "shard:w1/0")
        assert refused.result is None and "no such read" in refused.error, "nothing that writes can be asked"
        loop.run_until_complete(store.inbox.put(key, "telegram", "m1", {"text": "waiting"}))
        chat = store_reads.answer(StoreRead("conversation", (("session_key", key), ("last_n", 10)), "read-7"),
                                  loop.run_until_complete, store, "shard:w1/0")
        assert chat.token == "read-7" and chat.result["events"] == []
        assert [r.platform_message_id for r in chat.result["waiting"]] == ["m1"]
        outcome = store_reads.answer(StoreRead("message_outcome", (("platform", "telegram"), ("message_id", "m1"),
                                                                  ("last_n", 10))), loop.run_until_complete, store,
                                     "shard:w1/0")
        assert outcome.result["row"].state == "received" and outcome.result["row"].session_key == key
        unknown = store_reads.answer(StoreRead("message_outcome", (("platform", "telegram"), ("message_id", "m9"),
                                                                  ("last_n", 10))), loop.run_until_complete, store,
                                     "shard:w1/0")
        assert unknown.result == {"row": None, "events": []}
        odd = store_reads.answer(StoreRead("sessions_list", (("drop_table", True),)), loop.run_until_complete, store,
                                 "shard:w1/0")
        assert "bad arguments" in odd.error
    finally:
        loop.run_until_complete(store.close())
        loop.close()
