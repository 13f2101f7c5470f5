"""Rows for sessions on another host (actors/adapters/forwarding.py, docs/distribution.md): a round's rows for a
worker's shard go to it as StoreInbound, never as a doorbell; a shard of this host is rung as always; a walk finds
what was not forwarded yet, and the shard's answer marks the rows forwarded here."""
from __future__ import annotations

import asyncio

from actors.adapters.forwarding import (ROWS_PER_MESSAGE, WALK_S, Forwarding, InboundRoutes, Unforwarded,
                                        outgoing)
from actors.messages import InboundStored, InboxDoorbell, StoreInbound
from storage import InboundItem, Store
from supervision.messages import Directory

class Address:
    """Like Thespian's ActorAddress: compared by value, and not hashable."""
    __hash__ = None

    def __init__(self, name: str):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, Address) and other.name == self.name

    def __repr__(self):
        return f"Address({self.name!r})"


LEADER = ("shard:0", Address("leader-shard"))
WORKER = ("shard:w1/0", Address("worker-shard"))


def directory(*shards, version=1) -> Directory:
    return Directory(version, sessions="supervisor", shards=tuple(shards))


def keys_on(d: Directory, name: str, count: int) -> list[str]:
    return [k for k in (f"chat-{i}" for i in range(2000)) if d.shard_for(k)[0] == name][:count]


def row(seq: int, key: str) -> tuple:
    return (seq, key, "fake", f"m{seq}", {"text": f"hi {seq}"})


def test_a_round_rings_this_hosts_shard_and_forwards_the_workers_rows():
    d = directory(LEADER, WORKER)
    [here], [there] = keys_on(d, "shard:0", 1), keys_on(d, "shard:w1/0", 1)
    routes = InboundRoutes()
    assert routes.directory_changed(d, now=0.0) == [] and routes.forwards
    out = routes.of_round(d, ((here, 1), (there, 2), (there, 3)), (row(1, here), row(2, there), row(3, there)),
                          now=1.0)
    assert out == [(LEADER[1], InboxDoorbell(here, 1)),
                   (WORKER[1], StoreInbound((row(2, there), row(3, there))))], \
        "the worker's session is rung by the rows themselves, once they are stored there"


def test_without_a_workers_shard_nothing_is_forwarded():
    d = directory(LEADER, ("shard:1", Address("second")))
    routes = InboundRoutes()
    routes.directory_changed(d, now=0.0)
    [key] = keys_on(d, "shard:1", 1)
    assert not routes.forwards
    assert routes.of_round(d, ((key, 4),), (row(4, key),), now=0.0) == [(Address("second"), InboxDoorbell(key, 4))]


def test_a_workers_shard_without_an_address_gets_nothing_now_and_its_keys_are_not_held_as_doorbells():
    d = directory(LEADER, ("shard:w1/0", None))
    routes = InboundRoutes()
    routes.directory_changed(d, now=0.0)
    [there] = keys_on(d, "shard:w1/0", 1)
    assert routes.of_round(d, ((there, 5),), (row(5, there),), now=0.0) == []
    assert not routes.doorbells.unrung, "the walk forwards it once the shard has an address, not a doorbell"


def test_rows_go_in_bounded_messages_in_seq_order():
    d = directory(LEADER, WORKER)
    there = keys_on(d, "shard:w1/0", 3)
    rows = [row(i, there[i % 3]) for i in range(1, 2 * ROWS_PER_MESSAGE + 2)]
    out = outgoing(d, rows)
    assert [len(m.rows) for _a, m in out] == [ROWS_PER_MESSAGE, ROWS_PER_MESSAGE, 1]
    assert [r[0] for _a, m in out for r in m.rows] == list(range(1, 2 * ROWS_PER_MESSAGE + 2))


def test_the_walk_finds_what_was_not_forwarded_and_the_answer_marks_it(tmp_path):
    async def run():
        store = await Store.open(tmp_path / "gateway.db", "normal", inline=True, waits_on_loop=True)
        try:
            results = await store.inbox.put_many_and_commit_offset(
                [InboundItem(f"k{i}", "fake", f"m{i}", {"n": i}) for i in range(3)], "fake", 3)
            seqs = [seq for seq, _inserted in results]
            posted = []
            await Forwarding(lambda: "fake", lambda: store, posted.append).walk()
            assert posted == [], f"rows younger than {WALK_S}s are in flight, not lost"
            forwarding = Forwarding(lambda: "fake", lambda: store, posted.append, older_than_s=-1.0)   # every row
            await forwarding.walk()
            [found] = posted
            assert isinstance(found, Unforwarded) and [r[0] for r in found.rows] == seqs
            assert found.rows[0][1:] == ("k0", "fake", "m0", {"n": 0})
            await forwarding.mark(InboundStored(tuple(seqs[:2]), "shard:w1/0"))
            posted.clear()
            await forwarding.walk()
            assert [r[0] for r in posted[0].rows] == seqs[2:], "what the worker stored is not sent again"
            assert (await store.inbox.get(seqs[0])).reason == "forwarded to shard:w1/0"
        finally:
            await store.close()
    asyncio.run(run())


def test_storage_that_fails_under_the_walk_or_the_mark_is_reported_and_tried_again_later(tmp_path):
    async def run():
        store = await Store.open(tmp_path / "gateway.db", "normal", inline=True, waits_on_loop=True)
        await store.close()   # every call fails from here on, as with a disk gone
        said, posted = [], []
        forwarding = Forwarding(lambda: "fake", lambda: store, posted.append,
                                lambda level, fmt, *args: said.append(fmt % args), older_than_s=-1.0)
        await forwarding.walk()
        await forwarding.mark(InboundStored((1, 2), "shard:w1/0"))
        assert posted == [] and len(said) == 2, said
        assert "could not read the inbox" in said[0] and "2 row(s) shard:w1/0 has stored" in said[1], said
    asyncio.run(run())
