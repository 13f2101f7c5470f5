"""Leases with fencing tokens (storage/leases.py), on both backends: one holder at a time, a token that moves on every
take-over, renewals that fail once another life took the lease, and the fence refusing a lost holder's commit in
the same transaction (here the inbox's commit of a round with its offset)."""
from __future__ import annotations

import asyncio
import time

import pytest

from storage import Fence, InboundItem, LeaseLost, Store

pytestmark = pytest.mark.timeout(90)

NAME = "adapter:telegram"


def row(n: int) -> InboundItem:
    return InboundItem(f"default.telegram.dm.{n}", "telegram", f"u-{n}", {"text": f"hello {n}"})


async def expired(store: Store, name: str, deadline_s: float = 20.0) -> None:
    """Wait (polling the database's clock, not ours) until the lease's expiry has passed."""
    end = time.monotonic() + deadline_s
    seen = None
    while time.monotonic() < end:
        seen = {lease.name: lease for lease in await store.leases.all()}.get(name)
        if seen is not None and seen.expires_in_s <= 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} did not expire within {deadline_s}s: {seen}")


async def test_one_holder_at_a_time_and_the_token_moves_on_every_take_over(db_path):
    async with await Store.open(db_path) as store:
        first = await store.leases.take(NAME, "host-a", "life-a", 30.0)
        assert first is not None and first.token == 1 and first.holder == "host-a"
        assert await store.leases.take(NAME, "host-b", "life-b", 30.0) is None, "held by host-a: nobody else takes it"
        again = await store.leases.take(NAME, "host-a", "life-a", 30.0)
        assert again.token == 1, "the holder taking it again renews it under the same token"
        assert await store.leases.take(NAME, "host-a", "life-a2", 30.0) is None, (
            "a restarted process of the same host is another life: it waits for the old life's lease")
        await store.leases.release([first.fence()])
        second = await store.leases.take(NAME, "host-b", "life-b", 30.0)
        assert second is not None and second.token == 2, second
        [shown] = await store.leases.all()
        assert (shown.holder, shown.token, shown.live) == ("host-b", 2, True) and 0 < shown.expires_in_s <= 30.0


async def test_an_expired_lease_goes_to_the_next_taker_and_the_old_holder_can_neither_renew_nor_commit(db_path):
    async with await Store.open(db_path) as store:
        old = await store.leases.take(NAME, "host-a", "life-a", 0.3)
        assert await store.leases.renew([old.fence()], 0.3) == {NAME}, "held: renewed"
        await store.inbox.put_many_and_commit_offset([row(1)], "telegram", 11, fences=[old.fence()])
        await expired(store, NAME)
        new = await store.leases.take(NAME, "host-b", "life-b", 30.0)
        assert new is not None and new.token == old.token + 1, new
        assert await store.leases.renew([old.fence()], 30.0) == set(), "the old holder's renewal fails: it lost it"
        with pytest.raises(LeaseLost, match="adapter:telegram"):
            await store.inbox.put_many_and_commit_offset([row(2)], "telegram", 12, fences=[old.fence()])
        assert await store.inbox.get_offset("telegram") == 11, "the refused commit moved nothing: offset"
        assert [r.platform_message_id for r in await store.inbox.rows_in_state(row(2).session_key, ("received",))] \
            == [], "the refused commit stored no row"
        await store.inbox.put_many_and_commit_offset([row(2)], "telegram", 12, fences=[new.fence()])
        assert await store.inbox.get_offset("telegram") == 12, "the new holder commits"


async def test_an_expired_lease_nobody_took_is_renewed_by_its_holder(db_path):
    async with await Store.open(db_path) as store:
        lease = await store.leases.take(NAME, "host-a", "life-a", 0.2)
        await expired(store, NAME)
        assert await store.leases.renew([lease.fence()], 30.0) == {NAME}, (
            "nobody took it, so nobody wrote under another token: the holder keeps it")
        await store.leases.check([lease.fence()])


async def test_racing_takers_on_separate_connections_get_one_holder(db_path):
    """Two hosts' connections take the same free lease at once, many times over: each time exactly one wins (on
    PostgreSQL one of the two SERIALIZABLE transactions fails and is run again, and then sees the winner)."""
    async with await Store.open(db_path) as a, await Store.open(db_path) as b:
        for round_ in range(15):
            name = f"shards:{round_}"
            won = await asyncio.gather(a.leases.take(name, "host-a", "life-a", 30.0),
                                       b.leases.take(name, "host-b", "life-b", 30.0))
            assert sum(lease is not None for lease in won) == 1, (round_, won)
            [holder] = [lease for lease in won if lease is not None]
            assert holder.token == 1


async def test_a_fence_names_a_lease_never_taken(db_path):
    async with await Store.open(db_path) as store:
        with pytest.raises(LeaseLost, match="never-taken"):
            await store.leases.check([Fence("never-taken", "life-a", 1)])


async def test_a_shards_group_transaction_is_fenced_by_the_leases_it_holds(db_path):
    """An inline store fenced by its leases (Store.fence_with, as a shard on a shared host is): a group of calls in
    one atomic scope commits while the lease is this life's, and once another life took it the scope's first write
    raises LeaseLost and nothing of the scope is kept."""
    async with await Store.open(db_path) as other, await Store.open(db_path, inline=True) as store:
        mine = await store.leases.take("partition:3", "host-a", "life-a", 0.3)
        store.fence_with(lambda: [mine.fence()])
        with store.atomic():
            await store.inbox.put_many([row(1)])
        await expired(other, "partition:3")
        assert await other.leases.take("partition:3", "host-b", "life-b", 30.0) is not None
        with pytest.raises(LeaseLost, match="partition:3"):
            with store.atomic():
                await store.inbox.put_many([row(2)])
        assert [r.session_key for r in await other.inbox.rows_in_state(row(1).session_key, ("received",))] == \
            [row(1).session_key], "the fenced group committed"
        assert await other.inbox.rows_in_state(row(2).session_key, ("received",)) == [], (
            "the group after the take-over kept nothing")
        store.fence_with(lambda: [])
