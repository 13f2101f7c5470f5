"""Code that runs in child processes (forked) for the multi-process tests and the benchmark."""
from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import signal
import sqlite3
import traceback
from collections import Counter

from storage import IllegalTransition, Store, Target, TranscriptEvent

SHARED_KEY = "default.test.group.chat-0000000000000001"
FILLER = "lorem ipsum dolor sit amet " * 40  # ~1 KB per event: keeps transactions long enough to be killed inside


def concurrent_writer(path: str, worker: int, rounds: int, barrier, result_path: str) -> None:
    """Hammer one file alongside other processes; report 'ok <stats>' or the traceback into result_path."""
    async def run():
        try:
            store = await Store.open(path)
        except BaseException:
            barrier.abort()  # the others fail fast with BrokenBarrierError instead of waiting for us forever
            raise
        lost_claims = 0
        barrier.wait(timeout=30)
        for i in range(rounds):
            info = await store.sessions.get_or_create(SHARED_KEY, {"worker": worker})
            await store.sessions.append(info.session_id, [
                TranscriptEvent("user", "message", {"text": f"w{worker} r{i} part{j}", "worker": worker, "round": i,
                                                    "part": j}) for j in range(3)])
            await store.inbox.put(SHARED_KEY, "test", f"shared-{i}", {"worker": worker})
            await store.inbox.put_many_and_commit_offset(
                [(SHARED_KEY, "test", f"own-{worker}-{i}", {"i": i})], f"adapter-{worker}", i)
            ob = await store.ledger.record_obligation(SHARED_KEY, f"in-{i}", Target("test", "c"), f"reply {i}")
            try:
                fence = await store.ledger.mark_attempting(ob.obligation_id)
                await store.ledger.record_part(ob.obligation_id, fence, 0, f"w{worker}")
                await store.ledger.mark_delivered(ob.obligation_id, fence)
            except IllegalTransition:
                lost_claims += 1  # another process claimed it first: exactly what must happen
        await store.close()
        return lost_claims

    try:
        lost = asyncio.run(run())
        outcome = f"ok {lost}"
    except BaseException:  # noqa: BLE001 - everything is reported to the parent
        outcome = "error\n" + traceback.format_exc()
    with open(result_path, "w") as f:
        f.write(outcome)


class TickingConnection:
    """Wraps the store's aiosqlite connection in the crash writer: after a random share of statements it writes
    'tick <in_transaction>' to the report pipe and goes on. The parent kills after a random number of lines, so
    the SIGKILL lands a few microseconds after a random statement: mostly inside a transaction."""

    def __init__(self, conn, report, rng: random.Random, share: float) -> None:
        self._conn, self._report, self._rng, self._share = conn, report, rng, share

    def _tick(self) -> None:
        if self._rng.random() < self._share:
            self._report(f"tick {int(self._conn.in_transaction)}")

    async def execute(self, *args):
        result = await self._conn.execute(*args)
        self._tick()
        return result

    async def execute_fetchall(self, *args):
        result = await self._conn.execute_fetchall(*args)
        self._tick()
        return result

    def __getattr__(self, name):
        return getattr(self._conn, name)


def crash_writer(path: str, report_fd: int, seed: int, durability: str = "normal") -> None:
    """Write forever, reporting each transaction on ``report_fd`` only after its commit returned.

    Lines: 'append <session_id> <batch> <first_seq> <n>', 'inbox <seed> <batch> <n>', 'ledger <id> <step>', and
    'tick <0|1>' from inside transactions (see TickingConnection). The parent SIGKILLs this process."""
    rng = random.Random(seed)

    def report(line: str) -> None:
        os.write(report_fd, (line + "\n").encode())  # < PIPE_BUF: atomic, never half a line

    async def run():
        store = await Store.open(path, durability)
        store._db._conn = TickingConnection(store._db._conn, report, random.Random(seed + 1), 0.05)
        info = await store.sessions.get_or_create(SHARED_KEY, {})
        batch = 0
        while True:
            batch += 1
            kind = rng.choice(("append", "append", "inbox", "ledger"))
            if kind == "append":
                n = rng.randint(1, 40)
                seqs = await store.sessions.append(info.session_id, [
                    TranscriptEvent("assistant", "message", {"text": FILLER, "n": n, "part": j},
                                    f"turn-{seed}-{batch}") for j in range(n)])
                report(f"append {info.session_id} {batch} {seqs[0]} {n}")
            elif kind == "inbox":
                n = rng.randint(1, 20)
                rows = [(SHARED_KEY, "test", f"{seed}-{batch}-{j}", {"text": FILLER, "batch": batch, "n": n})
                        for j in range(n)]
                await store.inbox.put_many_and_commit_offset(rows, f"adapter-{seed}", batch)
                report(f"inbox {seed} {batch} {n}")
            else:
                ob = await store.ledger.record_obligation(SHARED_KEY, f"{seed}-{batch}", Target("test", "c"), FILLER)
                report(f"ledger {ob.obligation_id} pending")
                fence = await store.ledger.mark_attempting(ob.obligation_id)
                report(f"ledger {ob.obligation_id} attempting")
                await store.ledger.record_part(ob.obligation_id, fence, 0, f"pm-{batch}")
                report(f"ledger {ob.obligation_id} part")
                await store.ledger.mark_delivered(ob.obligation_id, fence)
                report(f"ledger {ob.obligation_id} delivered")

    asyncio.run(run())


