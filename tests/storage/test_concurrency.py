"""Many OS processes, one database (a file, or a PostgreSQL schema): nothing is lost, nothing interleaves, no
'database is locked' (or serialization failure) escapes."""
import asyncio
import multiprocessing
import sqlite3
import time

from storage import Store

from .workers import SHARED_KEY, concurrent_writer

WORKERS = 8
ROUNDS = 150
# On PostgreSQL contending writers fail with serialization errors and retry with a backoff instead of queueing on a
# lock: each round costs more wall time there, and half the rounds already race every step hundreds of times.
POSTGRESQL_ROUNDS = 75
DEADLINE_S = 90.0   # all workers, on a loaded 2-core machine


def test_eight_processes_write_one_fresh_file(db_path, tmp_path):
    path = str(db_path)  # not created yet (an empty schema): the workers also race to create and migrate it
    rounds = POSTGRESQL_ROUNDS if path.startswith("postgresql://") else ROUNDS
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(WORKERS)
    results = [tmp_path / f"result-{w}" for w in range(WORKERS)]
    procs = [ctx.Process(target=concurrent_writer, args=(path, w, rounds, barrier, str(results[w])))
             for w in range(WORKERS)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + DEADLINE_S
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():  # a hung worker fails the test instead of hanging it
            p.kill()
            p.join()
    outcomes = [r.read_text() if r.exists() else "no result" for r in results]
    assert all(o.startswith("ok") for o in outcomes), "\n".join(outcomes)
    assert all("locked" not in o and "serializ" not in o for o in outcomes)
    assert [p.exitcode for p in procs] == [0] * WORKERS
    lost_claims = sum(int(o.split()[1]) for o in outcomes)
    assert lost_claims == (WORKERS - 1) * rounds  # exactly one process won each obligation

    if not path.startswith("postgresql://"):
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()

    async def verify():
        async with await Store.open(path) as store:
            [session] = await store.sessions.list(session_key=SHARED_KEY)  # one session, however they raced
            events = await store.sessions.load(session.session_id)
            assert [e.seq for e in events] == list(range(1, WORKERS * rounds * 3 + 1))  # no gap, no duplicate
            for start in range(0, len(events), 3):  # each batch of 3 is contiguous: batches never interleave
                batch = events[start:start + 3]
                assert len({(e.payload["worker"], e.payload["round"]) for e in batch}) == 1
                assert [e.payload["part"] for e in batch] == [0, 1, 2]
            counts = await store.inbox.counts()
            assert counts["received"] == rounds + WORKERS * rounds  # shared ids deduplicated across processes
            for w in range(WORKERS):
                assert await store.inbox.get_offset(f"adapter-{w}") == rounds - 1
            assert await store.ledger.counts() == {"pending": 0, "attempting": 0, "delivered": rounds, "failed": 0,
                                                   "abandoned": 0}
            assert all(len(ob.parts) == 1 for ob in await store.ledger.list())
    asyncio.run(verify())
