"""Who holds a claim on an obligation, and whether that holder is still alive.

An owner is (pid, process start time, hostname, generation). A pid alone is not an identity: pids are recycled, so a
dead owner's pid may belong to an unrelated live process. The start time tells them apart. The generation is the
claim's fence; it is what the ledger checks on every mutation.

The start time is counted from boot (``process_start``), never from the epoch: psutil's epoch start time adds the
boot time of /proc/stat, a whole second that moves when the wall clock is adjusted (NTP, a VM's clock catching up),
so two reads of one live process's start time can differ by a second, and a live owner would be taken for dead
(its reply sent twice) or a running gateway for gone.
"""
from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from typing import Optional

import psutil

from common.processes import process_start

log = logging.getLogger(__name__)

START_TIME_TOLERANCE_S = 0.01  # psutil derives start times from clock ticks (1/100 s)

_own: dict[int, float] = {}  # pid -> start time; keyed by pid so that a forked child computes its own


@dataclass(frozen=True)
class Owner:
    pid: int
    start_time: float
    host: str
    generation: int = 0


def current_owner(generation: int = 0) -> Owner:
    """The calling process as an owner."""
    pid = os.getpid()
    if pid not in _own:
        _own[pid] = process_start(pid)
    return Owner(pid, _own[pid], socket.gethostname(), generation)


def is_same_process(owner: Owner, other: Owner) -> bool:
    """The two owners are one process (a pid is reused only by a process that started later)."""
    return (owner.pid, owner.host) == (other.pid, other.host) and owner.start_time is not None \
        and abs(owner.start_time - other.start_time) <= START_TIME_TOLERANCE_S


def is_owner_alive(owner: Optional[Owner]) -> bool:
    """True if the owner's process still runs: same host, the pid exists, and it started when the owner did.

    Another host's owner counts as dead: one database belongs to one host (a shard, docs/design.md §6). When the start
    time cannot be read (permissions), the owner counts as alive, because claiming a live owner's row would send
    twice, while skipping a dead one only delays its send (an admin can ``delivery_retry`` it)."""
    if owner is None or owner.pid is None:
        return False
    if owner.host != socket.gethostname():
        return False
    try:
        process = psutil.Process(owner.pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return abs(process_start(owner.pid) - owner.start_time) <= START_TIME_TOLERANCE_S
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        log.warning("cannot read the start time of pid %s; treating its claim as alive", owner.pid)
        return True
