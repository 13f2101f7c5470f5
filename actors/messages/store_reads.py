"""Messages: the admin CLI reading a worker host's database (the rules every message keeps: actors/messages/__init__.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class StoreRead:
    """The admin CLI, or an adapter -> a session shard on a worker host: one read-only query of that host's
    database, which the leader cannot open (docs/distribution.md). ``action``: a name in actors/sessions/store_reads.py's READS;
    ``args``: its keyword arguments as (name, value) pairs."""
    action: str
    args: tuple = ()
    token: str = ""   # an adapter's read: its answer carries it back (actors/adapters/remote_reads.py)


@dataclass(frozen=True)
class StoreReadResult:
    """The shard's answer: the query's result, or why there is none (``error``)."""
    shard: str
    result: Optional[dict] = None
    error: Optional[str] = None
    token: str = ""
