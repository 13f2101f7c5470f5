"""A real XMPP server for the tests: Debian's Prosody, on loopback, its configuration, certificate and users made here.

Each server is a throwaway instance: a configuration file in the test's directory (its data, pid file and logs
beside it), a self-signed certificate for its domain made with ``openssl`` (the adapter trusts it through its
``ca_file`` option: verification stays on), client connections with STARTTLS required, stream management
(XEP-0198) with a short hibernation, offline storage, and a MUC service at ``rooms.<domain>``. Users are made with
``prosodyctl --config`` on the same file (``register``), whether or not the server runs.

Like ngircd (tests/adapters/ngircd.py), Prosody reads its port from the configuration, so each server tries ports
from a range of its own (one per xdist worker) until its log says the client port is open. ``restart`` stops the
server (SIGTERM: every connection is cut) and starts a new one on the same port with the same data (accounts,
offline messages, rooms); ``crash`` is SIGKILL.

A missing Prosody fails the tests with an install hint under ``CI``; elsewhere the tests that need it skip.
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

PROSODY = shutil.which("prosody") or ("/usr/bin/prosody" if os.path.exists("/usr/bin/prosody") else None)
PROSODYCTL = shutil.which("prosodyctl") or ("/usr/bin/prosodyctl" if os.path.exists("/usr/bin/prosodyctl") else None)
INSTALL_HINT = "Prosody is not installed: apt-get install prosody (.ci/run installs it)"
DOMAIN = "xmpp.test"
ROOMS = f"rooms.{DOMAIN}"
BASE_PORT = 28700
PORTS_PER_WORKER = 100
START_S = 20.0

CONFIG = """-- a throwaway Prosody for the gateway's tests (tests/adapters/prosody.py)
run_as_root = true
prosody_user = "root"
daemonize = false
pidfile = "{dir}/prosody.pid"
data_path = "{dir}/data"
certificates = "{dir}/certs"
log = {{ {{ levels = {{ min = "info" }}, to = "console" }} }}
modules_enabled = {{ "roster"; "saslauth"; "tls"; "disco"; "ping"; "smacks"; "offline"; "posix" }}
modules_disabled = {{ "s2s"; "admin_shell"; "admin_socket" }}
c2s_ports = {{ {port} }}
c2s_interfaces = {{ "127.0.0.1" }}
c2s_direct_tls_ports = {{}}
legacy_ssl_ports = {{}}
s2s_ports = {{}}
http_ports = {{}}
https_ports = {{}}
component_ports = {{}}
c2s_require_encryption = true
allow_unencrypted_plain_auth = false
authentication = "internal_hashed"
storage = "internal"
smacks_hibernation_time = {hibernation}
limits = {{ c2s = {{ rate = "10mb/s"; }}; }}
ssl = {{ key = "{dir}/certs/key.pem"; certificate = "{dir}/certs/cert.pem"; }}
VirtualHost "{domain}"
Component "{rooms}" "muc"
  restrict_room_creation = false
  muc_room_locking = false
  muc_room_default_history_length = 20
"""


def require_prosody() -> str:
    if PROSODY is None or PROSODYCTL is None:
        if os.environ.get("CI"):
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)
    return PROSODY


def worker_ports() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    number = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    base = BASE_PORT + PORTS_PER_WORKER * (number % 20)
    return range(base, base + PORTS_PER_WORKER)


class Prosody:
    def __init__(self, workdir: Path, ports: Optional[range] = None, hibernation_s: int = 30):
        """``hibernation_s``: how long a session whose connection died waits to be resumed (XEP-0198)."""
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ports = ports or worker_ports()
        self.port = 0
        self.domain, self.rooms = DOMAIN, ROOMS
        self.hibernation_s = hibernation_s
        self.ca_file = self.workdir / "certs" / "cert.pem"
        self.config = self.workdir / "prosody.cfg.lua"
        self.proc: Optional[subprocess.Popen] = None
        self.log_lines: list[str] = []
        self._lock = threading.Lock()
        self._users: set[str] = set()

    # -- the instance
    def _certificate(self) -> None:
        if self.ca_file.exists():
            return
        self.ca_file.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3", "-subj",
                        f"/CN={DOMAIN}", "-addext", f"subjectAltName=DNS:{DOMAIN},DNS:{ROOMS}",
                        "-keyout", str(self.ca_file.parent / "key.pem"), "-out", str(self.ca_file)],
                       check=True, capture_output=True, timeout=60)

    def _write_config(self, port: int) -> None:
        self._certificate()
        (self.workdir / "data").mkdir(exist_ok=True)
        self.config.write_text(CONFIG.format(dir=self.workdir, port=port, domain=DOMAIN, rooms=ROOMS,
                                             hibernation=self.hibernation_s))

    def start(self) -> "Prosody":
        binary = require_prosody()
        tried = []
        for port in ([self.port] if self.port else self.ports):
            if self._start_on(binary, port):
                self.port = port
                return self
            tried.append(port)
        raise RuntimeError(f"Prosody listened on none of the ports {tried[0]}..{tried[-1]}: {self.log_lines[-5:]}")

    def _start_on(self, binary: str, port: int) -> bool:
        self._write_config(port)
        proc = subprocess.Popen([binary, "--config", str(self.config), "-F"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, errors="replace",
                                start_new_session=True)
        listening, failed, ended = threading.Event(), threading.Event(), threading.Event()

        def pump():
            for line in proc.stdout:
                with self._lock:
                    self.log_lines.append(line.rstrip("\n"))
                if f"Activated service 'c2s' on [127.0.0.1]:{port}" in line:
                    listening.set()
                elif "Failed to open server port" in line or "Could not listen" in line:
                    failed.set()
            ended.set()
        threading.Thread(target=pump, name=f"prosody-{port}", daemon=True).start()
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline and not (listening.is_set() or failed.is_set() or ended.is_set()):
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
            proc.wait(15)
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

    # -- users
    def register(self, user: str, password: str) -> str:
        """The account ``user@domain`` with ``password`` (made once; the server need not run) -> its JID."""
        require_prosody()
        if user not in self._users:
            if not self.config.exists():
                self._write_config(self.port or self.ports[0])
            result = subprocess.run([PROSODYCTL, "--config", str(self.config), "register", user, DOMAIN, password],
                                    capture_output=True, text=True, timeout=60)
            if result.returncode != 0:
                raise RuntimeError(f"prosodyctl register {user}: {result.stdout[-300:]} {result.stderr[-300:]}")
            self._users.add(user)
        return f"{user}@{DOMAIN}"
