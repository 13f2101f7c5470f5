"""The launcher: a plain process that owns the actor system's life (DESIGN.md §1).

It takes the pid lock, cleans up what a killed predecessor left, binds every actor socket to the configured
interface, starts the actor system and the root, waits until every actor is up, then waits for one of:

  SIGTERM / SIGINT          graceful shutdown through the watchdog (flush), exit 0
  DrainDone from the root   an operator drained us: stop, exit 0
  SupervisorGaveUp          the root gave up: stop, exit 70 (the service manager restarts the daemon)
  the root process died     exit 70

and on the way out it stops the actor system and kills, by pid, whatever is still alive below it. The launcher is a
child subreaper and every actor process asks for SIGKILL when its parent dies (supervision/processes.py), so even a
kill -9 of the launcher leaves no actor behind.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time

from thespian.actors import ActorSystem

from actors.messages import (DrainDone, GatewayStatus, ShutdownReady, ShutdownRequest, Started,
                             SupervisorGaveUp)
from supervision import loopback, processes
from supervision.asking import ask_for
from supervision.logging_setup import thespian_log_defs
from supervision.runfiles import AlreadyRunning, RunFiles

log = logging.getLogger("gateway.launcher")
EX_OK, EX_FAILURE, EX_SOFTWARE = 0, 1, 70
ROOT_CLASS = "actors.root.Root"
ROOT_NAME = "gateway-root"


class Launcher:
    def __init__(self, config: dict):
        self.config = config
        self.files = RunFiles(config["gateway"]["state_dir"])
        self.host = config["gateway"]["bind_host"]
        self.port = config["gateway"]["admin_port"]
        self.stop_signal: int | None = None
        self.asys = None
        self.root = None
        self.root_pid = 0

    # ------------------------------------------------------------------------------------------------ the run
    def run(self) -> int:
        started = time.monotonic()
        try:
            self.files.acquire()
        except AlreadyRunning as exc:
            log.error("%s", exc)
            return EX_FAILURE
        try:
            self._reap_previous()
            if not _port_free(self.host, self.port):
                log.error("admin port %s:%d is in use by another program; set [gateway] admin_port", self.host,
                          self.port)
                return EX_FAILURE
            self._install_signals()
            loopback.install(self.host)
            processes.die_with_parent()
            code = self._run_system(started)
        finally:
            self._stop_system()
            self.files.release()
        log.info("gateway stopped (exit %d)", code)
        return code

    def _run_system(self, started: float) -> int:
        from actors.root import preload_actor_modules
        preload_actor_modules(self.config)
        level = self.config["gateway"]["log_level"]
        self.asys = ActorSystem("multiprocTCPBase", {"Admin Port": self.port}, logDefs=thespian_log_defs(level))
        self.root = self.asys.createActor(ROOT_CLASS, globalName=ROOT_NAME)
        self.asys.tell(self.root, Started("root", "Root", None, self.config))
        status = self._wait_ready()
        if status is None:
            return EX_SOFTWARE
        self._write_runtime(started)
        log.info("gateway ready in %.2fs: %d actors, admin %s:%d, state %s", time.monotonic() - started,
                 status.actors_up, self.host, self.port, self.files.state_dir)
        _notify_systemd("READY=1")
        return self._wait_for_end()

    def _wait_ready(self) -> GatewayStatus | None:
        deadline = time.monotonic() + self.config["gateway"]["ready_timeout_s"]
        while time.monotonic() < deadline and self.stop_signal is None:
            status = ask_for(self.asys, self.root, _status_request(), GatewayStatus, 5, self._early_message)
            if self._gave_up:
                return None
            if status is not None and status.actors_restarting == 0 and status.actors_failed == 0:
                return status
            time.sleep(0.05)
        log.error("the gateway did not become ready within %ss", self.config["gateway"]["ready_timeout_s"])
        return None

    _gave_up = False

    def _early_message(self, message) -> None:
        if isinstance(message, SupervisorGaveUp):
            log.error("the root supervisor gave up while starting: %s", message.reason)
            self._gave_up = True

    def _wait_for_end(self) -> int:
        while True:
            if self.stop_signal is not None:
                log.info("signal %s: graceful shutdown", signal.Signals(self.stop_signal).name)
                self._graceful_shutdown()
                return EX_OK
            message = self.asys.listen(0.25)
            if isinstance(message, SupervisorGaveUp):
                log.error("the root supervisor gave up: %s", message.reason)
                return EX_SOFTWARE
            if isinstance(message, DrainDone):
                log.info("drained: %s", message.report)
                return EX_OK
            processes.reap_zombies()
            if self.root_pid and not processes.is_same_process(self.root_pid, None):
                log.error("the root actor (pid %d) died", self.root_pid)
                return EX_SOFTWARE

    def _graceful_shutdown(self) -> None:
        timeout = self.config["watchdog"]["shutdown_timeout_s"]
        reply = ask_for(self.asys, self.root, ShutdownRequest(timeout), ShutdownReady, timeout + 2)
        if reply is None:
            log.warning("no flush confirmation within %ss; stopping anyway", timeout)
        else:
            log.info("flushed before stopping: %s", reply.detail)

    # -------------------------------------------------------------------------------------------- the way out
    def _stop_system(self) -> None:
        everything = set(processes.descendants(os.getpid()))
        if self.asys is not None:
            stopper = threading.Thread(target=self.asys.shutdown, daemon=True)
            stopper.start()
            stopper.join(8.0)  # a handler blocked during shutdown stalls Thespian for 10 s: do not wait for it
        everything |= set(processes.descendants(os.getpid()))
        killed = processes.kill_all(everything)
        left = processes.wait_gone(everything, 5.0)
        processes.reap_zombies()
        if killed:
            log.info("stopped %d leftover process(es)", len(killed))
        if left:
            log.error("processes still alive after shutdown: %s", left)

    def _reap_previous(self) -> None:
        """Clean up (never adopt) what a previous launcher killed with SIGKILL left behind: its actor processes
        would still hold the admin port and old code."""
        previous = self.files.read_runtime()
        if not previous:
            return
        sid = previous.get("admin_sid")
        leftovers = [p for p in _pids_in_session(sid)] if sid else []
        if leftovers:
            log.warning("cleaning up %d process(es) left by a previous run (launcher pid %s): %s",
                        len(leftovers), previous.get("launcher_pid"), leftovers)
            processes.kill_all(leftovers)
            processes.wait_gone(leftovers, 5.0)
        else:
            log.info("previous run (launcher pid %s) left no process behind", previous.get("launcher_pid"))

    def _write_runtime(self, started: float) -> None:
        from actors.messages import DescribeTree, TreeReply
        reply = ask_for(self.asys, self.root, DescribeTree(0), TreeReply, 5)
        self.root_pid = reply.node.pid if reply else 0
        admin_pid = _parent_pid(self.root_pid)
        self.files.write_runtime({
            "launcher_pid": os.getpid(), "launcher_started": processes.start_time(os.getpid()),
            "admin_pid": admin_pid, "admin_sid": os.getsid(admin_pid) if admin_pid else None,
            "root_pid": self.root_pid, "bind_host": self.host, "admin_port": self.port,
            "started_at": time.time(), "ready_after_s": round(time.monotonic() - started, 3),
            "config": self.config.get("_source", ""),
        })

    def _install_signals(self) -> None:
        def on_signal(signum, _frame):
            self.stop_signal = signum
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _status_request():
    from actors.messages import StatusRequest
    return StatusRequest()


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def _parent_pid(pid: int) -> int:
    import psutil
    try:
        return psutil.Process(pid).ppid()
    except (psutil.NoSuchProcess, ValueError):
        return 0


def _pids_in_session(sid: int) -> list[int]:
    import psutil
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid != os.getpid() and os.getsid(proc.pid) == sid:
                found.append(proc.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return found


def _notify_systemd(state: str) -> None:
    """sd_notify without a dependency: one datagram to $NOTIFY_SOCKET (Type=notify units)."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(state.encode(), address)
    except OSError as exc:
        log.warning("cannot notify systemd: %s", exc)
