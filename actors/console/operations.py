"""What the console reads from and does to the store: the admin CLI's own functions (storage/cli.py for sessions and
deliveries, the access store for pairing), so that a page and a command have one implementation between them.

Each function takes the open store, the request's arguments (a dict of strings) and the configured secrets (what a
background task's prompt and result are redacted of, as `tasks show` prints them) and returns a JSON-able dict;
bad arguments raise ``BadRequest`` (answered 400), the store's NotFound and IllegalTransition are answered 404 and
409 by the actor.
"""
from __future__ import annotations

import time

from storage import cli as storage_cli

LIST_LIMIT = 200
SESSION_STATES = ("active", "suspended", "reset", "closed")
DELIVERY_STATES = ("pending", "attempting", "delivered", "failed", "abandoned")
TASK_STATES = ("started", "done", "failed", "cancelled", "kept")
TASK_RESULT_CHARS = 20_000   # of each result in a list of tasks: a page of 200 long results stays a few MiB at most


class BadRequest(ValueError):
    pass


def _limit(args: dict, default: int = 50) -> int:
    try:
        return max(1, min(LIST_LIMIT, int(args.get("limit", default))))
    except ValueError:
        raise BadRequest("limit must be a number") from None


def _choice(args: dict, name: str, allowed: tuple):
    value = args.get(name) or None
    if value is not None and value not in allowed:
        raise BadRequest(f"{name} must be one of {', '.join(allowed)}")
    return value


def needed(args: dict, name: str) -> str:
    value = (args.get(name) or "").strip()
    if not value:
        raise BadRequest(f"{name} is needed")
    return value


async def deliveries(store, args: dict, secrets: tuple = ()) -> dict:
    return await storage_cli.deliveries(store, state=_choice(args, "state", DELIVERY_STATES), limit=_limit(args))


async def sessions(store, args: dict, secrets: tuple = ()) -> dict:
    return await storage_cli.sessions_list(store, state=_choice(args, "state", SESSION_STATES), limit=_limit(args))


async def transcript(store, args: dict, secrets: tuple = ()) -> dict:
    return await storage_cli.session_show(store, needed(args, "session"), last_n=_limit(args, 100), secrets=secrets)


async def tasks(store, args: dict, secrets: tuple = ()) -> dict:
    """Background tasks, whole (a kept result too): the chat's that ``session`` names, else every chat's newest (of
    ``state`` if given: ``kept`` lists the delegation records), as `tasks list|show` read them."""
    if args.get("session"):
        listed = await storage_cli.chat_tasks(store, needed(args, "session"), secrets, _limit(args, 20))
    else:
        found = await store.tasks.recent(_limit(args), _choice(args, "state", TASK_STATES))
        listed = {"tasks": [storage_cli.task_row(t, secrets, whole=True) for t in found]}
    for row in listed["tasks"]:
        if row["result"] is not None and len(row["result"]) > TASK_RESULT_CHARS:   # `tasks show` prints it whole
            row["result"] = (row["result"][:TASK_RESULT_CHARS] + f"\u2026 (cut at {TASK_RESULT_CHARS} of "
                             f"{len(row['result'])} characters: `tasks show {row['task_key']}` prints it whole)")
    return listed


async def search(store, args: dict, secrets: tuple = ()) -> dict:
    return await storage_cli.sessions_search(store, needed(args, "q"))


async def pairing(store, args: dict, secrets: tuple = ()) -> dict:
    """What `pair list` shows: pending codes (with how long each has left) and the grants."""
    now = time.time()
    return {"pending": [dict(vars(c), expires_in_s=round(c.expires_at - now)) for c in await store.access.pending(now)],
            "grants": [vars(g) for g in await store.access.grants()]}


async def cron(store, jobs: dict, now: float, runs_shown: int = 5) -> dict:
    """What `cron list` shows: each configured job, its schedule, next run, pause, and its newest runs."""
    states = await store.cron.states()
    rows = []
    for name, job in jobs.items():
        state, following = states.get(name), job.schedule.next_after(now)
        rows.append({"job": name, "schedule": job.schedule.expression, "timezone": job.schedule.timezone,
                     "adapter": job.adapter, "chat": job.chat, "enabled": job.enabled,
                     "paused": bool(state and state.paused), "next_at": following,
                     "runs": [vars(run) for run in await store.cron.runs(name, runs_shown)]})
    return {"jobs": rows}


READS = {"deliveries": deliveries, "sessions": sessions, "transcript": transcript, "search": search, "pairing": pairing,
         "tasks": tasks}


async def delivery_retry(store, args: dict, who: str) -> dict:
    return await storage_cli.delivery_retry(store, needed(args, "id"))


async def delivery_abandon(store, args: dict, who: str) -> dict:
    return await storage_cli.delivery_abandon(store, needed(args, "id"))


async def pairing_approve(store, args: dict, who: str) -> dict:
    return vars(await store.access.approve(needed(args, "code"), by=who))


async def pairing_deny(store, args: dict, who: str) -> dict:
    return vars(await store.access.deny(needed(args, "code")))


async def session_suspend(store, args: dict, who: str) -> dict:
    return await storage_cli.session_set_state(store, needed(args, "session"), suspended=True)


async def session_resume(store, args: dict, who: str) -> dict:
    return await storage_cli.session_set_state(store, needed(args, "session"), suspended=False)


ACTIONS = {"deliveries.retry": delivery_retry, "deliveries.abandon": delivery_abandon,
           "pairing.approve": pairing_approve, "pairing.deny": pairing_deny,
           "sessions.suspend": session_suspend, "sessions.resume": session_resume}


def described(action: str, args: dict) -> str:
    """The action and its target, for the log line that says who did it."""
    target = args.get("id") or args.get("code") or args.get("session") or ""
    return f"{action} {target[:64]!r}"
