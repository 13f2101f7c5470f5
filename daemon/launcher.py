"""The launcher: a plain process that owns the actor system's life (docs/design.md §1).

It takes the pid lock, cleans up what a killed predecessor left, binds every actor socket to the configured
interface, starts the actor system and the root, waits until every actor is up, then waits for one of:

  SIGTERM / SIGINT          graceful shutdown through the watchdog (flush), exit 0
  SIGHUP                    reload the configuration file (the root does it, as for `run_gateway.py reload`);
                            the outcome is logged, and the gateway runs on
  DrainDone from the root   an operator drained us: stop, exit 0
  idle for [gateway] idle_exit_s, nothing in flight   graceful shutdown, exit 0 (daemon/idle_exit.py)
  SupervisorGaveUp          the root gave up: stop, exit 70 (the service manager restarts the daemon)
  the root process died     exit 70

and on the way out it stops the actor system and kills, by pid, whatever is still alive below it. The launcher is a
child subreaper and every actor process asks for SIGKILL when its parent dies (common/processes.py), so even a
kill -9 of the launcher leaves no actor behind.

Under systemd (Type=notify, $NOTIFY_SOCKET set) it tells the service manager READY=1 once every actor is up,
STOPPING=1 as soon as it sees a drain or a shutdown begin, and a STATUS= line on every change of health (polled
every STATUS_INTERVAL_S); deploy/agent-gateway.service and docs/operations.md show the unit.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time

import psutil
from thespian.actors import ActorSystem, InvalidActorAddress

from actors.messages import (DrainDone, GatewayStatus, ReloadReport, ReloadRequest, ShutdownReady, ShutdownRequest,
                             StatusRequest)
from common.cluster_secret import NoClusterSecret
from supervision.messages import DescribeTree, Started, SupervisorGaveUp, TreeReply
from common import peer_credentials
from runtime import ack_wait, frame_mac, held_port, lazy_identify, loopback, peer_check, poll_selector, selftest
from common import processes
from daemon.asking import ask_for
from daemon.ports import any_free_admin_port
from daemon.port_holder import port_holder
from daemon.startup_checks import startup_warnings
from daemon.start_report import SETTLE_S, adapters_settled, serving_line
from daemon.status_view import health_of
from common.logging_setup import log_defs_for
from common.runfiles import RunFiles
from daemon.convention import leader_capabilities, remote_peers, transport_key
from daemon.root_actor import ROOT_CLASS, ROOT_NAME

log = logging.getLogger("gateway.launcher")
EX_OK, EX_FAILURE, EX_SOFTWARE = 0, 1, 70
STATUS_INTERVAL_S = 2.0
FIRST_ATTEMPT_POLL_S = 0.5
AUTO_PORT_ATTEMPTS = 3
EXIT_GRACE_S = 5.0   # after the actor system's shutdown, for its processes to finish exiting (a loaded host takes
                     # seconds; wait_gone returns as soon as they are gone, so only a hung one costs all of it)


class Launcher:
    def __init__(self, config: dict):
        self.config = config
        self.files = RunFiles(config["gateway"]["state_dir"])
        self.host = config["gateway"]["bind_host"]
        self.port = config["gateway"]["admin_port"]
        self.stop_signal: int | None = None
        self.reloads_asked = 0   # SIGHUPs received; each one is a reload, taken in the wait loop
        self.asys = None
        self.root = None
        self.root_pid = 0
        self.notify = SystemdNotifier.from_environment()
        self.stopping_told = False
        self.next_status_at = 0.0
        # The first attempts of the adapters, told once in the log (what `start` prints: a foreground run under a
        # service manager has no `start` to say it): until then, asked every FIRST_ATTEMPT_POLL_S.
        self.ready_at: float | None = None
        self.first_attempts_told = False
        self.next_first_attempt_check = 0.0
        self.idle_exit = None   # daemon/idle_exit.py IdleExit, once ready, when [gateway] idle_exit_s is set

    # ------------------------------------------------------------------------------------------------ the run
    def run(self) -> int:
        started = time.monotonic()
        refusal = selftest.refusal()   # before the pid lock, any patch, any actor: a refused start leaves nothing
        if refusal:
            log.error("%s", refusal)
            return selftest.EX_INCOMPATIBLE
        if not self.files.acquire_or_log(log):
            return EX_FAILURE
        try:
            self._reap_previous()
            held = self._hold_admin_port()
            if held is None:
                log.error("admin port %s:%d is %s; set [gateway] admin_port to another port (0: any free one)",
                          self.host, self.port, port_holder(self.port, self.files.state_dir))
                return EX_FAILURE
            self._install_signals()
            loopback.install(self.host)
            peer_check.install(peer_credentials.admission(remote_peers(self.config)))
            try:
                frame_mac.install(transport_key(self.config, self.files.run_dir))
            except frame_mac.ThespianMismatch as exc:
                log.error("%s", exc)
                return selftest.EX_INCOMPATIBLE
            except NoClusterSecret as exc:
                log.error("%s", exc)
                return EX_FAILURE
            held_port.install(held)
            ack_wait.install()
            poll_selector.install()
            lazy_identify.install()
            processes.die_with_parent()
            code = self._run_system(started)
        finally:
            held_port.release()
            self._stop_system()
            self.files.release()
        log.info("gateway stopped (exit %d)", code)
        return code

    def _run_system(self, started: float) -> int:
        # every actor module: the running launcher's alone, not the admin commands' (daemon/root_actor.py)
        from actors.root import preload_actor_modules
        for warning in startup_warnings(self.config):
            log.warning("%s", warning)
        preload_actor_modules(self.config)
        self.notify.send("STATUS=starting the actor tree")
        # Thespian's own log (transport errors, refused peers) defaults to the machine-wide /tmp/thespian.log.
        os.environ["THESPLOG_FILE"] = str(self.files.state_dir / "thespian.log")
        self.asys = self._start_actor_system()
        self.root = self.asys.createActor(ROOT_CLASS, globalName=ROOT_NAME)
        self.asys.tell(self.root, Started("root", "Root", None, self.config))
        status = self._wait_ready()
        if status is None:
            return EX_SOFTWARE
        self._write_runtime(started)
        log.info("gateway ready in %.2fs: %d actors, admin %s:%d, state %s", time.monotonic() - started,
                 status.actors_up, self.host, self.port, self.files.state_dir)
        self.ready_at = time.monotonic()
        self.notify.send(f"READY=1\nSTATUS={_status_line(status)}")
        if self.config["gateway"]["idle_exit_s"] > 0:
            from daemon.idle_exit import IdleExit   # only a gateway started on demand reads the activity clock
            from supervision.storage_access import store_path
            self.idle_exit = IdleExit(self.config, store_path(self.config))
        return self._wait_for_end()

    def _start_actor_system(self) -> ActorSystem:
        """The actor system on the admin port. A port the config left to us that another program took between our
        check and the admin's bind (daemon/ports.py) is given up for another one, twice at most; a configured port is
        the operator's, and its failure is theirs to see."""
        for attempt in range(1, AUTO_PORT_ATTEMPTS + 1):
            before = set(processes.descendants(os.getpid()))
            try:
                asys = ActorSystem("multiprocTCPBase", leader_capabilities(self.config, self.port),
                                   logDefs=log_defs_for(self.config))
                held_port.release()       # the admin listens on the port now
                return asys
            except InvalidActorAddress:
                held_port.release()
                if self.config["gateway"]["admin_port"] != 0 or attempt == AUTO_PORT_ATTEMPTS:
                    log.error("the actor system could not start on admin port %s:%d (the admin process did not "
                              "answer within 11 s)", self.host, self.port)
                    raise
                # An admin that did start but never answered would hold the port: nothing of this attempt stays.
                processes.kill_all(set(processes.descendants(os.getpid())) - before)
                processes.reap_zombies()
                taken = self.port
                held = self._hold_admin_port()
                if held is None:
                    raise
                held_port.install(held)
                log.warning("the actor system did not start on admin port %s:%d (its admin did not answer); trying %d",
                            self.host, taken, self.port)
        raise AssertionError("unreachable")

    def _hold_admin_port(self):
        """Hold the admin port (runtime/held_port.py) until the admin listens on it; None if it is taken. Port 0 in
        the config: any free port, recorded in runtime.json where every admin command looks for it (several
        gateways on one host, and test runs, need no port plan; not the kernel's pick: daemon/ports.py says why)."""
        if self.config["gateway"]["admin_port"] != 0:
            return held_port.hold(self.host, self.port)
        for _ in range(AUTO_PORT_ATTEMPTS):
            self.port = any_free_admin_port(self.host)
            held = held_port.hold(self.host, self.port)
            if held is not None:
                return held
        return None

    def _wait_ready(self) -> GatewayStatus | None:
        deadline = time.monotonic() + self.config["gateway"]["ready_timeout_s"]
        while time.monotonic() < deadline and self.stop_signal is None:
            status = ask_for(self.asys, self.root, _status_request(), GatewayStatus, 5, self._early_message)
            if self._gave_up:
                return None
            # Ready is about the fixed tree (supervisors, adapters, watchdog...): a restart resuming a hundred turns
            # has sessions and replies starting and restarting for a while, as part of its normal work.
            if status is not None and status.detail.get("fixed_tree_restarting", 1) == 0:
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
        ending: list[int] = []

        def on_message(message) -> None:
            if isinstance(message, SupervisorGaveUp):
                log.error("the root supervisor gave up: %s", message.reason)
                self._tell_stopping(f"the supervision tree gave up: {message.reason}")
                ending.append(EX_SOFTWARE)
            elif isinstance(message, DrainDone):
                log.info("%s", message.report)
                self._tell_stopping(f"drained: {message.report.in_flight_left} turn(s) left for the next instance")
                ending.append(EX_OK)

        while True:
            if self.stop_signal is not None:
                log.info("signal %s: graceful shutdown", signal.Signals(self.stop_signal).name)
                self._tell_stopping("shutting down: intake stopped, flushing")
                self._graceful_shutdown()
                return EX_OK
            if not ending and self.idle_exit is not None and self.idle_exit.due():
                self._tell_stopping("idle: intake stopped, flushing")
                self._graceful_shutdown()
                return EX_OK
            if self.reloads_asked:
                self.reloads_asked = 0   # several SIGHUPs before we got here read the file once
                self._reload(on_message)
            on_message(self.asys.listen(0.25))
            if not ending and self.notify.enabled and time.monotonic() >= self.next_status_at:
                self._report_status(on_message)
            if not ending and not self.first_attempts_told and time.monotonic() >= self.next_first_attempt_check:
                self._tell_first_attempts(on_message)
            if ending:
                return ending[0]
            processes.reap_zombies()
            if self.root_pid and not processes.is_same_process(self.root_pid, None):
                log.error("the root actor (pid %d) died", self.root_pid)
                return EX_SOFTWARE

    def _tell_first_attempts(self, on_message) -> None:
        """Once every adapter has made its first attempt (or SETTLE_S after ready): one line saying where the web
        chat serves and what does not work and why, at WARNING when something does not."""
        self.next_first_attempt_check = time.monotonic() + FIRST_ATTEMPT_POLL_S
        status = ask_for(self.asys, self.root, _status_request(), GatewayStatus, 5, on_message)
        if status is None:
            return
        rows = status.detail.get("adapters") or []
        connecting, problems = adapters_settled(rows, self.config, self.files.state_dir)
        if connecting and time.monotonic() - (self.ready_at or 0.0) < SETTLE_S:
            return
        self.first_attempts_told = True
        line = serving_line(rows, problems, connecting)
        log.log(logging.WARNING if problems or connecting else logging.INFO, "%s", line)

    def _report_status(self, on_message) -> None:
        """One status walk for the service manager: STATUS= on change, STOPPING=1 once a drain has begun (the
        drain request goes from the admin client to the watchdog; this walk is how the launcher learns of it)."""
        self.next_status_at = time.monotonic() + STATUS_INTERVAL_S
        status = ask_for(self.asys, self.root, _status_request(), GatewayStatus, 5, on_message)
        if status is None:
            return
        if status.draining:
            self._tell_stopping("draining: intake stopped, finishing turns in flight")
        else:
            self.notify.status(_status_line(status))

    def _reload(self, on_message) -> None:
        log.info("SIGHUP: reloading the configuration")
        report = ask_for(self.asys, self.root, ReloadRequest(via="SIGHUP"), ReloadReport, 30, on_message)
        if report is None:
            log.error("SIGHUP: the root did not answer the reload within 30s")
        elif report.ok:
            log.info("SIGHUP: %s", report)   # the root logged the details (what changed, what needs a restart)
        else:
            log.error("SIGHUP: %s", report)

    def _tell_stopping(self, why: str) -> None:
        if not self.stopping_told:
            self.stopping_told = True
            self.notify.send(f"STOPPING=1\nSTATUS={why}")
        else:
            self.notify.status(why)

    def _graceful_shutdown(self) -> None:
        timeout = self.config["watchdog"]["shutdown_timeout_s"]
        reply = ask_for(self.asys, self.root, ShutdownRequest(timeout), ShutdownReady, timeout + 2)
        if reply is None:
            log.warning("no flush confirmation within %ss; stopping anyway", timeout)
        else:
            log.info("shutdown flush: %s", reply)

    # -------------------------------------------------------------------------------------------- the way out
    def _stop_system(self) -> None:
        everything = set(processes.descendants(os.getpid()))
        if self.asys is not None:
            stopper = threading.Thread(target=self.asys.shutdown, daemon=True)
            stopper.start()
            stopper.join(8.0)  # a handler blocked during shutdown stalls Thespian for 10 s: do not wait for it
        everything |= set(processes.descendants(os.getpid()))
        # Actor processes that exited with the system are zombies until reaped (the launcher is their subreaper):
        # dead, not leftovers. Those still exiting get a moment; only what then still runs is killed and reported.
        processes.reap_zombies()
        killed = processes.kill_all(processes.wait_gone(everything, EXIT_GRACE_S))
        left = processes.wait_gone(killed, 5.0)
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
        leftovers = leftovers_of(sid) if sid else []
        if leftovers:
            log.warning("cleaning up %d process(es) left by a previous run (launcher pid %s): %s",
                        len(leftovers), previous.get("launcher_pid"), leftovers)
            processes.kill_all(leftovers)
            processes.wait_gone(leftovers, 5.0)
        else:
            log.info("previous run (launcher pid %s) left no process behind", previous.get("launcher_pid"))

    def _write_runtime(self, started: float) -> None:
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
        launcher = os.getpid()

        def on_hangup(_signum, _frame):
            if os.getpid() == launcher:   # actor processes inherit the handler: a SIGHUP to one of them does nothing
                self.reloads_asked += 1
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)
        signal.signal(signal.SIGHUP, on_hangup)