def run_crash_trial(path: str, seed: int, kill_after: int, durability: str = "normal",
                    in_transaction: bool = True) -> list[str]:
    """Start a crash_writer, SIGKILL it once it has written ``kill_after`` lines (0: at once, possibly while it
    opens or migrates the file), and return every line it wrote before dying (ticks included). With
    ``in_transaction`` the kill waits, past those lines, for a tick from inside a transaction."""
    read_fd, write_fd = os.pipe()
    proc = multiprocessing.get_context("fork").Process(target=crash_writer, args=(path, write_fd, seed, durability))
    proc.start()
    os.close(write_fd)
    lines: list[str] = []
    with os.fdopen(read_fd, "r") as reports:
        while len(lines) < kill_after or (kill_after and in_transaction and lines[-1] != "tick 1"):
            line = reports.readline()
            if not line:
                break  # the writer died on its own: the parent sees it in the exit code below
            lines.append(line.rstrip("\n"))
        os.kill(proc.pid, signal.SIGKILL)
        lines.extend(line.rstrip("\n") for line in reports)  # committed and reported before the kill landed
    proc.join()
    if proc.exitcode != -signal.SIGKILL:
        raise AssertionError(f"crash writer exited with {proc.exitcode} before it was killed")
    return lines


def verify_after_crash(path: str, reported: list[str]) -> dict:
    """Check a database after kill -9: integrity_check passes, it opens, every reported commit is there, every
    batch is all-or-nothing, and the dead writer's claims can be taken over. Returns a few counts. On PostgreSQL
    (``path`` a DSN) the server rolled back the dead writer's open transaction; there is no file to check."""
    if not path.startswith("postgresql://"):
        if not os.path.exists(path):
            assert not reported
            return {}
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        finally:
            conn.close()

    async def check():
        async with await Store.open(path) as store:
            info = await store.sessions.current(SHARED_KEY)
            events = await store.sessions.load(info.session_id) if info else []
            assert [e.seq for e in events] == list(range(1, len(events) + 1)), "transcript seqs have a gap"
            per_turn = Counter(e.turn_id for e in events)
            assert all(per_turn[e.turn_id] == e.payload["n"] for e in events), "a transcript batch is partly there"
            inbox = await store.inbox.rows_in_state(SHARED_KEY, ["received"])
            per_batch = Counter(row.platform_message_id.rsplit("-", 1)[0] for row in inbox)
            assert all(per_batch[row.platform_message_id.rsplit("-", 1)[0]] == row.payload["n"] for row in inbox), \
                "an inbox batch is partly there"
            for line in reported:
                kind, *rest = line.split()
                if kind == "tick":
                    continue
                if kind == "append":
                    first, n = int(rest[2]), int(rest[3])
                    got = events[first - 1:first - 1 + n]
                    assert len(got) == n and all(e.payload["n"] == n for e in got), f"lost: {line}"
                elif kind == "inbox":
                    seed, batch, n = rest
                    assert per_batch[f"{seed}-{batch}"] == int(n), f"lost: {line}"
                    offset = await store.inbox.get_offset(f"adapter-{seed}")
                    assert offset >= int(batch) and per_batch[f"{seed}-{offset}"] > 0, f"offset {offset}: {line}"
                else:
                    oid, state = rest
                    ob = await store.ledger.get(oid)
                    assert ob is not None, f"lost: {line}"
                    assert state == "pending" or ob.state in ("attempting", "delivered"), f"lost: {line}"
                    assert state not in ("part", "delivered") or ob.parts.get(0) is not None, f"lost: {line}"
                    assert state != "delivered" or ob.state == "delivered", f"lost: {line}"
            claimed = await store.ledger.sweep_recoverable({"test"})
            for ob in claimed:  # the killed writer's claims: its owner is dead, so they are recoverable
                await store.ledger.mark_delivered(ob.obligation_id, ob.fence)
            assert (await store.ledger.counts())["attempting"] == 0
            return {"events": len(events), "inbox": len(inbox), "reclaimed": len(claimed)}
    return asyncio.run(check())
