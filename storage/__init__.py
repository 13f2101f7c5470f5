"""Durable storage of the gateway: one SQLite file per shard, reached only through ``Store`` (docs/storage.md).

    store = await Store.open("state/gateway.db", durability="normal")
    info = await store.sessions.get_or_create(session_key(source), {...})
    seq, inserted = await store.inbox.put(info.session_key, "telegram", "12345", payload)
    ...
    await store.close()

Each process (each actor that needs storage) opens its own Store; a Store is never shared across processes.
"""
from __future__ import annotations

from os import PathLike
from typing import Union

from .db import Database
from .access import Access, Grant, PairingAnswer, PairingCode
from .approvals import Answered, Approval, ApprovalRequest, ApprovalStore, Asked
from .cron import CRON_PLATFORM, Claimed, CronRun, CronStore, JobState, RunClaim
from .errors import (AmbiguousId, IllegalTransition, ImportRefused, NotFound, RecordError, SchemaTooNew, StaleFence,
                     StorageBusy, StorageError, StorageFull, StorageUnavailable, TurnRunning)
from .inbox import Inbox, InboundItem, InboxRow
from .keys import UnsafePathError, hash_id, safe_path, session_key
from .ledger import Ledger, Obligation, Target, best_effort, obligation_id
from .media import CacheStats, MediaCache
from .feedback import Feedback, FeedbackRow, Reaction
from .forensics import Forensics
from .media_refs import MediaRefs
from .memory import Added, MemoryEntry, MemoryStore
from .owner import Owner, current_owner, is_owner_alive
from .pacing import PacingBans
from .runtime import RuntimeState
from .tasks import TASK_PLATFORM, Started, Task, TaskStore
from .watches import WATCH_PLATFORM, ChangeClaimed, WatchState, WatchStore
from .leases import Fence, Lease, LeaseLost, LeaseStore, check as check_leases
from .agent_watches import AgentWatch, AgentWatchStore, Created, WatchAsked
from .sessions import SearchHit, SessionInfo, SessionStore, TranscriptEvent, short_id

__all__ = [
    "Store", "SessionStore", "Inbox", "Ledger", "PacingBans", "Access", "Grant", "PairingAnswer", "PairingCode",
    "SessionInfo", "TranscriptEvent", "SearchHit", "RuntimeState", "InboxRow", "InboundItem", "Obligation",
    "Target", "Owner", "MediaCache", "CacheStats", "MediaRefs", "Feedback", "FeedbackRow", "Reaction",
    "CronStore", "CronRun", "RunClaim", "Claimed", "JobState", "CRON_PLATFORM",
    "MemoryStore", "MemoryEntry", "Added", "TaskStore", "Task", "Started", "TASK_PLATFORM",
    "WatchStore", "WatchState", "ChangeClaimed", "WATCH_PLATFORM", "LeaseStore", "Lease", "Fence", "LeaseLost",
    "AgentWatch", "AgentWatchStore", "Created", "WatchAsked",
    "ApprovalStore", "Approval", "ApprovalRequest", "Asked", "Answered",
    "session_key", "short_id", "hash_id", "safe_path", "obligation_id", "best_effort", "current_owner",
    "is_owner_alive",
    "StorageError", "StorageBusy", "StorageFull", "StorageUnavailable", "SchemaTooNew", "RecordError",
    "IllegalTransition", "StaleFence", "NotFound",
    "AmbiguousId", "ImportRefused", "TurnRunning", "UnsafePathError",
]


class Store:
    """The one way in: ``sessions``, ``inbox``, ``ledger``, ``pacing``, ``access``, ``media`` (which cached files
    are referenced), ``feedback``, ``cron`` (scheduled jobs and their runs), ``memory`` (what profiles
    remember), ``approvals`` (tool calls waiting for a person's yes), ``tasks`` (background tasks), ``watches``
    (what each watch saw, and its changes), ``agent_watches`` (the watches the agent created) and ``leases``
    (which host holds what, when hosts share the database) over one database connection."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.sessions = SessionStore(db)
        self.inbox = Inbox(db)
        self.ledger = Ledger(db)
        self.pacing = PacingBans(db)
        self.access = Access(db)
        self.media = MediaRefs(db)
        self.feedback = Feedback(db)
        self.cron = CronStore(db)
        self.memory = MemoryStore(db)
        self.approvals = ApprovalStore(db)
        self.tasks = TaskStore(db)
        self.watches = WatchStore(db)
        self.leases = LeaseStore(db)
        self.agent_watches = AgentWatchStore(db)
        self.forensics = Forensics(db)   # reads for `report` (storage/forensics.py)

    def fence_with(self, fences) -> None:
        """Inline stores only: every ``atomic`` scope from now on checks the leases ``fences()`` names as it begins
        (storage/leases.py): a holder that lost one commits nothing."""
        self._db.fence_check = lambda conn: check_leases(conn, fences())

    def atomic(self):
        """Inline stores only: the calls inside one ``with store.atomic():`` commit together (storage/inline.py)."""
        return self._db.atomic()

    @classmethod
    async def open(cls, path: Union[str, PathLike], durability: str = "normal", inline: bool = False,
                   waits_on_loop: bool = False) -> "Store":
        """Open (creating and migrating if needed) the database at ``path``.

        ``durability='normal'``: a commit survives any process crash (kill -9); ``'full'``: it also survives power
        loss, at the cost of an fsync per commit (figures in docs/storage.md). Raises ``SchemaTooNew`` for a file
        written by a newer version. ``inline``: statements run on the calling thread, without aiosqlite's
        (storage/inline.py); ``waits_on_loop``: a lock held elsewhere is waited for on the caller's loop, not by
        blocking its thread (Database.open)."""
        return cls(await Database.open(path, durability, inline=inline, waits_on_loop=waits_on_loop))

    @property
    def path(self) -> str:
        return self._db.path

    @property
    def durability(self) -> str:
        return self._db.durability

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> "Store":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
