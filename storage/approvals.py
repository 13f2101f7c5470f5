"""Tool calls waiting for a person's yes: ``Store.approvals`` (docs/approvals.md).

One row per guarded tool call, named by a random id (``approval_id``, what a button carries) and, among its
session's pending rows, by a short code (what a typed answer carries). Its life is a state machine whose every
arrow is one transaction and a compare-and-set on the state, so two clicks, two processes or a click racing the
deadline can never both take an arrow:

    pending --answer--> approved --start_execution--> executing --finish(ok|failed|cut)--> done
    pending --answer--> denied  --finish(denied)--> done
    pending --expire_due, or an answer past the deadline--> expired --finish(expired)--> done
    pending --the conversation reset (sessions.reset)--> done (withdrawn): its turn never goes on

``done`` means the model was given the call's outcome. The row holds the call's arguments (at most
``MAX_ARGUMENTS_BYTES``: what runs once approved) and the model's message that asked for it (``step``, with the
other calls of that step), so a restart finds everything it needs to run or refuse it and go on with the turn.
Bounds a hostile or looping model could otherwise exhaust: those sizes and ``MAX_PENDING_PER_SESSION``.

What survives kill -9: every call that returned (one transaction each). A row left ``executing`` by a crash says
the tool may or may not have run: ``finish(cut)`` is taken by exactly one caller, which tells the model so.
"""
from __future__ import annotations

import enum
import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Optional

from .access import CODE_ALPHABET
from .db import Database, fetch_all, fetch_one
from .inbox import InboundItem, _insert, _prepare


class ApprovalState(enum.StrEnum):
    """A row's state (the transitions: the module docstring). str-valued: the values are what the ``state`` column
    holds (and its CHECK constraint, schema.py); a row read back holds the plain string, equal to its member."""
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    EXECUTING = "executing"
    DONE = "done"


MAX_ARGUMENTS_BYTES = 16_000       # UTF-8 bytes of a call's JSON arguments that may be held for approval
MAX_STEP_BYTES = 64_000            # UTF-8 bytes of the step (the model's message asking for the calls) kept with it
MAX_PENDING_PER_SESSION = 20       # questions one session may have waiting at once
MAX_NAME_CHARS = 200               # a tool name, an answerer's name
CODE_LENGTH = 4                    # 32^4 codes; unique among one session's pending rows only
APPROVERS = ("chat", "operator")
VERDICTS = {"approve": ApprovalState.APPROVED, "deny": ApprovalState.DENIED}
# state -> the outcomes ``finish`` may record from it
FINISHES = {ApprovalState.EXECUTING: ("ok", "failed", "cut"), ApprovalState.DENIED: ("denied",),
            ApprovalState.EXPIRED: ("expired",)}

UNSETTLED_STATES = tuple(s.value for s in (ApprovalState.APPROVED, ApprovalState.DENIED, ApprovalState.EXPIRED,
                                           ApprovalState.EXECUTING))
_COLUMNS = ("approval_id, code, session_key, turn_id, call_id, tool_name, arguments, arguments_sha256, platform, "
            "chat_id, approvers, asked_at, deadline, state, answer, answered_by, answered_at, outcome, finished_at, "
            "step")


@dataclass(frozen=True)
class ApprovalRequest:
    """A guarded call to ask about, in the chat ``platform``/``chat_id`` of session ``session_key``."""
    session_key: str
    turn_id: str
    call_id: str
    tool_name: str
    arguments: str                 # the call's JSON arguments, as the model wrote them
    platform: str
    chat_id: str
    timeout_s: float
    approvers: str = "chat"        # chat | operator
    step: str = ""                 # JSON: the model's message that asked for this call and the others of its step


@dataclass(frozen=True)
class Approval:
    approval_id: str
    code: str
    session_key: str
    turn_id: str
    call_id: str
    tool_name: str
    arguments: str
    arguments_sha256: str
    platform: str
    chat_id: str
    approvers: str
    asked_at: float
    deadline: float                # wall clock: past it, a pending row is expired
    state: str                     # pending | approved | denied | expired | executing | done
    answer: Optional[str] = None   # approve | deny (None: not answered, or expired)
    answered_by: Optional[str] = None
    answered_at: Optional[float] = None
    outcome: Optional[str] = None  # once done: ok | failed | cut | denied | expired | withdrawn
    finished_at: Optional[float] = None
    step: str = ""                 # what the turn goes on from once answered (ApprovalRequest.step)


