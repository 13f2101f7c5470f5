"""The scheduler: runs the ``[cron.NAME]`` jobs on their schedules (docs/cron.md). A leaf child of the root, present
when jobs are configured.

State: the jobs (the configuration's, checked when it was loaded), when this incarnation started (times of a
schedule before it fell while the gateway was down: the job's catch-up rule decides them), the doorbells it could
not ring yet (no directory), and the runs it made (shown in ``tree`` and ``status``). Everything else is in storage:
each job's cursor and pause, and every run's claim (storage/cron.py).

Messages it takes:
  Started          open storage, note jobs seen for the first time (they start from now), tick at once
  timer tick       every TICK_S, when a job has a time due: for each job, what ``plan`` (actors/scheduling/
                   schedule.py) says; the runs are claimed, their prompts put in the inbox and the cursors moved in
                   one transaction; then the sessions are rung
  timer prune      hourly: runs older than [storage] inbox_retention_days are deleted (history only)
  CronRunRequest   ``cron run NAME``: a manual run, claimed under its own id, whatever the schedule and the pause
  Directory        the doorbells held for want of an address are rung
  StopIntake       a drain began: no more runs (the times that pass are missed, for the next instance to decide)
  ConfigChanged    a reload: the jobs are the new configuration's; one added or changed looks at its schedule from
                   now on (storage/cron.py start_from), one taken out stops; runs already claimed are not undone
Messages it sends: InboxDoorbell(internal=True) to the shard of each run's session (or the session supervisor
while the shard restarts: actors/adapters/doorbells.py), CronRunReport to the asker of a manual run.

What survives kill -9: every run whose claim committed, with its inbox row: the restarted shards ring the sessions
with rows waiting, so a doorbell lost with this process costs nothing. A tick killed before its commit left no claim
and no cursor: the next incarnation finds those times before its start, i.e. missed, and applies the catch-up rule.
So each time of a schedule runs at most once, and a time is never lost silently: it runs, or it is recorded skipped.
The answer goes out like any reply (the session's turn, the delivery ledger, the sweeper after a crash).
"""
from __future__ import annotations

import dataclasses
import time
import uuid

from actors.adapters.doorbells import Doorbells, InternalDoorbells
from actors.messages import CronRunReport, CronRunRequest
from actors.scheduling.jobs import manual_run_id, run_item, schedule_run_id, validate_jobs
from actors.scheduling.schedule import plan
from common.config import setting
from storage import RunClaim
from supervision.actor import GatewayActor
from supervision.storage_access import StoreUser

TICK_S = 1.0                  # cron's finest time is a second
PRUNE_INTERVAL_S = 3600.0
MAX_WAITING = 10              # scheduled runs of one conversation left unanswered before the next is skipped


