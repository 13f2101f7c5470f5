"""No actor process outlives the gateway.

Thespian detaches its admin and actor processes from their parents on purpose (they survive the starter's exit),
and a SIGKILL of the launcher cannot run any cleanup. Two layers close the gap:

1. ``die_with_parent()``, installed once in the launcher, registers an at-fork hook so that every process forked
   after it (the admin, every actor, every actor's children: fork copies the registration) asks the kernel for
   SIGKILL when its parent dies (``PR_SET_PDEATHSIG``). Killing the launcher therefore takes the whole tree with it
   within milliseconds, and killing a supervisor takes its subtree, which its own supervisor then restarts fresh
   (OTP semantics: children do not outlive their supervisor).
2. The runtime file records the admin pid and its start time; a launcher that finds a previous run's processes
   still alive (e.g. on a platform without PDEATHSIG) kills that tree and says so (``reap_previous``).
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from typing import Iterable

import psutil


PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_prctl = None  # resolved once, before any fork: a dlopen in a freshly forked child can deadlock on the loader lock
_launcher_pid = 0


def _after_fork_in_child(forker: int) -> None:
    if forker != _launcher_pid and os.getsid(0) == forker:
        # Thespian daemonises its admin: setsid() then fork and exit. This child's parent is that short-lived
        # intermediate; wait until we are re-parented to the launcher (a subreaper) and tie our life to it instead.
        deadline = time.monotonic() + 2.0
        while os.getppid() == forker and time.monotonic() < deadline:
            time.sleep(0.001)
        forker = os.getppid()
    _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != forker:  # the parent died before prctl took effect: nobody will signal us
        os._exit(1)


def die_with_parent(subreaper: bool = True) -> None:
    """Call once in the launcher, before the actor system starts. ``subreaper=False`` is for a process that hosts
    an actor system but is not the launcher (a test runner): orphans then go to init, which reaps them at once."""
    global _prctl, _launcher_pid
    if _prctl is not None or not sys.platform.startswith("linux"):
        return
    try:
        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    _launcher_pid = os.getpid()
    if subreaper:
        _prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans of our tree come to us, not to init
    forker = {}
    os.register_at_fork(before=lambda: forker.__setitem__("pid", os.getpid()),
                        after_in_child=lambda: _after_fork_in_child(forker["pid"]))


def reap_zombies() -> list[int]:
    """The launcher is a subreaper: collect the exit status of re-parented descendants so no zombie piles up."""
    reaped = []
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped.append(pid)


def process_start(pid: int) -> float:
    """When process ``pid`` started, in seconds since boot (the kernel's start time of it, which never changes).
    Raises psutil.NoSuchProcess when there is no such process."""
    try:   # /proc/<pid>/stat's starttime, in clock ticks since boot (field 22; the name in field 2 may hold spaces)
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        raise psutil.NoSuchProcess(pid) from None
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")


def start_time(pid: int) -> float | None:
    """When ``pid`` started, counted from boot (storage/owner.py says why never from the epoch); None if gone."""
    try:
        return process_start(pid)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def is_same_process(pid: int, created: float | None) -> bool:
    """True if ``pid`` is alive and is the process that was started at ``created`` (pids are reused)."""
    now = start_time(pid)
    return now is not None and (created is None or abs(now - created) < 0.01)


def descendants(pid: int) -> list[int]:
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill_all(pids: Iterable[int], sig: int = signal.SIGKILL) -> list[int]:
    """Signal every pid that still exists; return those that were signalled."""
    hit = []
    for pid in pids:
        try:
            os.kill(pid, sig)
            hit.append(pid)
        except ProcessLookupError:
            pass
    return hit


def wait_gone(pids: Iterable[int], timeout: float) -> list[int]:
    """Wait until none of ``pids`` runs (a zombie counts as gone: it is dead, only not yet reaped by a parent that
    may not be us); return those still running at the deadline."""
    deadline = time.monotonic() + timeout
    left = list(pids)
    while True:
        left = [pid for pid in left if is_running(pid)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


def is_running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
