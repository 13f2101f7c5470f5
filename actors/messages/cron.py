"""Messages: scheduled jobs (the rules every message keeps: actors/messages/__init__.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class CronRunRequest:
    """Admin CLI -> Cron: run ``job`` now, once (``cron run NAME``), whatever its schedule and its pause."""
    job: str


@dataclass(frozen=True)
class CronRunReport:
    """Cron -> the asker: the manual run claimed and its prompt stored in the inbox (``ok``), or why not."""
    ok: bool
    job: str
    run_id: str = ""
    session_key: str = ""
    inbox_seq: Optional[int] = None
    error: str = ""
