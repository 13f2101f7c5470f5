"""Many OS processes, one database file: nothing is lost, nothing interleaves, no 'database is locked' escapes."""
import asyncio
import multiprocessing
import sqlite3
import time

from storage import Store

from .workers import SHARED_KEY, concurrent_writer

WORKERS = 8
ROUNDS = 150


def test_eight_processes_write_one_fresh_file(tmp_path):
    path = str(tmp_path / "shared.db")  # not created yet: the workers also race to create and migrate it
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(WORKERS)
    results = [tmp_path / f"result-{w}" for w in range(WORKERS)]
    procs = [ctx.Process(target=concurrent_writer, args=(path, w, ROUNDS, barrier, str(results[w])))
             for w in range(WORKERS)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 60
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():  # a hung worker fails the test instead of hanging it
            p.kill()
            p.join()
    outcomes = [r.read_text() if r.exists() else "no result" for r in results]
    assert all(o.startswith("ok") for o in outcomes), "\n".join(outcomes)
    assert all("locked" not in o for o in outcomes)
    assert [p.exitcode for p in procs] == [0] * WORKERS
    lost_claims = sum(int(o.split()[1]) for o in outcomes)
    assert lost_claims == (WORKERS - 1) * ROUNDS  # exactly one process won each obligation

    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()

    async def verify():
        async with await Store.open(path) as store:
            [session] = await store.sessions.list(session_key=SHARED_KEY)  # one session, however they raced
            events = await store.sessions.load(session.session_id)
            assert [e.seq for e in events] == list(range(1, WORKERS * ROUNDS * 3 + 1))  # no gap, no duplicate
            for start in range(0, len(events), 3):  # each batch of 3 is contiguous: batches never interleave
                batch = events[start:start + 3]
                assert len({(e.payload["worker"], e.payload["round"]) for e in batch}) == 1
                assert [e.payload["part"] for e in batch] == [0, 1, 2]
            counts = await store.inbox.counts()
            assert counts["received"] == ROUNDS + WORKERS * ROUNDS  # shared ids deduplicated across processes
            for w in range(WORKERS):
                assert await store.inbox.get_offset(f"adapter-{w}") == ROUNDS - 1
            assert await store.ledger.counts() == {"pending": 0, "attempting": 0, "delivered": ROUNDS, "failed": 0,
                                                   "abandoned": 0}
            assert all(len(ob.parts) == 1 for ob in await store.ledger.list())
    asyncio.run(verify())
