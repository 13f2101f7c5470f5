"""Background tasks (docs/background.md): ``Store.tasks``. A chat's ``/bg PROMPT`` runs as its own turn in a
session of its own (the task's key: the chat's key and ``.task-N``), and its result comes back to the chat.

A task is one row, numbered per chat (``number``, shown as #N), with the chat's session id when it started (the
result is delivered only while that is still the chat's conversation: the fail-closed rule, actors/sessions/
tasks.py), its prompt and its state: started -> done | failed | cancelled | kept (finished, but the chat's
conversation was reset, forgotten or moved since: the result stays here and is not delivered). A state moves once,
by compare-and-set from started (``finish``): a result decided twice (a crash between deciding and delivering) keeps
the first decision.

``start`` writes the row and the prompt's inbox row (``platform = 'task'``, the message id the task's key) in one
transaction, after counting the chat's tasks still running against the limit: after a kill -9 either both are on
disk or neither, and the task's turn then runs, resumes or fails under the same rules as any turn (G2, G8), never
twice (the inbox's dedup and its states). The inbox rows are the gateway's own: they are no platform traffic.

Retention (``purge``, the sweeper's housekeeping): a finished task's row goes once it finished over [storage]
inbox_retention_days ago, as the answered inbox rows do, except each chat's newest task: the next task's number is
the chat's highest plus one, and a number given again would name a task session that exists already.

What survives kill -9: every call that returned (one transaction each).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional

from . import records
from .db import Database, fetch_all, fetch_one
from .inbox import InboundItem, _insert, _prepare

TASK_PLATFORM = "task"     # the inbox's platform column for the rows of background tasks
TASK_STATES = ("started", "done", "failed", "cancelled", "kept")
FINISHED = TASK_STATES[1:]
_COLUMNS = ("origin_key, number, origin_session_id, task_key, profile, prompt, state, cancel_requested, result, "
            "delivered, delivered_files, inbox_seq, started_at, finished_at, origin_ref")


@dataclass(frozen=True)
class Task:
    origin_key: str                # the chat's session key
    number: int                    # per chat: #N
    origin_session_id: str         # the chat's conversation when the task started
    task_key: str                  # the task's own session key
    profile: str
    prompt: str
    state: str                     # one of TASK_STATES
    cancel_requested: bool
    result: Optional[str]          # the task's answer, once finished
    delivered: Optional[str]       # what the chat is sent for it (the result, a shorter form, or the kept notice)
    delivered_files: tuple         # the file parts sent with it (a long result), as OutgoingFile.to_part()
    inbox_seq: Optional[int]
    started_at: float
    finished_at: Optional[float]
    origin_ref: str                # the message that asked for it (its platform and id): one task per message


@dataclass(frozen=True)
class Started:
    """``start``'s answer: the task, or None and how many of the chat's tasks run already (the limit refused it).
    ``again``: the message started this task before (it was handled again after a crash)."""
    task: Optional[Task]
    running: int
    again: bool = False


def _task(r: tuple) -> Task:
    return Task(r[0], r[1], r[2], r[3], r[4], r[5], r[6], bool(r[7]), r[8], r[9],
                tuple(records.unpack(r[10])) if r[10] is not None else (), r[11], r[12], r[13], r[14])


class TaskStore:
    """Reached as ``Store.tasks``; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def start(self, origin_key: str, origin_session_id: str, profile: str, prompt: str, limit: int,
                    item_for: Callable[[int], InboundItem], origin_ref: str, now: Optional[float] = None) -> Started:
        """Start the chat's next task unless ``limit`` of its tasks run already, or the message ``origin_ref``
        started one before (that one is the answer). ``item_for(number)`` makes the prompt's inbox row (its session
        key is the task's key)."""
        now = time.time() if now is None else now

        async def do(conn):
            running = (await fetch_one(conn, "SELECT COUNT(*) FROM tasks WHERE origin_key = ? AND state = 'started'",
                                       (origin_key,)))[0]
            before = await _one(conn, "origin_ref = ?", (origin_ref,))
            if before is not None:
                return Started(before, running, again=True)
            if running >= limit:
                return Started(None, running)
            number = (await fetch_one(conn, "SELECT COALESCE(MAX(number), 0) + 1 FROM tasks WHERE origin_key = ?",
                                      (origin_key,)))[0]
            item = item_for(number)
            [(seq, _inserted)] = await _insert(conn, [_prepare(item)], now)
            await conn.execute(f"INSERT INTO tasks ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, 'started', 0, NULL, NULL, "
                               f"NULL, ?, ?, NULL, ?)", (origin_key, number, origin_session_id, item.session_key,
                                                         profile, prompt, seq, now, origin_ref))
            return Started(await _one(conn, "task_key = ?", (item.session_key,)), running + 1)
        return await self._db.write(do)

    async def get(self, origin_key: str, number: int) -> Optional[Task]:
        return await self._db.read(lambda conn: _one(conn, "origin_key = ? AND number = ?", (origin_key, number)))

    async def by_key(self, task_key: str) -> Optional[Task]:
        return await self._db.read(lambda conn: _one(conn, "task_key = ?", (task_key,)))

    async def of_chat(self, origin_key: str, limit: int = 20) -> list[Task]:
        """The chat's newest tasks, newest first."""
        async def fetch(conn):
            rows = await fetch_all(conn, f"SELECT {_COLUMNS} FROM tasks WHERE origin_key = ? ORDER BY number DESC "
                                         f"LIMIT ?", (origin_key, int(limit)))
            return [_task(r) for r in rows]
        return await self._db.read(fetch)

    async def recent(self, limit: int = 50, state: Optional[str] = None) -> list[Task]:
        """Every chat's newest tasks (of ``state`` if given), newest first: the operator's list."""
        where, args = ("WHERE state = ?", (state,)) if state else ("", ())

        async def fetch(conn):
            rows = await fetch_all(conn, f"SELECT {_COLUMNS} FROM tasks {where} ORDER BY started_at DESC LIMIT ?",
                                   (*args, int(limit)))
            return [_task(r) for r in rows]
        return await self._db.read(fetch)

    async def numbered(self, number: int) -> list[Task]:
        """Every chat's task #``number``, newest first (the operator names a task by its number, or its key)."""
        async def fetch(conn):
            rows = await fetch_all(conn, f"SELECT {_COLUMNS} FROM tasks WHERE number = ? ORDER BY started_at DESC "
                                         f"LIMIT 100", (int(number),))
            return [_task(r) for r in rows]
        return await self._db.read(fetch)

    async def request_cancel(self, origin_key: str, number: int) -> Optional[Task]:
        """Mark a running task to be cancelled (its turn, if it has not started, is not run); the task as it is now,
        or None if there is no such task."""
        async def do(conn):
            await conn.execute("UPDATE tasks SET cancel_requested = 1 WHERE origin_key = ? AND number = ? AND "
                               "state = 'started'", (origin_key, number))
            return await _one(conn, "origin_key = ? AND number = ?", (origin_key, number))
        return await self._db.write(do)

    async def finish(self, task_key: str, state: str, result: str, delivered: str, files: tuple = (),
                     now: Optional[float] = None) -> Task:
        """Finish the task: its state, its result and what the chat is sent, once (compare-and-set from started).
        The task as it is afterwards: a task finished before keeps its first decision."""
        if state not in FINISHED:
            raise ValueError(f"a task finishes as one of {FINISHED}, not {state!r}")
        now = time.time() if now is None else now
        blob = records.pack(list(files))

        async def do(conn):
            await conn.execute("UPDATE tasks SET state = ?, result = ?, delivered = ?, delivered_files = ?, "
                               "finished_at = ? WHERE task_key = ? AND state = 'started'",
                               (state, result, delivered, blob, now, task_key))
            return await _one(conn, "task_key = ?", (task_key,))
        return await self._db.write(do)

    async def purge(self, older_than_s: float, now: Optional[float] = None) -> int:
        """Delete the rows of tasks finished over ``older_than_s`` ago (a kept result with them), but each chat's
        newest task, which keeps the chat's numbering going up. A running task is never deleted."""
        cutoff = (time.time() if now is None else now) - older_than_s

        async def do(conn):
            return (await conn.execute(
                "DELETE FROM tasks WHERE state != 'started' AND finished_at < ? AND number < "
                "(SELECT MAX(newest.number) FROM tasks AS newest WHERE newest.origin_key = tasks.origin_key)",
                (cutoff,))).rowcount
        return await self._db.write(do)


async def _one(conn, where: str, args: tuple) -> Optional[Task]:
    row = await fetch_one(conn, f"SELECT {_COLUMNS} FROM tasks WHERE {where}", args)
    return _task(row) if row is not None else None