class Cron(InternalDoorbells, StoreUser, GatewayActor):
    uses_bridge = True

    def __init__(self):
        super().__init__()
        self.jobs: dict = {}
        self.started_at = 0.0
        self.doorbells = Doorbells()
        self.runs_made = 0
        self.skipped = 0
        self.cursors: dict[str, float] = {}   # each job's cursor as last read or written: is anything due?

    def on_start(self, args) -> None:
        self.jobs = validate_jobs(self.config)
        self.started_at = time.time()
        self.open_store()
        if self.jobs:
            self.db(self.store.cron.ensure_jobs(self.jobs, self.started_at))
        self.after(60.0, "prune")
        self.on_timer_tick(None)

    def on_config_changed(self, old: dict) -> None:
        before, self.jobs = (old.get("cron") or {}), validate_jobs(self.config)   # checked by the reload already
        fresh = [name for name, table in (self.config.get("cron") or {}).items() if before.get(name) != table]
        if fresh:
            self.db(self.store.cron.start_from(fresh, time.time()))
            for name in fresh:
                self.cursors.pop(name, None)
        self.log.info("cron: %d job(s) after a reload (%s)", len(self.jobs), ", ".join(self.jobs) or "none")

    def on_stop(self) -> None:
        self.close_store()

    def describe(self):
        node = super().describe()
        return dataclasses.replace(node, facts=(("jobs", len(self.jobs)), ("runs", self.runs_made),
                                                ("skipped", self.skipped)))

    # ------------------------------------------------------------------------------------------------ ticks
    def on_timer_tick(self, _data) -> None:
        self.after(TICK_S, "tick")
        now = time.time()
        if self.jobs and not self.intake_stopped and self.anything_due(now):
            self.run_due(now)

    def anything_due(self, now: float) -> bool:
        """Whether a job has a time due after its cursor as last known. Storage is read only then: a cursor moved
        since by ``cron resume`` is only further on, and a pause matters only to a time that is due."""
        for job in self.jobs.values():
            due = job.schedule.next_after(self.cursors.get(job.name, 0.0))
            if due is not None and due <= now:
                return True
        return False

    def run_due(self, now: float) -> None:
        states = self.db(self.store.cron.states())
        claims, cursors = [], {}
        for job in self.jobs.values():
            state = states.get(job.name)
            cursor = self.cursors[job.name] = state.checked_until if state is not None else self.started_at
            active = job.enabled and not (state is not None and state.paused)
            decided = plan(job.schedule, cursor, self.started_at, now, job.catch_up, active=active)
            if not decided.changed:
                continue
            cursors[job.name] = self.cursors[job.name] = decided.cursor
            for run in decided.runs:
                run_id = schedule_run_id(job.name, run.at)
                claims.append(RunClaim(run_id, job.name, "schedule", run.at, run_item(job, run_id, now),
                                       caught_up=run.caught_up, missed=run.missed))
            if decided.skipped is not None:
                missed = decided.skipped
                claims.append(RunClaim(schedule_run_id(job.name, missed.at), job.name, "schedule", missed.at,
                                       caught_up=True, missed=missed.missed,
                                       reason=f"missed while the gateway was down ({missed.missed} time(s)); "
                                              f"catch_up = \"skip\""))
        if not cursors:
            return
        results = self.db(self.store.cron.claim(claims, cursors, MAX_WAITING, now))
        for claim, result in zip(claims, results):
            if result.inserted:
                self.claimed(claim, result)

    def claimed(self, claim: RunClaim, result) -> None:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(claim.scheduled_at))
        if result.outcome == "skipped":
            self.skipped += 1
            self.log.warning("cron: %s at %s UTC skipped: %s", claim.job, when, result.reason)
            return
        self.runs_made += 1
        if claim.caught_up:
            self.log.warning("cron: %s: %d time(s) missed while the gateway was down; running the latest (%s UTC) "
                             "once (catch_up = \"latest\")", claim.job, claim.missed, when)
        else:
            self.log.info("cron: %s: run %s stored as inbox #%s", claim.job, result.run_id, result.inbox_seq)
        self.ring(result.session_key, result.inbox_seq)

    # --------------------------------------------------------------------------------------------- manual
    def on_CronRunRequest(self, message: CronRunRequest, sender) -> None:
        job = self.jobs.get(message.job)
        if job is None:
            known = ", ".join(sorted(self.jobs)) or "none"
            self.send(sender, CronRunReport(False, message.job, error=f"no job {message.job!r} (configured: {known})"))
            return
        if self.intake_stopped:
            self.send(sender, CronRunReport(False, job.name, error="the gateway is draining; it takes no new runs"))
            return
        now = time.time()
        run_id = manual_run_id(job.name, uuid.uuid4().hex[:12])
        claim = RunClaim(run_id, job.name, "manual", now, run_item(job, run_id, now), reason="cron run")
        [result] = self.db(self.store.cron.claim([claim], {}, MAX_WAITING, now))
        if result.outcome != "injected":
            self.send(sender, CronRunReport(False, job.name, run_id, error=result.reason or "not run"))
            return
        self.claimed(claim, result)
        self.send(sender, CronRunReport(True, job.name, run_id, result.session_key, result.inbox_seq))

    # ---------------------------------------------------------------------------------------- housekeeping
    def on_timer_prune(self, _data) -> None:
        self.after(PRUNE_INTERVAL_S, "prune")
        removed = self.db(self.store.cron.purge(setting(self.config, "storage", "inbox_retention_days") * 86400))
        if removed:
            self.log.info("cron: retention removed %d run record(s)", removed)
