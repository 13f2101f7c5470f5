"""A real IRC server for the tests: Debian's ngircd, on loopback, its configuration written here.

ngircd cannot be given port 0 (it reads its ports from the configuration and logs where it listens), so each
server tries ports from a range of its own: one range per xdist worker (``PYTEST_XDIST_WORKER``), the next port
after a bind failure, and the port is the one the server's log says it listens on. ``restart`` stops the server
(SIGTERM: every connection is cut) and starts a new one on the same port.

A missing ngircd fails the tests with an install hint; outside CI (``CI`` unset) the tests that need it skip.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Optional

import pytest

NGIRCD = shutil.which("ngircd") or ("/usr/sbin/ngircd" if os.path.exists("/usr/sbin/ngircd") else None)
INSTALL_HINT = "ngircd is not installed: apt-get install ngircd (.ci/run installs it)"
PASSWORD = "irc-test-password"
BASE_PORT = 26700
PORTS_PER_WORKER = 100
START_S = 20.0


def require_ngircd() -> str:
    if NGIRCD is None:
        if os.environ.get("CI"):
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)
    return NGIRCD


def worker_ports() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    number = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    base = BASE_PORT + PORTS_PER_WORKER * (number % 20)
    return range(base, base + PORTS_PER_WORKER)


CONFIG = """[Global]
Name = irc.test
Info = gateway tests
Listen = 127.0.0.1
Ports = {port}
Password = {password}
MotdPhrase = gateway tests
AdminInfo1 = tests
AdminInfo2 = loopback
AdminEMail = tests@localhost
[Limits]
MaxNickLength = 30
MaxConnectionsIP = 0
MaxJoins = 0
PingTimeout = {ping_timeout}
PongTimeout = {pong_timeout}
[Options]
DNS = no
Ident = no
PAM = no
"""


class Ngircd:
    def __init__(self, workdir: Path, ports: Optional[range] = None, ping_timeout_s: int = 120,
                 pong_timeout_s: int = 20):
        """``ping_timeout_s``, ``pong_timeout_s``: a client silent this long is pinged, and dropped if no PONG comes
        within the second (ngircd's defaults; shorter where a test needs a vanished client gone soon, but ngircd
        takes at least 5 s for each)."""
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ports = ports or worker_ports()
        self.port = 0
        self.password = PASSWORD
        self.ping_timeout_s, self.pong_timeout_s = ping_timeout_s, pong_timeout_s
        self.proc: Optional[subprocess.Popen] = None
        self.log_lines: list[str] = []
        self._lock = threading.Lock()

    def start(self) -> "Ngircd":
        binary = require_ngircd()
        tried = []
        for port in ([self.port] if self.port else self.ports):
            if self._start_on(binary, port):
                self.port = port
                return self
            tried.append(port)
        raise RuntimeError(f"ngircd listened on none of the ports {tried[0]}..{tried[-1]}: {self.log_lines[-5:]}")

    def _start_on(self, binary: str, port: int) -> bool:
        config = self.workdir / "ngircd.conf"
        config.write_text(CONFIG.format(port=port, password=self.password, ping_timeout=self.ping_timeout_s,
                                         pong_timeout=self.pong_timeout_s))
        os.chmod(self.workdir, 0o755)
        config.chmod(0o644)
        proc = subprocess.Popen([binary, "-n", "-f", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, errors="replace")
        listening, ended = threading.Event(), threading.Event()

        def pump():
            for line in proc.stdout:
                with self._lock:
                    self.log_lines.append(line.rstrip("\n"))
                if f"Now listening on [127.0.0.1]:{port}" in line:
                    listening.set()
            ended.set()
        threading.Thread(target=pump, name=f"ngircd-{port}", daemon=True).start()
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline and not listening.is_set() and not ended.is_set():
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
