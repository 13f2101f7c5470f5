"""A worker host: an actor system that joins the leader's convention and offers to run session shards.

``run_gateway.py join LEADER_HOST:PORT --bind ADDRESS`` runs this in the foreground (a service manager keeps it
running). It starts a ``multiprocTCPBase`` system whose admin listens on ``--bind`` only (``runtime/loopback.py``),
whose every accepted connection passes the peer check (``common/peer_credentials.py``: a local peer must be this user
or root, a remote one comes over the private network the address check admitted), whose every frame, both ways,
carries an HMAC under the key derived from the convention's shared secret (``runtime/frame_mac.py``; a frame from
anyone without it is never unpickled, whichever end opened the connection), and which registers with the leader
at ``LEADER_HOST:PORT`` (the leader's admin port is its convention address) offering ``gateway.shards`` and its name
as ``gateway.host`` (common/cluster.py). The leader then places actors here by capability; they run in processes
forked from this host's admin, so they inherit this host's environment: ``GATEWAY_WORKER_STATE_DIR`` names the
state dir whose database a shard placed here opens (its own SQLite file, on this host's disk).

State: the pid lock in ``<state>/run`` (one worker per state dir), the actor system. It ends on SIGTERM/SIGINT
(the system is shut down and whatever is left below this process is killed by pid) or when its admin dies (exit
70: the service manager starts it again and it registers anew). What survives kill -9 of this process: the
shards' databases; its actor processes die with it (they ask for SIGKILL when their parent dies), and the leader
declares this member gone after ``[cluster] member_check_s`` x ``member_misses`` seconds without a check-in.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path

import psutil
from thespian.actors import ActorSystem

from common import processes
from common.cluster import WORKER_NAME_ENV, WORKER_STATE_ENV, Leader, is_private_network
from common.runfiles import RunFiles
from common import peer_credentials
from daemon.convention import apply_detection, worker_capabilities
from daemon.ports import any_free_admin_port
from daemon.transport_key import write_key
from runtime import ack_wait, frame_mac, held_port, lazy_identify, loopback, peer_check, poll_selector, selftest

log = logging.getLogger("gateway.worker")
EX_OK, EX_FAILURE, EX_SOFTWARE = 0, 1, 70


class Worker:
    def __init__(self, leader: Leader, bind: str, port: int, name: str, state_dir: Path, period_s: int,
                 misses: int, key: bytes, log_defs: dict | None = None, network_is_private: bool = False):
        self.leader, self.bind, self.port, self.name, self.key = leader, bind, port, name, key
        self.files = RunFiles(state_dir)
        self.period_s, self.misses, self.log_defs = period_s, misses, log_defs
        self.network_is_private = network_is_private
        self.stop_signal: int | None = None
        self.asys = None

    def run(self) -> int:
        refusal = selftest.refusal()   # before the pid lock, any patch, any actor: a refused start leaves nothing
        if refusal:
            log.error("%s", refusal)
            return selftest.EX_INCOMPATIBLE
        if not self.files.acquire_or_log(log):
            return EX_FAILURE
        try:
            if self.port == 0:
                self.port = any_free_admin_port(self.bind)
            held = held_port.hold(self.bind, self.port)
            if held is None:
                log.error("admin port %s:%d is in use by another program (--port)", self.bind, self.port)
                return EX_FAILURE
            try:
                self._install(held)
            except frame_mac.ThespianMismatch as exc:
                log.error("%s", exc)
                return selftest.EX_INCOMPATIBLE
            return self._serve()
        finally:
            held_port.release()
            self._stop()
            self.files.release()

    def _install(self, held) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        apply_detection(self.period_s, self.misses)
        os.environ[WORKER_STATE_ENV] = str(self.files.state_dir)
        os.environ[WORKER_NAME_ENV] = self.name
        os.environ["THESPLOG_FILE"] = str(self.files.state_dir / "thespian.log")
        loopback.install(self.bind)
        # Remote peers only from private networks (or any, where the operator said the network is private).
        peer_check.install(peer_credentials.admission(True if self.network_is_private else is_private_network))
        frame_mac.install(self.key)            # the convention's key: frames from anyone else are never unpickled
        write_key(self.files.run_dir, self.key)
        held_port.install(held)                # our own admin on --bind:port, never a listener we did not start
        ack_wait.install()
        poll_selector.install()
        lazy_identify.install()
        processes.die_with_parent()

    def _on_signal(self, signum, _frame) -> None:
        self.stop_signal = signum

    def _serve(self) -> int:
        self.asys = ActorSystem("multiprocTCPBase", worker_capabilities(self.leader, self.port, self.name),
                                logDefs=self.log_defs if self.log_defs is not None else False)
        held_port.release()                    # the admin listens on the port now
        admin_pid = _admin_pid(self.port)
        self.files.write_runtime({"role": "worker", "launcher_pid": os.getpid(), "admin_pid": admin_pid,
                                  "bind_host": self.bind, "admin_port": self.port, "host_name": self.name,
                                  "leader": str(self.leader), "started_at": time.time()})
        log.info("worker %s: admin %s:%d, joining the convention at %s (check-in every %ds, gone after %d misses)",
                 self.name, self.bind, self.port, self.leader, self.period_s, self.misses)
        while self.stop_signal is None:
            self.asys.listen(0.25)   # nothing is addressed to this client; listening keeps it responsive
            processes.reap_zombies()
            if admin_pid and not processes.is_running(admin_pid):
                log.error("this host's actor system (admin pid %d) died", admin_pid)
                return EX_SOFTWARE
        log.info("signal %s: leaving the convention", signal.Signals(self.stop_signal).name)
        return EX_OK

    def _stop(self) -> None:
        everything = set(processes.descendants(os.getpid()))
        if self.asys is not None:
            stopper = threading.Thread(target=self.asys.shutdown, daemon=True)
            stopper.start()
            stopper.join(8.0)
        everything |= set(processes.descendants(os.getpid()))
        processes.reap_zombies()
        processes.kill_all(processes.wait_gone(everything, 5.0))
        processes.reap_zombies()


def _admin_pid(port: int) -> int:
    """The process below this one that listens on the admin port (multiprocTCPBase starts the admin through an
    intermediate process that exits, so it is not simply the first child)."""
    for child in psutil.Process().children(recursive=True):
        try:
            if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in child.connections("tcp")):
                return child.pid
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
    return 0
