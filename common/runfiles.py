"""The launcher's files under ``<state_dir>/run``: the pid lock, the runtime description, the heartbeat.

``gateway.pid``   holds the launcher's pid under an exclusive ``flock`` for the launcher's whole life. The kernel
                  drops the lock when the last holder dies, so a kill -9 never leaves a stale lock behind (a stale
                  *file* is harmless: the lock, not the file, says "running").
``runtime.json``  written once the gateway is ready: ports, pids, start times, the admin's session id. Admin
                  commands read it to find the running gateway; the next launcher reads it to find what a killed
                  predecessor left behind. Written atomically (temp file + rename).
``transport.key`` the key every actor frame of this run is signed with (daemon/transport_key.py), 0600; admin commands
                  read it to talk to the running gateway.
``metrics.json``  where the metrics actor listens (its port may be one the OS picked). The actor may bind before
                  the launcher writes runtime.json, so it records here and in runtime.json if that is already this
                  run's; the launcher merges it in when it writes. Both sides hold ``runtime.lock`` while they do.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path

import psutil

from common.privacy import make_private_dir, write_private
from common.processes import descendants, is_running


class AlreadyRunning(Exception):
    pass


class RunFiles:
    def __init__(self, state_dir: str | Path):
        self.state_dir = Path(state_dir)
        self.run_dir = self.state_dir / "run"
        self.pid_path = self.run_dir / "gateway.pid"
        self.runtime_path = self.run_dir / "runtime.json"
        self.heartbeat_path = self.run_dir / "heartbeat.json"
        self.metrics_path = self.run_dir / "metrics.json"
        self.key_path = self.run_dir / "transport.key"     # the actor transport's key (daemon/transport_key.py)
        self._lock_fd: int | None = None

    def acquire(self, wait_s: float = 3.0) -> None:
        """Take the pid lock or raise AlreadyRunning. Waits briefly: the processes of a launcher that was just
        killed share the lock's file description and may take a moment to die with it."""
        make_private_dir(self.state_dir)
        make_private_dir(self.run_dir)
        fd = os.open(self.pid_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = self.read_pid()
                if holder and _alive(holder) or time.monotonic() > deadline:
                    os.close(fd)
                    raise AlreadyRunning(f"a gateway is already running with state dir {self.state_dir}"
                                         + (f" (pid {holder})" if holder else "")) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def acquire_or_log(self, log) -> bool:
        """Take the pid lock; when another gateway holds it, say so on ``log`` and return False (the caller exits
        with a failure status, having started nothing)."""
        try:
            self.acquire()
        except AlreadyRunning as exc:
            log.error("%s", exc)
            return False
        return True

    def is_locked(self) -> bool:
        """True while a launcher (or, for a moment after its death, its dying children) holds the pid lock."""
        try:
            fd = os.open(self.pid_path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    def running_pid(self) -> int | None:
        """The launcher's pid if a gateway runs with this state dir now, else None (also when the state dir cannot
        be read: nothing runs from a directory that is not there)."""
        try:
            return self.read_pid() if self.running(wait_s=0.0) else None
        except OSError:
            return None

    def running(self, wait_s: float = 5.0) -> bool:
        """True if a launcher runs with this state dir. A lock still held after its launcher died belongs to the
        dying processes of a killed gateway: wait (bounded) for them to let it go."""
        deadline = time.monotonic() + wait_s
        while self.is_locked():
            holder = self.read_pid()
            if (holder and _alive(holder)) or time.monotonic() > deadline:
                return True
            time.sleep(0.05)
        return False

    def release(self) -> None:
        for path in (self.runtime_path, self.metrics_path, self.key_path, self.pid_path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def lock_holder(self) -> int | None:
        """The pid of the live process that holds the pid lock, as the kernel says (``/proc/locks``), and that has
        the pid file open; None if there is none. A flock taken before a fork is shared with the children, so the
        process named is the one that took it (the launcher); if that one died, its children do not count."""
        try:
            seen = os.stat(self.pid_path)
        except OSError:
            return None
        where = f"{os.major(seen.st_dev):02x}:{os.minor(seen.st_dev):02x}:{seen.st_ino}"
        try:
            with open("/proc/locks") as locks:
                rows = [line.split() for line in locks]
        except OSError:
            return None
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a waiter's row has "->" after the number and holds
        # nothing. The device is matched too where it reads the same as stat's (not always so on overlay mounts).
        held = [row for row in rows if len(row) >= 6 and row[1] == "FLOCK" and row[4].isdigit()]
        for row in [r for r in held if r[5] == where] or [r for r in held if r[5].endswith(f":{seen.st_ino}")]:
            if _has_open(int(row[4]), seen):
                return int(row[4])
        return None

    def read_pid(self) -> int | None:
        try:
            return int(self.pid_path.read_text().strip() or 0) or None
        except (OSError, ValueError):
            return None

    def write_runtime(self, info: dict) -> None:
        """Called by the launcher. A metrics record is merged in only if its actor is a process of this launcher:
        one left by a killed predecessor names a port nobody serves."""
        with self._runtime_lock():
            metrics = _read_json(self.metrics_path)
            if metrics and metrics.get("pid") in _descendants(os.getpid()):
                info = {**info, "metrics": metrics}
            _write_json(self.runtime_path, info)

    def record_metrics(self, entry: dict) -> None:
        """Called by the metrics actor once it listens: ``entry`` has host, port, url and its pid."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with self._runtime_lock():
            _write_json(self.metrics_path, entry)
            runtime = self.read_runtime()
            if runtime and runtime.get("launcher_pid") in _ancestors(os.getpid()):
                _write_json(self.runtime_path, {**runtime, "metrics": entry})

    @contextlib.contextmanager
    def _runtime_lock(self):
        fd = os.open(self.run_dir / "runtime.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def read_runtime(self) -> dict | None:
        try:
            return json.loads(self.runtime_path.read_text())
        except (OSError, ValueError):
            return None

    def log_path(self, config: dict) -> Path:
        configured = config["gateway"].get("log_file")
        return Path(configured) if configured else self.state_dir / "gateway.log"


def _write_json(path: Path, data: dict) -> None:
    write_private(path, json.dumps(data, indent=2).encode(), fsync=False)   # rewritten at the next start anyway


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _descendants(pid: int) -> list[int]:
    return descendants(pid)


def _ancestors(pid: int) -> list[int]:
    try:
        return [p.pid for p in psutil.Process(pid).parents()]
    except psutil.NoSuchProcess:
        return []


def _has_open(pid: int, file: os.stat_result) -> bool:
    """Whether process ``pid`` has ``file`` open (one of its descriptors is that inode)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            info = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (info.st_dev, info.st_ino) == (file.st_dev, file.st_ino):
            return True
    return False


def _alive(pid: int) -> bool:
    return is_running(pid)
