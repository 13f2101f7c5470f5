"""``run_gateway.py cron ...``: the scheduled jobs of ``[cron.NAME]`` (docs/cron.md).

    cron list              every job: its schedule, next time, catch-up rule, pause, and its latest runs
    cron run NAME          run NAME once, now, under a run id of its own (its schedule and pause untouched)
    cron pause NAME        no runs of NAME until it is resumed (kept in the database: a restart keeps it paused)
    cron resume NAME       runs again from now on; the times that passed while paused are not caught up

``pause`` and ``resume`` write the database, beside a live gateway (WAL): the scheduler reads them at its next tick,
within a second. ``run`` goes through the running gateway's scheduler; with none running, the run is claimed and its
prompt stored here, and the gateway answers it when it next starts.
"""
from __future__ import annotations

import asyncio
import time
import uuid

from actors.cron import MAX_WAITING
from actors.messages import CronRunReport, CronRunRequest
from actors.scheduling.jobs import manual_run_id, run_item, validate_jobs
from common.config import ConfigError
from daemon.cli_output import config_failure, fail, out
from daemon.cli_parsing import add_json, command
from daemon.cli_storage import run_on_store
from supervision.storage_access import store_exists, store_location
from storage import RunClaim, Store, StorageError
from daemon.admin import AdminClient, AdminError, NoGateway

RUNS_SHOWN = 3


def add_parsers(sub) -> None:
    cron = command(sub, "cron", "scheduled jobs: list, run NAME now, pause NAME, resume NAME",
                   "The scheduled jobs of [cron.NAME] (docs/cron.md): each runs its prompt as an internal message of\n"
                   "its chat on its schedule, and the answer goes to that chat like any reply. A time missed while\n"
                   "the gateway was down follows the job's catch_up (latest: the most recent runs once; skip: none).",
                   "cron list\ncron run morning\ncron pause morning")
    csub = cron.add_subparsers(dest="action", metavar="ACTION")
    listing = command(csub, "list", "every job, its next time and its latest runs (the default)",
                      "Every configured job: schedule and time zone, where its answer goes, its next time, its\n"
                      "catch-up rule, whether it is paused, and its latest runs (run, caught up or skipped; answered\n"
                      "or waiting).", "cron list\ncron list --runs 10 --json")
    listing.add_argument("--runs", type=int, default=RUNS_SHOWN, metavar="N",
                         help="latest runs shown per job (default: %(default)s)")
    actions = {"run": ("run NAME once, now, under its own run id",
                       "Run the job once, now: its prompt goes to its chat's session as a scheduled run does, under\n"
                       "a run id of its own. Its schedule and its pause are untouched. With no gateway running, the\n"
                       "run is stored and answered when the gateway next starts."),
               "pause": ("no runs of NAME until resumed (durable)",
                         "Pause the job: no run until `cron resume`, across restarts too. Takes effect within a\n"
                         "second (the scheduler's next tick); a run already stored is still answered."),
               "resume": ("runs again from now on",
                          "Resume a paused job. The times that passed while it was paused are not caught up.")}
    parsers = []
    for action, (text, what) in actions.items():
        p = command(csub, action, text, what, f"cron {action} morning")
        p.add_argument("name", metavar="NAME", help="the job's name, as in [cron.NAME]")
        parsers.append(p)
    add_json(cron, listing, *parsers)


def cmd_cron(config: dict, args) -> int:
    try:
        jobs = validate_jobs(config, time.time())
    except ConfigError as exc:   # checked at load already; here for a caller that skipped that
        return config_failure(args, exc)
    action = args.action or "list"
    if action == "list":
        return _list(config, args, jobs)
    job = jobs.get(args.name)
    if job is None:
        return fail(args, f"error: no job {args.name!r} in the configuration (configured: "
                          f"{', '.join(sorted(jobs)) or 'none'})")
    if action == "run":
        return _run(config, args, job)
    paused = action == "pause"
    return run_on_store(config, args, lambda store: _set_paused(store, job.name, paused),
                        lambda r: f"{r['job']}: {'paused' if r['paused'] else 'resumed: runs again from now on'}")


async def _set_paused(store, job: str, paused: bool) -> dict:
    state = await store.cron.set_paused(job, paused)
    return {"ok": True, "job": job, "paused": state.paused}


