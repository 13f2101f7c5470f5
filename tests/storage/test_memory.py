"""What profiles remember, in storage (storage/memory.py): one entry per text and scope, a scope bounded in its
transaction, reads and deletes that never cross a profile or a scope."""
from __future__ import annotations

from storage import Store


async def test_the_same_text_twice_is_one_entry_and_a_full_scope_refuses_the_next(db_path):
    async with await Store.open(db_path) as store:
        first = await store.memory.add("a", "chat:fake:room", "likes tea", 2, "a.fake.dm.chat-1", now=10.0)
        again = await store.memory.add("a", "chat:fake:room", "likes tea", 2)
        assert first.inserted and not again.inserted and again.entry.memory_id == first.entry.memory_id
        second = await store.memory.add("a", "chat:fake:room", "hates coffee", 2)
        full = await store.memory.add("a", "chat:fake:room", "third fact", 2)
        assert second.inserted and full.full and full.entry is None and full.count == 2
        elsewhere = await store.memory.add("b", "chat:fake:room", "third fact", 2)   # another profile: its own bound
        assert elsewhere.inserted
        assert [e.text for e in await store.memory.entries("a", "chat:fake:room")] == ["likes tea", "hates coffee"]
        assert [e.text for e in await store.memory.entries("a", "chat:fake:room", limit=1)] == ["hates coffee"]
        assert [e.text for e in await store.memory.entries("b", "chat:fake:room")] == ["third fact"]
        got = await store.memory.get(first.entry.memory_id)
        assert (got.profile, got.scope, got.created_at, got.session_key) == ("a", "chat:fake:room", 10.0,
                                                                              "a.fake.dm.chat-1")


async def test_forget_deletes_only_within_the_profile_and_scope_it_names(db_path):
    async with await Store.open(db_path) as store:
        mine = (await store.memory.add("a", "user:fake:ann", "ann fact", 10)).entry
        theirs = (await store.memory.add("b", "user:fake:ann", "b's fact", 10)).entry
        other_scope = (await store.memory.add("a", "user:fake:bob", "bob fact", 10)).entry
        gone = await store.memory.forget([theirs.memory_id, other_scope.memory_id, mine.memory_id, 999],
                                         "a", "user:fake:ann")
        assert [e.memory_id for e in gone] == [mine.memory_id]
        left = await store.memory.listing()
        assert [(e.profile, e.scope, e.text) for e in left] == [("a", "user:fake:bob", "bob fact"),
                                                                ("b", "user:fake:ann", "b's fact")]
        assert [e.text for e in await store.memory.listing(profile="b")] == ["b's fact"]
        assert [e.text for e in await store.memory.listing(scope="user:fake:bob")] == ["bob fact"]
        assert [e.memory_id for e in await store.memory.forget([theirs.memory_id])] == [theirs.memory_id]
        assert await store.memory.get(theirs.memory_id) is None
