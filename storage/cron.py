"""Scheduled jobs: how far each job's schedule was looked at, whether it is paused, and its runs: ``Store.cron``.

A run is claimed by inserting its row: ``UNIQUE (job, origin, scheduled_at)`` makes a second claim of the same time
impossible, also by two processes at once. The claim, the prompt's inbox row and the job's cursor
(``checked_until``: every time of its schedule up to there has been decided, run or skipped) commit in ONE
transaction (``claim``): after a kill -9 either all three are on disk or none is. So a restart never runs a time
twice (the claim is there, and the cursor is past it) and never loses one it claimed (the inbox row is there too,
and the shards ring every session with waiting rows when they start). A time whose claim never committed lies after
the cursor: the next scheduler finds it, and its job's catch-up rule decides (actors/scheduling/schedule.py).

The inbox rows are the gateway's own (``platform = 'cron'``, the message id made from the job and the time), so an
injection repeated after a crash hits the inbox's dedup, and no platform's message ids can collide with them.

What survives kill -9: every call that returned (one transaction each).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable, Optional

from .db import Database, fetch_all, fetch_one
from .inbox import InboundItem, _insert, _prepare

CRON_PLATFORM = "cron"     # the inbox's platform column for the rows the scheduler writes
_RUN_COLUMNS = ("run_id, job, origin, scheduled_at, outcome, caught_up, missed, reason, session_key, inbox_seq, "
                "claimed_at")


@dataclass(frozen=True)
class JobState:
    job: str
    checked_until: float           # wall-clock: every time of the schedule up to here was decided
    paused: bool
    paused_at: Optional[float]


@dataclass(frozen=True)
class RunClaim:
    """One time of a job to claim: with ``item`` (the prompt's inbox row) it runs; without, it is recorded as
    skipped (missed while the gateway was down, under ``catch_up = "skip"``)."""
    run_id: str
    job: str
    origin: str                    # schedule | manual
    scheduled_at: float
    item: Optional[InboundItem] = None
    caught_up: bool = False        # a time missed while down, run late by ``catch_up = "latest"``
    missed: int = 0                # times of the schedule that fell while the gateway was down
    reason: Optional[str] = None


@dataclass(frozen=True)
class CronRun:
    run_id: str
    job: str
    origin: str
    scheduled_at: float
    outcome: str                   # injected | skipped
    caught_up: bool
    missed: int
    reason: Optional[str]
    session_key: Optional[str]
    inbox_seq: Optional[int]
    claimed_at: float
    inbox_state: Optional[str] = None   # received | taken | done | dropped (None: skipped, or pruned)


@dataclass(frozen=True)
class Claimed:
    run_id: str
    inserted: bool                 # False: the time was claimed before (this call changed nothing for it)
    outcome: str
    session_key: Optional[str]
    inbox_seq: Optional[int]
    reason: Optional[str] = None


def _run(r: tuple) -> CronRun:
    return CronRun(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6], r[7], r[8], r[9], r[10],
                   r[11] if len(r) > 11 else None)


class CronStore:
    """Reached as ``Store.cron``; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def ensure_jobs(self, jobs: Iterable[str], now: Optional[float] = None) -> None:
        """Jobs seen for the first time start looking at their schedule from ``now``: a new job never runs the
        times before it existed."""
        now = time.time() if now is None else now
        names = sorted(set(jobs))

        async def do(conn):
            for job in names:
                await conn.execute("INSERT INTO cron_jobs (job, checked_until, updated_at) VALUES (?, ?, ?) "
                                   "ON CONFLICT (job) DO NOTHING", (job, now, now))
        await self._db.write(do)

    async def start_from(self, jobs: Iterable[str], now: Optional[float] = None) -> None:
        """Jobs a reload added or changed look at their schedule from ``now``: a time before the reload is neither
        run nor counted missed (a job taken out and put back does not catch up the times it was out)."""
        now = time.time() if now is None else now
        names = sorted(set(jobs))

        async def do(conn):
            for job in names:
                await conn.execute("INSERT INTO cron_jobs (job, checked_until, updated_at) VALUES (?, ?, ?) "
                                   "ON CONFLICT (job) DO UPDATE SET checked_until = MAX(cron_jobs.checked_until, "
                                   "excluded.checked_until), updated_at = excluded.updated_at", (job, now, now))
        await self._db.write(do)

    async def states(self) -> dict[str, JobState]:
        async def fetch(conn):
            rows = await fetch_all(conn, "SELECT job, checked_until, paused, paused_at FROM cron_jobs")
            return {r[0]: JobState(r[0], r[1], bool(r[2]), r[3]) for r in rows}
        return await self._db.read(fetch)

    async def set_paused(self, job: str, paused: bool, now: Optional[float] = None) -> JobState:
        """Pause or resume ``job``. Resuming moves its cursor to ``now``: the times that passed while it was paused
        are not caught up (a pause is the operator's choice, not downtime)."""
        now = time.time() if now is None else now

        async def do(conn):
            await conn.execute("INSERT INTO cron_jobs (job, checked_until, updated_at) VALUES (?, ?, ?) "
                               "ON CONFLICT (job) DO NOTHING", (job, now, now))
            if paused:
                await conn.execute("UPDATE cron_jobs SET paused = 1, paused_at = COALESCE(paused_at, ?), "
                                   "updated_at = ? WHERE job = ?", (now, now, job))
            else:
                await conn.execute("UPDATE cron_jobs SET checked_until = max(checked_until, ?), paused = 0, "
                                   "paused_at = NULL, updated_at = ? WHERE job = ? AND paused = 1", (now, now, job))
            r = await fetch_one(conn, "SELECT job, checked_until, paused, paused_at FROM cron_jobs WHERE job = ?",
                                (job,))
            return JobState(r[0], r[1], bool(r[2]), r[3])
        return await self._db.write(do)

    async def claim(self, claims: Iterable[RunClaim], cursors: Optional[dict] = None, max_waiting: int = 10,
                    now: Optional[float] = None) -> list[Claimed]:
        """Claim each run and put its prompt in the inbox, and move the jobs' cursors (``{job: time}``; a cursor
        never moves back), all in one transaction. A run whose conversation already has ``max_waiting`` of these
        rows unanswered is recorded as skipped instead (a schedule faster than its answers must not grow the inbox
        without end), and so is one whose conversation the operator suspended (it would answer each run with the
        suspension notice). A time claimed before is left as it was (``inserted=False``)."""
        now = time.time() if now is None else now
        prepared = [(c, _prepare(c.item) if c.item is not None else None) for c in claims]
        cursors = dict(cursors or {})

        async def do(conn):
            out = []
            for claim, row in prepared:
                existing = await fetch_one(conn, "SELECT run_id, outcome, session_key, inbox_seq, reason FROM "
                                                 "cron_runs WHERE run_id = ? OR (job = ? AND origin = ? AND "
                                                 "scheduled_at = ?)", (claim.run_id, claim.job, claim.origin,
                                                                       claim.scheduled_at))
                if existing is not None:
                    out.append(Claimed(existing[0], False, existing[1], existing[2], existing[3], existing[4]))
                    continue
                outcome, reason, key = ("injected", claim.reason, row[0]) if row else ("skipped", claim.reason, None)
                if row is not None:
                    waiting = (await fetch_one(conn, "SELECT COUNT(*) FROM inbox WHERE session_key = ? AND "
                                                     "state IN ('received', 'taken') AND platform = ?",
                                               (key, CRON_PLATFORM)))[0]
                    suspended = await fetch_one(conn, "SELECT 1 FROM sessions WHERE session_key = ? AND "
                                                      "state = 'suspended'", (key,))
                    if suspended is not None:   # the operator stopped it: no run, and no notice to the chat
                        outcome, reason = "skipped", "the conversation is suspended (`sessions resume` it)"
                    elif waiting >= max_waiting:
                        outcome, reason = "skipped", f"{waiting} scheduled runs of this conversation still unanswered"
                seq = None
                if outcome == "injected":
                    [(seq, _inserted)] = await _insert(conn, [row], now)
                await conn.execute(f"INSERT INTO cron_runs ({_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                   (claim.run_id, claim.job, claim.origin, claim.scheduled_at, outcome,
                                    int(claim.caught_up), claim.missed, reason, key, seq, now))
                out.append(Claimed(claim.run_id, True, outcome, key, seq, reason))
            for job, until in cursors.items():
                await conn.execute("INSERT INTO cron_jobs (job, checked_until, updated_at) VALUES (?, ?, ?) "
                                   "ON CONFLICT (job) DO UPDATE SET checked_until = max(cron_jobs.checked_until, "
                                   "excluded.checked_until), updated_at = excluded.updated_at", (job, until, now))
            return out
        return await self._db.write(do)

    async def runs(self, job: Optional[str] = None, limit: int = 20) -> list[CronRun]:
        """The newest runs (of ``job``, or of every job), newest first, each with its inbox row's state."""
        where, args = ("WHERE r.job = ?", (job,)) if job is not None else ("", ())
        columns = ", ".join(f"r.{c.strip()}" for c in _RUN_COLUMNS.split(","))

        async def fetch(conn):
            rows = await fetch_all(conn, f"SELECT {columns}, i.state FROM cron_runs r LEFT JOIN inbox i "
                                         f"ON i.seq = r.inbox_seq {where} ORDER BY r.claimed_at DESC, "
                                         f"r.scheduled_at DESC LIMIT ?", (*args, int(limit)))
            return [_run(r) for r in rows]
        return await self._db.read(fetch)

    async def purge(self, older_than_s: float, now: Optional[float] = None) -> int:
        """Delete runs claimed over ``older_than_s`` ago. Their times lie behind their job's cursor, which alone
        keeps them from being run again; the rows are the history ``cron list`` shows."""
        cutoff = (time.time() if now is None else now) - older_than_s

        async def do(conn):
            return (await conn.execute("DELETE FROM cron_runs WHERE claimed_at < ?", (cutoff,))).rowcount
        return await self._db.write(do)