@dataclass(frozen=True)
class Asked:
    """What ``ask`` did: the row (new, or the one this call already had: ``inserted`` False), or None with
    ``refused`` saying why (the session has ``MAX_PENDING_PER_SESSION`` waiting)."""
    approval: Optional[Approval]
    inserted: bool
    refused: str = ""


@dataclass(frozen=True)
class Answered:
    """What ``answer`` did: ``won`` when this answer is the one that counts; ``approval`` is the row as it is now
    (None: no such approval), which tells a loser what happened first (approved, denied, expired)."""
    won: bool
    approval: Optional[Approval]
    inbox_seq: Optional[int] = None   # the row ``enqueue`` put in the inbox with the winning answer


def arguments_digest(arguments: str) -> str:
    return hashlib.sha256(arguments.encode("utf-8")).hexdigest()


def new_approval_id() -> str:
    """96 random bits, URL-safe: what a button carries; unguessable, so it cannot be forged into another's. It
    never begins with ``-``: the operator types it as an argument (``approvals approve ID``), where a leading dash
    reads as an option (one id in 64 would otherwise be refused by the CLI's parser)."""
    while (approval_id := secrets.token_urlsafe(12)).startswith("-"):
        pass
    return approval_id


def _approval(r: tuple) -> Approval:
    return Approval(*r)


def _check_request(request: ApprovalRequest) -> None:
    if request.approvers not in APPROVERS:
        raise ValueError(f"approvers must be one of {', '.join(APPROVERS)}, got {request.approvers!r}")
    if not 0 < request.timeout_s:
        raise ValueError(f"timeout_s must be above 0, got {request.timeout_s!r}")
    if not request.tool_name or len(request.tool_name) > MAX_NAME_CHARS:
        raise ValueError(f"a tool name is 1-{MAX_NAME_CHARS} characters, got {len(request.tool_name)}")
    size = len(request.arguments.encode("utf-8"))
    if size > MAX_ARGUMENTS_BYTES:
        raise ValueError(f"arguments of {size} bytes are over the {MAX_ARGUMENTS_BYTES} an approval holds")
    size = len(request.step.encode("utf-8"))
    if size > MAX_STEP_BYTES:
        raise ValueError(f"a step of {size} bytes is over the {MAX_STEP_BYTES} an approval holds")


async def _get(conn, approval_id: str) -> Optional[Approval]:
    row = await fetch_one(conn, f"SELECT {_COLUMNS} FROM approvals WHERE approval_id = ?", (approval_id,))
    return _approval(row) if row else None


async def _free_code(conn, session_key: str) -> str:
    taken = {r[0] for r in await fetch_all(conn, "SELECT code FROM approvals WHERE session_key = ? AND "
                                                 "state = 'pending'", (session_key,))}
    while True:   # at most MAX_PENDING_PER_SESSION of ~1M codes are taken: a draw is almost always free
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        if code not in taken:
            return code


async def withdraw_pending(conn, session_key: str, now: float) -> int:
    """In the caller's transaction (a reset of the conversation, storage/sessions.py): every question of the key
    still waiting is done, withdrawn: the conversation it would go on in is gone, so no answer counts any more."""
    cur = await conn.execute("UPDATE approvals SET state = 'done', outcome = 'withdrawn', finished_at = ? "
                             "WHERE session_key = ? AND state = 'pending'", (now, session_key))
    return cur.rowcount


