"""A real server from Debian's packages run by the tests on loopback (ngircd, Prosody): what they share.

Such servers read their port from a configuration file and cannot be given port 0, so each tries ports from a range
of its own: one range per xdist worker (``PYTEST_XDIST_WORKER``), the next port after a bind failure, and the port
is the one the server's log says it listens on. ``restart`` stops the server (SIGTERM: every connection is cut) and
starts a new one on the same port; ``crash`` is SIGKILL.

A subclass writes its configuration and names its command (``command``), and says which log line means it listens
and which that it could not (``listening``, ``refused``).
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Optional

from tests.servers.umask import server_umask

PORTS_PER_WORKER = 100
START_S = 20.0


def _die_with_parent() -> None:
    """preexec_fn: the kernel kills the server when the test process dies, however it dies (PR_SET_PDEATHSIG): a
    killed test run leaves no server holding its port."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def worker_ports(base_port: int) -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    number = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    base = base_port + PORTS_PER_WORKER * (number % 20)
    return range(base, base + PORTS_PER_WORKER)


class LoopbackServer:
    label = "server"

    def __init__(self, workdir: Path, ports: range):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ports = ports
        self.port = 0
        self.proc: Optional[subprocess.Popen] = None
        self.log_lines: list[str] = []
        self._lock = threading.Lock()

    # -- what a server says of itself
    def command(self, port: int) -> list[str]:
        """Write the configuration for ``port``; the command line that runs the server in the foreground."""
        raise NotImplementedError

    def listening(self, line: str, port: int) -> bool:
        raise NotImplementedError

    def refused(self, line: str, port: int) -> bool:
        """The log line says the server cannot listen on ``port`` (another port is then tried)."""
        return False

    # -- running it
    def start(self):
        tried = []
        for port in ([self.port] if self.port else self.ports):
            if self._start_on(port):
                self.port = port
                return self
            tried.append(port)
        raise RuntimeError(f"{self.label} listened on none of the ports {tried[0]}..{tried[-1]}: "
                           f"{self.log_lines[-5:]}")

    def _start_on(self, port: int) -> bool:
        with server_umask():      # the configuration the subclass wrote, and what the server makes, its user reads
            return self._launch_on(port)

    def _launch_on(self, port: int) -> bool:
        proc = subprocess.Popen(self.command(port), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, errors="replace", preexec_fn=_die_with_parent)
        listening, refused, ended = threading.Event(), threading.Event(), threading.Event()

        def pump():
            for line in proc.stdout:
                with self._lock:
                    self.log_lines.append(line.rstrip("\n"))
                if self.listening(line, port):
                    listening.set()
                elif self.refused(line, port):
                    refused.set()
            ended.set()
        threading.Thread(target=pump, name=f"{self.label}-{port}", daemon=True).start()
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline and not (listening.is_set() or refused.is_set() or ended.is_set()):
            listening.wait(0.02)
        if listening.is_set():
            self.proc = proc
            return True
        proc.kill()
        proc.wait(10)
        return False

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def crash(self) -> None:
        """SIGKILL: the server dies with whatever it had read and not yet handled."""
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.kill()
            proc.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        with self._lock:
            return "\n".join(self.log_lines)