def _status_request():
    return StatusRequest()


def _parent_pid(pid: int) -> int:
    try:
        return psutil.Process(pid).ppid()
    except (psutil.NoSuchProcess, ValueError):
        return 0


def leftovers_of(sid: int) -> list[int]:
    """The processes of a previous run's session that still run. One killed with the old launcher stays a zombie
    until its parent reaps it: dead already, nothing to clean up, so neither counted nor reported."""
    return [pid for pid in _pids_in_session(sid) if processes.is_running(pid)]


def _pids_in_session(sid: int) -> list[int]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid != os.getpid() and os.getsid(proc.pid) == sid:
                found.append(proc.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return found


def _status_line(status: GatewayStatus) -> str:
    health, problems = health_of(status)
    return (f"{health}: {status.actors_up} actors up, {status.actors_restarting} restarting, "
            f"{status.actors_failed} failed; {status.sessions_live} sessions live; "
            f"{status.obligations_pending} deliveries pending" + "".join(f"; {p}" for p in problems[:3]))


class SystemdNotifier:
    """sd_notify(3) without a dependency: one datagram per state change to $NOTIFY_SOCKET.

    The variable is taken out of the environment when read: actor processes inherit the launcher's environment and
    must not speak for the service (systemd accepts only the main pid by default anyway). A name starting with '@'
    is in the abstract namespace. Without the variable every call is a no-op."""

    def __init__(self, address: str | None):
        self.address = address
        self.enabled = bool(address)
        self.last_status = ""

    @classmethod
    def from_environment(cls) -> "SystemdNotifier":
        return cls(os.environ.pop("NOTIFY_SOCKET", None))

    def status(self, line: str) -> None:
        if line != self.last_status:
            self.send(f"STATUS={line}")

    def send(self, state: str) -> bool:
        if not self.address:
            return False
        for line in state.splitlines():
            if line.startswith("STATUS="):
                self.last_status = line[len("STATUS="):]
        target = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.sendto(state.encode(), target)
            return True
        except OSError as exc:
            log.warning("cannot notify the service manager at %s: %s", self.address, exc)
            return False
