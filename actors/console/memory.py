"""What the gateway's processes cost in memory: the launcher and every process under it, read from /proc.

PSS (proportional set size, /proc/PID/smaps_rollup) is the honest figure for a tree of forked processes: a page
shared by ten of them counts a tenth in each, so the sum is what the gateway costs the machine. RSS would count a
shared page in every process that maps it. Where smaps_rollup cannot be read (not Linux, another user's process)
the process counts its RSS and ``exact`` is false. The console's overview and bench/console_cost.py read it here.
"""
from __future__ import annotations

from pathlib import Path

from common import processes


def _kib(path: str, field: str) -> int | None:
    """A "Field:  N kB" line of a /proc file, in KiB, or None if /proc cannot say."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def pss_kib(pid: int) -> int | None:
    return _kib(f"/proc/{pid}/smaps_rollup", "Pss:")


def rss_kib(pid: int) -> int | None:
    return _kib(f"/proc/{pid}/status", "VmRSS:")


def gateway_memory(launcher_pid: int) -> dict:
    """{"pss_bytes", "processes", "exact"} of the launcher and its descendants (0 processes: none running)."""
    total, exact, count = 0, True, 0
    for pid in [launcher_pid, *processes.descendants(launcher_pid)] if launcher_pid else []:
        kib = pss_kib(pid)
        if kib is None:
            kib, exact = rss_kib(pid), False
        if kib is None:
            continue   # gone meanwhile
        total += kib
        count += 1
    return {"pss_bytes": total * 1024, "processes": count, "exact": exact}
