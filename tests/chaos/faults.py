"""The faults a chaos run injects, one class per kind. Each ``inject`` does its damage, undoes what must be undone
(a storm ends, the disk is emptied, the lock released) and returns a short description for the log; the run then
checks that the gateway carries on (G8) before the next fault.

Every fault is something production meets: a process killed by the OOM killer or an operator, the whole daemon
killed, a platform answering 429 to most calls, connections cut mid-request, the state disk full, another process
holding the database's write lock.
"""
from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import threading
import time

import psutil

from tests.actor_system import wait_for
from tests.chaos.world import BACKGROUND_FAULTS, World
from tests.gateway import nodes

ACTOR_KINDS = ("SessionShard", "TelegramAdapter", "WebChatAdapter", "SessionSupervisor", "AdapterSupervisor",
               "DeliverySweeper", "Watchdog", "Ticker")
CELL_KINDS = ("Session", "StreamConsumer")
START_WAIT_S = 180
TELEGRAM_CALLS = ["sendMessage", "editMessageText", "sendChatAction", "getUpdates"]


class Skipped(Exception):
    """The fault could not be injected at this moment (no such actor running, no file system of our own)."""


class KillActor:
    name = "kill -9 actor"

    def inject(self, world: World, rng: random.Random) -> str:
        tree = world.gw._tree_or_none()
        if tree is None:
            raise Skipped("the tree did not answer")
        candidates = [n for n in nodes(tree) if n["kind"] in ACTOR_KINDS and n["pid"]]
        kinds = sorted({n["kind"] for n in candidates})
        if not kinds:
            raise Skipped("no actor of a victim kind is running")
        kind = rng.choice(kinds)
        victim = rng.choice([n for n in candidates if n["kind"] == kind])
        try:
            os.kill(victim["pid"], signal.SIGKILL)
        except ProcessLookupError:
            raise Skipped(f"{kind} {victim['name']} had already exited") from None
        return f"{kind} {victim['name']} (pid {victim['pid']})"


class CrashCell:
    """A session or a reply's consumer raises in its next handler (fault injection): the cell crashes, its shard
    restarts it from its child spec, and nothing else of the shard notices."""
    name = "crash cell"

    def inject(self, world: World, rng: random.Random) -> str:
        tree = world.gw._tree_or_none()
        if tree is None:
            raise Skipped("the tree did not answer")
        cells = [n for n in nodes(tree) if n["kind"] in CELL_KINDS and n["state"] in ("running", "busy")]
        kinds = sorted({n["kind"] for n in cells})
        if not kinds:
            raise Skipped("no session or consumer cell is live")
        kind = rng.choice(kinds)
        victim = rng.choice([n for n in cells if n["kind"] == kind])
        result = world.gw.cli("fault", victim["name"], "--action", "crash")
        if result.returncode != 0:
            raise Skipped(f"{kind} {victim['name']}: {result.stderr.strip()[:200]}")
        return f"{kind} {victim['name']} (in shard pid {victim['pid']})"


class KillDaemon:
    name = "kill -9 daemon"

    def inject(self, world: World, rng: random.Random) -> str:
        gw = world.gw
        gw._tree_or_none()        # learn the current pids, so the orphan check below knows every one of them
        os.kill(gw.launcher_pid, signal.SIGKILL)
        gw.assert_no_process_left(30)
        restart(world)
        return f"launcher {gw.launcher_pid} and its tree; started again"


def restart(world: World) -> None:
    """What the service manager does: start again. The last process of a killed tree may hold the run lock a
    moment longer than the pids we knew of."""
    gw = world.gw

    def attempt():
        # A loaded machine may take long to recover a big state dir: the start may wait up to START_WAIT_S.
        result = gw.cli("start", "--json", "--wait", str(START_WAIT_S), timeout=START_WAIT_S + 30)
        out = json.loads(result.stdout or "{}")
        if result.returncode in (0, 4):   # 4: started, degraded (a platform not reachable on its first attempt)
            gw.launcher_pid = out["pid"]
            gw.seen_pids.add(gw.launcher_pid)
            return out
        if "already running" in out.get("error", ""):
            return None
        raise AssertionError(f"start exited {result.returncode}: {result.stdout[-300:]} {result.stderr[-300:]}")
    wait_for(attempt, 60, 0.2, "the gateway to start again")


