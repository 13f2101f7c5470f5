"""``run_gateway.py tasks ...``: the background tasks chats started with ``/bg`` (docs/background.md).

    tasks list             the newest tasks of every chat: number, state, chat, prompt
    tasks show N|KEY       one task whole: its prompt, state and result (a kept one's too: the result of a task
                           that finished after its chat's conversation was reset, never delivered there)

Reads the database beside a live gateway (WAL); writes nothing. What is printed is redacted as everything the
admin CLI prints (configured secrets and credential shapes).
"""
from __future__ import annotations

import time

from common.redact import configured_secrets
from daemon.cli_output import fail
from daemon.cli_parsing import add_json, command
from daemon.cli_storage import run_on_store
from storage import NotFound
from storage.cli import task_row
from storage.tasks import TASK_STATES

LISTED = 50


def add_parsers(sub) -> None:
    tasks = command(sub, "tasks", "background tasks (/bg): list, show N",
                    "The background tasks chats started with /bg (docs/background.md): each ran as its own turn\n"
                    "and its result went to its chat, or was kept here when the chat's conversation had been reset\n"
                    "since it started (state kept).", "tasks list\ntasks show 3")
    tsub = tasks.add_subparsers(dest="action", metavar="ACTION")
    listing = command(tsub, "list", "the newest tasks of every chat (the default)",
                      "The newest tasks, newest first: number (per chat), state, age, the chat's session key and the\n"
                      "prompt.", "tasks list\ntasks list --state kept --json")
    listing.add_argument("--state", choices=TASK_STATES, help="only tasks in this state")
    listing.add_argument("--limit", type=int, default=LISTED, metavar="N", help="at most N (default: %(default)s)")
    show = command(tsub, "show", "one task whole, with its result",
                   "One task: its chat, prompt, state, times, what its chat was sent and its whole result. Name it by\n"
                   "its number (when one chat only has a task of that number) or by its session key (`tasks list`).",
                   "tasks show 3\ntasks show default.telegram.dm.chat-1a2b3c.task-3")
    show.add_argument("task", metavar="N|KEY", help="the task's number, or its session key")
    add_json(tasks, listing, show)


def cmd_tasks(config: dict, args) -> int:
    secrets = configured_secrets(config)
    if (args.action or "list") == "list":
        state, limit = getattr(args, "state", None), max(1, getattr(args, "limit", LISTED))
        return run_on_store(config, args, lambda store: _list(store, state, limit, secrets), _render_list)
    ref = args.task.strip().lstrip("#")
    if not ref:
        return fail(args, "error: name a task by its number or its session key (`tasks list`)")
    return run_on_store(config, args, lambda store: _show(store, ref, secrets), _render_show)


async def _list(store, state, limit: int, secrets: list) -> dict:
    return {"ok": True, "tasks": [task_row(t, secrets) for t in await store.tasks.recent(limit, state)]}


async def _show(store, ref: str, secrets: list) -> dict:
    if ref.isdigit():
        found = await store.tasks.numbered(int(ref))
        if len(found) > 1:
            keys = ", ".join(t.task_key for t in found[:10])
            raise NotFound(f"{len(found)} chats have a task #{ref}: name one by its key ({keys})")
    else:
        task = await store.tasks.by_key(ref)
        found = [task] if task is not None else []
    if not found:
        raise NotFound(f"no task {ref!r} (`tasks list` shows them)")
    return {"ok": True, "task": task_row(found[0], secrets, whole=True)}


def _utc(ts) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts)) if ts else "-"


def _render_list(result: dict) -> str:
    if not result["tasks"]:
        return "no tasks (a chat starts one with /bg PROMPT)"
    return "\n".join(f"#{t['number']:<4} {t['state']:<9} {_utc(t['started_at'])}  {t['task_key']}  "
                     f"\u201c{' '.join(t['prompt'].split())[:60]}\u201d" for t in result["tasks"])


def _render_show(result: dict) -> str:
    t = result["task"]
    lines = [f"task #{t['number']} of {t['chat']} ({t['task_key']})", f"state:    {t['state']}"
             + (" (cancel asked)" if t["cancel_requested"] and t["state"] == "started" else ""),
             f"profile:  {t['profile']}", f"started:  {_utc(t['started_at'])}", f"ended:    {_utc(t['finished_at'])}",
             f"prompt:   {t['prompt']}"]
    if t["state"] == "kept":
        lines.append("kept:     it finished after its chat's conversation was reset; the chat was told only that")
    if t["delivered"] is not None:
        lines += ["", "sent to the chat:", t["delivered"]]
    if t["files"]:
        lines.append(f"files:    {', '.join(t['files'])}")
    if t["result"] is not None:
        lines += ["", "result:", t["result"]]
    return "\n".join(lines)