class ApprovalStore:
    """Reached as ``Store.approvals``; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def ask(self, request: ApprovalRequest, now: Optional[float] = None) -> Asked:
        """A pending row for the call, its deadline ``timeout_s`` from ``now``. Asking again for the same call
        (session, turn, call id: a turn re-run after a crash) answers the row it already has, whatever its state;
        the same call with other arguments is a ValueError (a call id names one call). Raises ValueError for a
        request out of bounds (arguments over ``MAX_ARGUMENTS_BYTES``)."""
        _check_request(request)
        now = time.time() if now is None else now
        digest = arguments_digest(request.arguments)

        async def do(conn):
            row = await fetch_one(conn, f"SELECT {_COLUMNS} FROM approvals WHERE session_key = ? AND turn_id = ? "
                                        "AND call_id = ?", (request.session_key, request.turn_id, request.call_id))
            if row is not None:
                existing = _approval(row)
                if existing.arguments_sha256 != digest:
                    raise ValueError(f"call {request.call_id!r} of turn {request.turn_id!r} was asked about with "
                                     "other arguments")
                return Asked(existing, False)
            waiting = (await fetch_one(conn, "SELECT COUNT(*) FROM approvals WHERE session_key = ? AND "
                                             "state = 'pending'", (request.session_key,)))[0]
            if waiting >= MAX_PENDING_PER_SESSION:
                return Asked(None, False, f"{waiting} questions of this conversation are waiting for an answer")
            approval = Approval(new_approval_id(), await _free_code(conn, request.session_key), request.session_key,
                                request.turn_id, request.call_id, request.tool_name, request.arguments, digest,
                                request.platform, request.chat_id, request.approvers, now, now + request.timeout_s,
                                ApprovalState.PENDING.value, step=request.step)
            await conn.execute(f"INSERT INTO approvals ({_COLUMNS}) VALUES ({', '.join('?' * 20)})",
                               tuple(getattr(approval, c.strip()) for c in _COLUMNS.split(",")))
            return Asked(approval, True)
        return await self._db.write(do)

    async def answer(self, approval_id: str, verdict: str, answered_by: str, now: Optional[float] = None,
                     enqueue: Optional[InboundItem] = None) -> Answered:
        """``verdict`` (approve | deny) by ``answered_by``, if the row is pending and its deadline is ahead: the
        first answer wins, every later one finds the row answered. An answer past the deadline expires the row
        instead (and does not win). Who may answer is the caller's check (actors/approvals/answers.py).
        ``enqueue``: an inbox row put in with a winning answer, in its transaction (an answer from outside the chat,
        the operator's: the row is what makes its session go on, so the two are on disk together or not at all)."""
        if verdict not in VERDICTS:
            raise ValueError(f"a verdict is approve or deny, got {verdict!r}")
        if not answered_by or len(answered_by) > MAX_NAME_CHARS:
            raise ValueError(f"answered_by is 1-{MAX_NAME_CHARS} characters")
        now = time.time() if now is None else now
        prepared = _prepare(enqueue) if enqueue is not None else None

        async def do(conn):
            cur = await conn.execute("UPDATE approvals SET state = ?, answer = ?, answered_by = ?, answered_at = ? "
                                     "WHERE approval_id = ? AND state = 'pending' AND deadline > ?",
                                     (VERDICTS[verdict].value, verdict, answered_by, now, approval_id, now))
            won = cur.rowcount == 1
            seq = None
            if won and enqueue is not None:
                [(seq, _inserted)] = await _insert(conn, [prepared], now)
            if not won:
                await conn.execute("UPDATE approvals SET state = 'expired' WHERE approval_id = ? AND "
                                   "state = 'pending' AND deadline <= ?", (approval_id, now))
            return Answered(won, await _get(conn, approval_id), seq)
        return await self._db.write(do)

    async def expire_due(self, now: Optional[float] = None, session_key: Optional[str] = None) -> list[Approval]:
        """Every pending row whose deadline is at or before ``now`` (of ``session_key`` only, when given) becomes
        expired; answers those rows, each once: a second call finds them expired already."""
        now = time.time() if now is None else now
        where, args = ("AND session_key = ?", (session_key,)) if session_key is not None else ("", ())

        async def do(conn):
            due = await fetch_all(conn, f"SELECT approval_id FROM approvals WHERE state = 'pending' AND "
                                        f"deadline <= ? {where} ORDER BY deadline", (now, *args))
            out = []
            for (approval_id,) in due:
                await conn.execute("UPDATE approvals SET state = 'expired' WHERE approval_id = ? AND "
                                   "state = 'pending'", (approval_id,))
                out.append(await _get(conn, approval_id))
            return out
        return await self._db.write(do)

    async def start_execution(self, approval_id: str) -> bool:
        """approved -> executing: True for the one caller that may run the tool; False for every other (and for
        a row that is not approved). Taken before the tool starts, so a crash while it runs leaves ``executing``:
        never run again."""
        async def do(conn):
            cur = await conn.execute("UPDATE approvals SET state = 'executing' WHERE approval_id = ? AND "
                                     "state = 'approved'", (approval_id,))
            return cur.rowcount == 1
        return await self._db.write(do)

    async def finish(self, approval_id: str, outcome: str, now: Optional[float] = None) -> bool:
        """The model has been given the call's outcome: executing -> done (ok | failed | cut), denied -> done
        (denied), expired -> done (expired). True for the one caller that took the arrow: meant to commit with the
        tool result's transcript event, so the model is told at most once."""
        if not any(outcome in allowed for allowed in FINISHES.values()):
            raise ValueError(f"an outcome is one of ok, failed, cut, denied, expired; got {outcome!r}")
        states = [state.value for state, allowed in FINISHES.items() if outcome in allowed]
        now = time.time() if now is None else now

        async def do(conn):
            cur = await conn.execute(f"UPDATE approvals SET state = 'done', outcome = ?, finished_at = ? "
                                     f"WHERE approval_id = ? AND state IN ({', '.join('?' * len(states))})",
                                     (outcome, now, approval_id, *states))
            return cur.rowcount == 1
        return await self._db.write(do)

    async def get(self, approval_id: str) -> Optional[Approval]:
        return await self._db.read(_get, approval_id)

    async def by_code(self, session_key: str, code: str) -> Optional[Approval]:
        """The session's newest row with ``code`` (a typed answer's; a code is unique among pending rows only)."""
        async def fetch(conn):
            row = await fetch_one(conn, f"SELECT {_COLUMNS} FROM approvals WHERE session_key = ? AND code = ? "
                                        "ORDER BY state = 'pending' DESC, asked_at DESC LIMIT 1",
                                  (session_key, code.upper()))
            return _approval(row) if row else None
        return await self._db.read(fetch)

    async def for_question(self, platform: str, chat_id: str, code: str) -> Optional[Approval]:
        """The newest row asked in that chat (``platform``: the adapter's name) with ``code``: the approval a question
        sent there with this code asks about (what its buttons name). A code is unique among one session's pending
        rows; two sessions of one chat (one per user, or per profile) drawing the same code at once is a ~1 in a
        million chance, and the newer question wins it."""
        async def fetch(conn):
            row = await fetch_one(conn, f"SELECT {_COLUMNS} FROM approvals WHERE platform = ? AND chat_id = ? AND "
                                        "code = ? ORDER BY state = 'pending' DESC, asked_at DESC LIMIT 1",
                                  (platform, str(chat_id), code.upper()))
            return _approval(row) if row else None
        return await self._db.read(fetch)

    async def sessions_due(self, now: Optional[float] = None, limit: int = 1000) -> list[str]:
        """The sessions with a pending question past its deadline (at most ``limit``): what a shard wakes, so that
        a session not running (passivated, or not started since a restart) expires its questions in time."""
        now = time.time() if now is None else now

        async def fetch(conn):
            rows = await fetch_all(conn, "SELECT DISTINCT session_key FROM approvals WHERE state = 'pending' AND "
                                         "deadline <= ? LIMIT ?", (now, int(limit)))
            return [r[0] for r in rows]
        return await self._db.read(fetch)

    async def listing(self, states: tuple = (ApprovalState.PENDING.value,), limit: int = 1000) -> list[Approval]:
        """Every session's rows in ``states`` (the questions waiting, by default), earliest deadline first."""
        async def fetch(conn):
            rows = await fetch_all(conn, f"SELECT {_COLUMNS} FROM approvals WHERE state IN "
                                         f"({', '.join('?' * len(states))}) ORDER BY deadline, asked_at LIMIT ?",
                                   (*states, int(limit)))
            return [_approval(r) for r in rows]
        return await self._db.read(fetch)

    async def pending_for(self, session_key: str) -> list[Approval]:
        """The session's questions waiting for an answer, earliest deadline first (what its timer is set from)."""
        return await self._in_states(session_key, ("pending",))

    async def unsettled_for(self, session_key: str) -> list[Approval]:
        """The session's rows answered or expired whose outcome the model has not been given (what a restarted
        session settles: run, refuse, or say it was cut)."""
        return await self._in_states(session_key, UNSETTLED_STATES)

    async def _in_states(self, session_key: str, states: tuple) -> list[Approval]:
        async def fetch(conn):
            rows = await fetch_all(conn, f"SELECT {_COLUMNS} FROM approvals WHERE session_key = ? AND state IN "
                                         f"({', '.join('?' * len(states))}) ORDER BY deadline, asked_at",
                                   (session_key, *states))
            return [_approval(r) for r in rows]
        return await self._db.read(fetch)

    async def purge(self, older_than_s: float, now: Optional[float] = None) -> int:
        """Delete done rows finished over ``older_than_s`` ago (a row not done is never purged: it is a question
        still open, or a call whose outcome the model has not been given)."""
        cutoff = (time.time() if now is None else now) - older_than_s

        async def do(conn):
            return (await conn.execute("DELETE FROM approvals WHERE state = 'done' AND finished_at < ?",
                                       (cutoff,))).rowcount
        return await self._db.write(do)