# ----------------------------------------------------------------------------------------------------- list

def _list(config: dict, args, jobs: dict) -> int:
    path = store_location(config)
    states, runs = {}, {}
    if store_exists(path):
        async def read():
            store = await Store.open(path, config["storage"]["durability"])
            try:
                return (await store.cron.states(),
                        {name: await store.cron.runs(name, max(0, args.runs)) for name in jobs})
            finally:
                await store.close()
        try:
            states, runs = asyncio.run(read())
        except StorageError as exc:
            return fail(args, f"error: {exc}")
    now = time.time()
    rows = []
    for name, job in jobs.items():
        state = states.get(name)
        following = job.schedule.next_after(now)
        rows.append({"job": name, "schedule": job.schedule.expression, "timezone": job.schedule.timezone,
                     "adapter": job.adapter, "chat": job.chat, "thread": job.thread, "profile": job.profile,
                     "catch_up": job.catch_up, "enabled": job.enabled, "paused": bool(state and state.paused),
                     "next_at": following, "next_in_s": round(following - now, 3) if following else None,
                     "session_key": job.session_key(),
                     "runs": [_run_row(r) for r in runs.get(name, [])]})
    return out(args, {"ok": True, "jobs": rows}, 0, _render_list(rows))


def _run_row(run) -> dict:
    return {"run_id": run.run_id, "origin": run.origin, "scheduled_at": run.scheduled_at, "outcome": run.outcome,
            "caught_up": run.caught_up, "missed": run.missed, "reason": run.reason, "inbox_seq": run.inbox_seq,
            "inbox_state": run.inbox_state, "claimed_at": run.claimed_at}


def _utc(ts) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts)) if ts else "-"


def _render_list(rows: list) -> str:
    if not rows:
        return "no jobs: add [cron.NAME] tables to the configuration (docs/cron.md)"
    lines = []
    for r in rows:
        status = "disabled" if not r["enabled"] else "PAUSED" if r["paused"] else f"next {_utc(r['next_at'])}"
        lines.append(f"{r['job']}  {r['schedule']!r} ({r['timezone']})  -> {r['adapter']}:{r['chat']}"
                     f"{':' + r['thread'] if r['thread'] else ''}  catch_up={r['catch_up']}  {status}")
        for run in r["runs"]:
            what = ("skipped: " + (run["reason"] or "") if run["outcome"] == "skipped" else
                    f"{'caught up, ' if run['caught_up'] else ''}{run['inbox_state'] or 'pruned'}")
            lines.append(f"    {run['origin']:<8} {_utc(run['scheduled_at'])}  {what}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------ run

def _run(config: dict, args, job) -> int:
    try:
        client = AdminClient(config)
    except NoGateway:
        return _run_offline(config, args, job)
    try:
        report = client.ask_actor("cron", CronRunRequest(job.name), CronRunReport)
    except AdminError as exc:
        return fail(args, f"error: {exc} (does the running gateway have [cron.{job.name}]? restart it after "
                          f"adding a job)")
    if report is None:
        return fail(args, "error: the gateway's scheduler did not answer within 10s")
    if not report.ok:
        return fail(args, f"error: {report.error}")
    return out(args, {"ok": True, "job": job.name, "run_id": report.run_id, "inbox_seq": report.inbox_seq,
                      "queued": False}, 0, f"{job.name}: run {report.run_id} started; its answer goes to "
                                           f"{job.adapter}:{job.chat}")


def _run_offline(config: dict, args, job) -> int:
    async def claim(store) -> dict:
        now = time.time()
        run_id = manual_run_id(job.name, uuid.uuid4().hex[:12])
        [result] = await store.cron.claim([RunClaim(run_id, job.name, "manual", now, run_item(job, run_id, now),
                                                    reason="cron run")], {}, MAX_WAITING, now)
        return {"ok": result.outcome == "injected", "job": job.name, "run_id": run_id,
                "inbox_seq": result.inbox_seq, "queued": True, "reason": result.reason}
    return run_on_store(config, args, claim,
                        lambda r: (f"{job.name}: no gateway running; run {r['run_id']} is stored and answered when "
                                   f"the gateway next starts" if r["ok"] else f"{job.name}: not run: {r['reason']}"))