class FloodStorm:
    name = "429 storm"

    def inject(self, world: World, rng: random.Random) -> str:
        seconds = rng.uniform(3, 8)
        world.control.post("/_control/faults", {"p_flood": 0.6, "flood_retry_after": rng.choice([1, 2]),
                                                "seed": rng.randrange(1 << 30), "methods": TELEGRAM_CALLS})
        time.sleep(seconds)   # the storm's duration is the fault itself, not a wait for something
        world.control.post("/_control/faults", dict(BACKGROUND_FAULTS, seed=rng.randrange(1 << 30)))
        return f"60% of Bot API calls answered 429 for {seconds:.1f}s"


class DropConnections:
    name = "dropped connections"

    def inject(self, world: World, rng: random.Random) -> str:
        seconds = rng.uniform(3, 8)
        # "drop" closes the socket before the call takes effect, "drop_after" once it took effect (the ambiguous
        # send: the client cannot tell the two apart, so a send cut either way goes again with the re-sent mark).
        world.control.post("/_control/faults", {"p_drop": 0.3, "p_drop_after": 0.1, "seed": rng.randrange(1 << 30),
                                                "methods": TELEGRAM_CALLS})
        world.web.drop_all()
        time.sleep(seconds)
        world.web.drop_all()
        world.control.post("/_control/faults", dict(BACKGROUND_FAULTS, seed=rng.randrange(1 << 30)))
        return f"40% of Bot API connections cut and every web chat socket dropped twice over {seconds:.1f}s"


class DiskFull:
    name = "disk full"

    def inject(self, world: World, rng: random.Random) -> str:
        if not world.disk_mounted:
            raise Skipped("no file system of our own to fill (mounting a tmpfs needs root)")
        seconds = rng.uniform(2, 6)
        ballast = world.disk / "ballast"
        written = 0
        fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for size in (1 << 20, 4096, 512):      # large blocks, then the last few KiB
                try:
                    while True:
                        written += os.write(fd, b"\0" * size)
                except OSError:
                    pass      # ENOSPC: the disk is full, which is the point
            time.sleep(seconds)
        finally:
            os.close(fd)
        ballast.unlink()
        return f"state disk filled ({written >> 20} MiB ballast) for {seconds:.1f}s"


class LockContention:
    name = "SQLite lock held"

    def inject(self, world: World, rng: random.Random) -> str:
        holds = [rng.uniform(0.5, 4.0) for _ in range(rng.randint(2, 4))]
        db = sqlite3.connect(world.gw.state / "gateway.db", timeout=30, isolation_level=None)
        try:
            for seconds in holds:
                db.execute("BEGIN IMMEDIATE")     # the write lock every writer of the gateway needs
                time.sleep(seconds)
                db.execute("ROLLBACK")
                time.sleep(0.2)
        finally:
            db.close()
        return "write lock held by another process " + ", ".join(f"{s:.1f}s" for s in holds)


FAULTS = (KillActor, KillActor, CrashCell, CrashCell, KillDaemon, FloodStorm, DropConnections, DiskFull,
          LockContention)


def listening_outside_loopback(world: World) -> list[str]:
    """G7: every socket the gateway's processes listen on is on loopback."""
    try:
        launcher = psutil.Process(world.gw.launcher_pid)
        procs = [launcher] + launcher.children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    bad = []
    for proc in procs:
        try:
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr.ip not in ("127.0.0.1", "::1"):
                    bad.append(f"pid {proc.pid} listens on {conn.laddr.ip}:{conn.laddr.port}")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return bad


class Sampler(threading.Thread):
    """Samples listening sockets (G7) every second while the run goes on."""

    def __init__(self, world: World):
        super().__init__(daemon=True)
        self.world, self.stop, self.samples, self.violations = world, threading.Event(), 0, []

    def run(self) -> None:
        while not self.stop.wait(1.0):
            self.violations += listening_outside_loopback(self.world)
            self.samples += 1
