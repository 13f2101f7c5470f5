"""Storage benchmark: throughput, load time, size per 1,000 turns, and kill -9 trials. Prints tables.

    python bench/bench_storage.py                      # default run, well under 3 minutes
    python bench/bench_storage.py --crash-trials 500   # more kill -9 trials
    python bench/bench_storage.py --duration 1 --crash-trials 0   # quick look
    python bench/bench_storage.py --backend both --crash-trials 0   # PostgreSQL's figures beside SQLite's

``--backend postgresql`` (or ``both``) runs the throughput cells and the load of a transcript on PostgreSQL too: on the
database of ``--dsn`` (a fresh schema per cell; the password from PGPASSWORD or ~/.pgpass), else on a throwaway
server on loopback started here (tests/servers/postgresql.py: Debian's ``postgresql`` package; that server runs with
fsync off, so its ``full`` rows measure a commit's round trip, not a disk flush). The size and the kill -9 trials are
about SQLite's file and run on SQLite alone.

Throughput cells run every writer process for ``--duration`` seconds after a common start barrier; each operation is
one transaction (one append of one event, or one inbox put), committed (per the durability) before the next starts.
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from urllib.parse import quote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import tables
from storage import Store, Target, TranscriptEvent
from tests.storage.workers import run_crash_trial, verify_after_crash

USER_TEXT = "Could you look up the opening hours of the library on Saturday and add them to my notes? " * 2
ASSISTANT_TEXT = ("Sure. The library opens at 10:00 and closes at 17:00 on Saturdays; I added that to your notes "
                  "under 'Weekend'. ") * 6
TOOL_ARGS = {"query": "central library saturday opening hours", "max_results": 5}
TOOL_RESULT = ("Central Library - Opening hours: Mon-Fri 09:00-20:00, Sat 10:00-17:00, Sun closed. " * 18)


def key(worker: int) -> str:
    return f"default.bench.dm.chat-{worker:016x}"


def _throughput_worker(path, op, durability, duration, barrier, results, worker):
    async def run():
        store = await Store.open(path, durability)
        sid = (await store.sessions.get_or_create(key(worker), {})).session_id
        barrier.wait(timeout=60)
        latencies, n = [], 0
        end = time.perf_counter() + duration
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            if op == "append":
                await store.sessions.append(sid, [TranscriptEvent("user", "message", {"text": USER_TEXT})])
            else:
                await store.inbox.put(key(worker), "bench", f"{worker}-{n}", {"text": USER_TEXT})
            latencies.append(time.perf_counter() - t0)
            n += 1
        await store.close()
        return latencies
    results.put(asyncio.run(run()))


class Places:
    """Where a measurement's store lives: ``places.new(name)`` a fresh SQLite file in ``workdir``, or (``dsn``) a
    fresh schema of that PostgreSQL database, as the libpq URL Store.open takes."""

    def __init__(self, workdir: str, dsn: str | None = None) -> None:
        self.workdir, self.dsn = workdir, dsn

    def new(self, name: str) -> str:
        if self.dsn is None:
            return os.path.join(self.workdir, f"{name}.db")
        import psycopg
        schema = "bench_" + "".join(c if c.isalnum() else "_" for c in name) + f"_{os.getpid()}_{time.time_ns()}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        joiner = "&" if "?" in self.dsn else "?"
        return f"{self.dsn}{joiner}options={quote(f'-csearch_path={schema}')}"


def throughput(places, op, durability, writers, duration):
    path = places.new(f"tp-{op}-{durability}-{writers}")
    asyncio.run(_prepare(path, durability))
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(writers), ctx.Queue()
    procs = [ctx.Process(target=_throughput_worker, args=(path, op, durability, duration, barrier, results, w))
             for w in range(writers)]
    for p in procs:
        p.start()
    latencies = []
    for _ in procs:
        latencies.extend(results.get(timeout=duration + 120))
    for p in procs:
        p.join()
    latencies.sort()
    return {"ops_per_s": len(latencies) / duration,
            "p50_ms": 1000 * latencies[len(latencies) // 2],
            "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)]}


async def _prepare(path, durability):
    async with await Store.open(path, durability):
        pass  # create and migrate once, so the timed part measures only the operations


def _turn_events(i):
    call_id = f"call-{i}"
    return [TranscriptEvent("user", "message", {"text": USER_TEXT}, f"turn-{i}"),
            TranscriptEvent("assistant", "tool_call", {"name": "web_search", "arguments": TOOL_ARGS, "id": call_id},
                            f"turn-{i}"),
            TranscriptEvent("tool", "tool_result", {"name": "web_search", "content": TOOL_RESULT, "id": call_id},
                            f"turn-{i}"),
            TranscriptEvent("assistant", "message", {"text": ASSISTANT_TEXT}, f"turn-{i}")]


async def load_time(places, events=10_000):
    path = places.new("load")
    async with await Store.open(path) as store:
        sid = (await store.sessions.get_or_create(key(0), {})).session_id
        turn = 0
        while turn * 4 < events:
            batch = [e for i in range(turn, turn + 25) for e in _turn_events(i)]
            await store.sessions.append(sid, batch)
            turn += 25
    async with await Store.open(path) as store:  # a fresh connection: what a restarted session actor sees
        timings = {}
        for label, last_n in (("full", None), ("last 50", 50)):
            runs = []
            for _ in range(5):
                t0 = time.perf_counter()
                loaded = await store.sessions.load(sid, last_n=last_n)
                runs.append(time.perf_counter() - t0)
            timings[label] = (statistics.median(runs), len(loaded))
        t0 = time.perf_counter()
        hits = await store.sessions.search("library saturday")
        timings["search"] = (time.perf_counter() - t0, len(hits))
    return timings


async def size_per_turns(workdir, turns=1000):
    path = os.path.join(workdir, "size.db")
    async with await Store.open(path) as store:
        sid = (await store.sessions.get_or_create(key(0), {})).session_id
        request = {"model": "m", "messages": [{"role": "user", "content": USER_TEXT}] * 8 +
                   [{"role": "assistant", "content": ASSISTANT_TEXT}] * 2, "tools": [{"name": "web_search"}]}
        for i in range(turns):
            seq, _ = await store.inbox.put(key(0), "bench", f"m{i}", {"text": USER_TEXT, "user_name": "Ann"})
            await store.inbox.take(seq)
            await store.sessions.append(sid, _turn_events(i))
            await store.sessions.put_request(sid, f"turn-{i}", request)
            ob = await store.ledger.record_obligation(key(0), f"m{i}", Target("bench", "c1", reply_to=f"m{i}"),
                                                      ASSISTANT_TEXT, claim=True)
            await store.ledger.record_part(ob.obligation_id, ob.fence, 0, f"p{i}")
            await store.ledger.mark_delivered(ob.obligation_id, ob.fence)
            await store.inbox.done(seq)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    layers = {}
    for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
        layer = ("search index" if name.startswith("transcript_fts") else
                 "transcript" if name.startswith(("transcript", "sqlite_autoindex_transcript")) else
                 "api sidecar" if "api_sidecar" in name else
                 "inbox" if "inbox" in name else
                 "ledger" if "obligation" in name else "other")
        layers[layer] = layers.get(layer, 0) + size
    conn.close()
    return os.path.getsize(path), layers, request


def crash_trials(workdir, trials, trials_per_file=25):
    """Kill -9 trials; each file takes ``trials_per_file`` crashes (every check re-reads the whole file, so one
    file for all trials would make the run quadratic)."""
    rng = random.Random(7)
    in_txn, commits, t0 = 0, 0, time.perf_counter()
    for trial in range(trials):
        if trial % trials_per_file == 0:
            path, reported = os.path.join(workdir, f"crash-{trial}.db"), []
        durability = "full" if trial % 2 else "normal"
        kill_after = 0 if trial % trials_per_file == 0 else rng.randint(1, 60)  # 0: while it opens / migrates
        lines = run_crash_trial(path, trial, kill_after, durability, in_transaction=trial % 3 != 0)
        in_txn += bool(lines) and lines[-1] == "tick 1"
        commits += sum(1 for line in lines if not line.startswith("tick"))
        reported.extend(lines)
        verify_after_crash(path, reported)
    return {"trials": trials, "killed_inside_a_transaction": in_txn, "reported_commits_verified": commits,
            "seconds": time.perf_counter() - t0}


def postgresql_dsn(args):
    """(the DSN to measure on, the server started here or None)."""
    if args.dsn:
        return args.dsn, None
    from tests.servers.postgresql import PostgreSQL
    server = PostgreSQL().start()
    dsn = server.dsn(server.create_database())
    return dsn.replace("@", f":{quote(server.password, safe='')}@", 1), server


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per throughput cell (default 3)")
    parser.add_argument("--writers", type=int, default=8, help="processes in the concurrent cells (default 8)")
    parser.add_argument("--crash-trials", type=int, default=300, help="kill -9 trials (default 300)")
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="sqlite",
                        help="where the throughput and load cells run (default: %(default)s)")
    parser.add_argument("--dsn", metavar="URL", help="with --backend postgresql/both: the database to measure on "
                        "(default: a throwaway server on loopback started here)")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="bench-storage-")
    started = time.perf_counter()
    server = None
    try:
        backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
        places = {}
        if "sqlite" in backends:
            places["sqlite"] = Places(workdir)
        if "postgresql" in backends:
            dsn, server = postgresql_dsn(args)
            places["postgresql"] = Places(workdir, dsn)
        print(f"sqlite {sqlite3.sqlite_version}, python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
              f"files in {workdir}" + (", postgresql on loopback" if server else "") + "\n")
        columns = ["backend", "operation", "durability", "writers", "ops/s", "p50 ms", "p99 ms"]
        with tables.growing(columns, f"{'backend':<10} {'operation':<12} {'durability':<10} {'writers':>7} "
                            f"{'ops/s':>9} {'p50 ms':>8} {'p99 ms':>8}", right=tuple(columns[3:])) as add:
            for op in ("append", "inbox put"):
                for durability in ("normal", "full"):
                    for writers in (1, args.writers):
                        for backend in backends:   # each backend's row beside the other's
                            r = throughput(places[backend], op.split()[0], durability, writers, args.duration)
                            add([backend, op, durability, writers, f"{r['ops_per_s']:.0f}", f"{r['p50_ms']:.2f}",
                                 f"{r['p99_ms']:.2f}"],
                                f"{backend:<10} {op:<12} {durability:<10} {writers:>7} {r['ops_per_s']:>9.0f} "
                                f"{r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f}")
        for backend in backends:
            timings = asyncio.run(load_time(places[backend]))
            print(f"\nload of a 10,000-event transcript on {backend} (fresh connection, median of 5)")
            for label, (seconds, n) in timings.items():
                print(f"  {label:<8} {seconds * 1000:8.1f} ms  ({n} {'hits' if label == 'search' else 'events'})")
        if "sqlite" not in backends:
            print(f"\ntotal {time.perf_counter() - started:.0f} s")
            return
        total, layers, request = asyncio.run(size_per_turns(workdir))
        print("\nsize per 1,000 turns (user msg + tool call + tool result + assistant msg; plus per turn: one inbox "
              f"row, one delivered obligation, one {len(repr(request)) // 1024} KB sidecar request)")
        print(f"  database file     {total / 2**20:8.2f} MiB")
        for layer, size in sorted(layers.items(), key=lambda kv: -kv[1]):
            print(f"  {layer:<17} {size / 2**20:8.2f} MiB")
        if args.crash_trials:
            r = crash_trials(workdir, args.crash_trials)
            print(f"\nkill -9 trials: {r['trials']} (half normal, half full durability), "
                  f"{r['killed_inside_a_transaction']} killed inside a transaction, "
                  f"{r['reported_commits_verified']} reported commits all found, integrity_check ok every time, "
                  f"{r['seconds']:.0f} s")
        print(f"\ntotal {time.perf_counter() - started:.0f} s")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
