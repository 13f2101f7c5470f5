"""actors/adapters/remote_reads.py: an adapter's loop reading another host's database through the actor thread."""
from __future__ import annotations

import asyncio

import pytest

from actors.adapters import remote_reads
from actors.adapters.remote_reads import ReadWanted, RemoteReadFailed, RemoteReads
from actors.messages import StoreReadResult

pytestmark = pytest.mark.timeout(30)


def test_an_answer_reaches_its_read_and_a_late_or_failed_one_is_said():
    async def scenario():
        loop = asyncio.get_running_loop()
        sent: list[ReadWanted] = []
        reads = RemoteReads(sent.append, loop.call_soon_threadsafe)

        async def shard_answers(result=None, error=None):
            while not sent:
                await asyncio.sleep(0)
            wanted = sent.pop()
            reads.answered(StoreReadResult("shard:w1/0", result, error, wanted.read.token))
            return wanted
        answering = asyncio.ensure_future(shard_answers({"events": []}))
        assert await reads.read("addr", "conversation", (("session_key", "k"),), 5) == {"events": []}
        assert (await answering).read.action == "conversation"
        answering = asyncio.ensure_future(shard_answers(error="no such read"))
        with pytest.raises(RemoteReadFailed, match="no such read"):
            await reads.read("addr", "nope", (), 5)
        await answering
        with pytest.raises(RemoteReadFailed, match="no answer within"):
            await reads.read("addr", "conversation", (), 0.05)
        late = sent.pop()
        reads.answered(StoreReadResult("shard:w1/0", {}, None, late.read.token))   # after its read gave up
        await asyncio.sleep(0)
        assert reads.waiting == {}
    asyncio.run(scenario())


def test_reads_in_flight_are_bounded(monkeypatch):
    monkeypatch.setattr(remote_reads, "MAX_IN_FLIGHT", 2)

    async def scenario():
        reads = RemoteReads(lambda item: None, asyncio.get_running_loop().call_soon_threadsafe)
        pending = [asyncio.ensure_future(reads.read("addr", "conversation", (), 5)) for _ in range(2)]
        await asyncio.sleep(0)
        with pytest.raises(RemoteReadFailed, match="already in flight"):
            await reads.read("addr", "conversation", (), 5)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        assert reads.waiting == {}
    asyncio.run(scenario())
