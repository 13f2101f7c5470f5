"""The intake's lease (actors/adapters/connection_lease.py) against a real store (a SQLite file: the lease table is
the same on both backends): a poll's wait is bounded by the lease, a round is stopped when another life takes the
lease over, and the holder says in its log when it lost it."""
from __future__ import annotations

import asyncio
import time

import pytest

from actors.adapters.connection_lease import SAFETY_S, ConnectionLease, LeaseGone
from storage import Store

pytestmark = pytest.mark.timeout(60)
NAME = "intake:telegram"


def lease_on(path, ttl_s: float, said: list) -> ConnectionLease:
    return ConnectionLease(NAME, "host-a", ttl_s, open_store=lambda: Store.open(path),
                           say=lambda level, fmt, *args: said.append(fmt % args))


def test_a_polls_wait_ends_before_the_lease_could_expire(tmp_path):
    async def main():
        said: list = []
        lease = lease_on(tmp_path / "gateway.db", 8.0, said)
        await lease.hold()
        granted = await lease.window(25.0)
        assert 1.0 <= granted <= 8.0 - SAFETY_S, granted
        assert time.time() + granted <= lease.polls_end_by + 0.01
        assert await lease.window(2.0) == 2.0, "a shorter wait asked for is kept"
        await lease.close()
        assert any("holds the lease now (token 1)" in line for line in said), said
    asyncio.run(main())


def test_a_round_is_stopped_once_another_life_takes_the_lease_over(tmp_path):
    async def main():
        said: list = []
        lease = lease_on(tmp_path / "gateway.db", 2.0, said)
        await lease.hold()
        async with await Store.open(tmp_path / "gateway.db") as other:
            lease._renewing.cancel()   # this host paused: no renewal until the lease expired and was taken over
            deadline = time.monotonic() + 20
            while (taken := await other.leases.take(NAME, "host-b", "life-b", 30.0)) is None:
                assert time.monotonic() < deadline, "the unrenewed lease never expired"
                await asyncio.sleep(0.05)
            assert taken.token == 2
            lease._renewing = asyncio.ensure_future(lease._keep())   # the host goes on, renewing again

            async def a_long_poll():
                await asyncio.sleep(30)
            with pytest.raises(LeaseGone):
                await asyncio.wait_for(lease.guard(a_long_poll()), 10)
            with pytest.raises(LeaseGone):
                await lease.window(5.0)
        await lease.close()
        assert any("this host lost the lease (no renewal reached the database within the lease time)" in line
                   for line in said), said
    asyncio.run(main())
