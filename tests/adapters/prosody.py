"""A real XMPP server for the tests: Debian's Prosody, on loopback, its configuration, certificate and users made here.

Each server is a throwaway instance: a configuration file in the test's directory (its data, pid file and logs
beside it), a self-signed certificate for its domain made with ``openssl`` (the adapter trusts it through its
``ca_file`` option: verification stays on), client connections with STARTTLS required, stream management
(XEP-0198) with a short hibernation, offline storage, and a MUC service at ``rooms.<domain>``. Users are made with
``prosodyctl --config`` on the same file (``register``), whether or not the server runs.

Like ngircd, Prosody reads its port from the configuration: its ports come from a range per test worker, and
``restart`` stops it and starts a new one on the same port (tests/adapters/loopback_server.py), with the same data
(accounts, offline messages, rooms).

A missing Prosody fails the tests with an install hint under ``CI``; elsewhere the tests that need it skip.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

import pytest

from tests.adapters.loopback_server import LoopbackServer, worker_ports
from tests.servers.umask import server_umask

PROSODY = shutil.which("prosody") or ("/usr/bin/prosody" if os.path.exists("/usr/bin/prosody") else None)
PROSODYCTL = shutil.which("prosodyctl") or ("/usr/bin/prosodyctl" if os.path.exists("/usr/bin/prosodyctl") else None)
INSTALL_HINT = "Prosody is not installed: apt-get install prosody (.ci/run installs it)"
DOMAIN = "xmpp.test"
ROOMS = f"rooms.{DOMAIN}"
UPLOAD = f"upload.{DOMAIN}"
BASE_PORT = 28700
HTTP_PORT_OFFSET = 2000            # the HTTP port (file uploads) beside the client port, past every worker's range
UPLOAD_LIMIT = 1024 * 1024

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
http_ports = {{ {http_port} }}
http_interfaces = {{ "127.0.0.1" }}
http_external_url = "http://127.0.0.1:{http_port}/"
http_default_host = "{upload}"   -- the addresses name 127.0.0.1: served as the upload host
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
Component "{upload}" "http_file_share"
  http_file_share_size_limit = {upload_limit}
"""


def require_prosody() -> str:
    if PROSODY is None or PROSODYCTL is None:
        if os.environ.get("CI"):
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)
    return PROSODY


class Prosody(LoopbackServer):
    label = "prosody"

    def __init__(self, workdir: Path, ports: Optional[range] = None, hibernation_s: int = 30):
        """``hibernation_s``: how long a session whose connection died waits to be resumed (XEP-0198)."""
        super().__init__(workdir, ports or worker_ports(BASE_PORT))
        self.domain, self.rooms, self.upload = DOMAIN, ROOMS, UPLOAD
        self.hibernation_s = hibernation_s
        self.ca_file = self.workdir / "certs" / "cert.pem"
        self.config = self.workdir / "prosody.cfg.lua"
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
                                             hibernation=self.hibernation_s, upload=UPLOAD,
                                             http_port=port + HTTP_PORT_OFFSET, upload_limit=UPLOAD_LIMIT))

    @property
    def upload_origin(self) -> str:
        """The upload service's plain-HTTP origin (an adapter's ``http_file_origins``): beside the client port."""
        return f"http://127.0.0.1:{self.port + HTTP_PORT_OFFSET}"

    def command(self, port: int) -> list[str]:
        binary = require_prosody()
        self._write_config(port)
        return [binary, "--config", str(self.config), "-F"]

    def listening(self, line: str, port: int) -> bool:
        return f"Activated service 'c2s' on [127.0.0.1]:{port}" in line

    def refused(self, line: str, port: int) -> bool:
        return "Failed to open server port" in line

    # -- users
    def register(self, user: str, password: str) -> str:
        """The account ``user@domain`` with ``password`` (made once; the server need not run) -> its JID."""
        require_prosody()
        if user not in self._users:
            with server_umask():   # the account's file is the server user's to read
                if not self.config.exists():
                    self._write_config(self.port or self.ports[0])
                result = subprocess.run([PROSODYCTL, "--config", str(self.config), "register", user, DOMAIN,
                                         password], capture_output=True, text=True, timeout=60)
            if result.returncode != 0:
                raise RuntimeError(f"prosodyctl register {user}: {result.stdout[-300:]} {result.stderr[-300:]}")
            self._users.add(user)
        return f"{user}@{DOMAIN}"
