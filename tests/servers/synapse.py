"""A real Synapse homeserver for the tests: installed from PyPI into a virtualenv of its own (its pins never touch
the gateway's test environment), started on a loopback port, one per test process (an xdist worker), stopped
when the process exits.

    python -m tests.servers.synapse install     # what .ci/run does; a developer runs the same once
    python -m tests.servers.synapse run         # start one by hand and print its URL (Ctrl-C stops it)

The virtualenv is ``$XDG_CACHE_HOME/agent-gateway/synapse-venv`` (``~/.cache`` without XDG_CACHE_HOME), or
``$GATEWAY_SYNAPSE_VENV``. Configuration, written fresh for each server: SQLite, the client API only (no
federation listener, no key servers), registration by shared secret only (``/_synapse/admin/v1/register``,
HMAC-SHA1), bcrypt at its cheapest rounds (registration is per test user), message rate limits lifted (a test that
wants a 429 lowers one user's with the admin API: ``limit_messages``), a signing key generated here.

Synapse cannot listen on port 0 and say which port it got, so a port is chosen from a range of this worker's own
(by ``PYTEST_XDIST_WORKER``, below the kernel's ephemeral range where the daemons' port-0 sockets land) and, if
something else holds it (Synapse then exits at start), the next pick is tried. Health: ``GET /health`` answers
``OK``. Without Synapse installed the tests fail under ``CI`` with the install command, and skip elsewhere.
"""
from __future__ import annotations

import atexit
import base64
import ctypes
import hashlib
import hmac
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Optional

REQUIREMENT = "matrix-synapse>=1.120,<2"
SERVER_NAME = "gateway.test"
START_DEADLINE_S = 60.0
PORT_TRIES = 8
INSTALL_HINT = "install it with: python -m tests.servers.synapse install"


def venv_dir() -> Path:
    if os.environ.get("GATEWAY_SYNAPSE_VENV"):
        return Path(os.environ["GATEWAY_SYNAPSE_VENV"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "agent-gateway" / "synapse-venv"


def venv_python() -> Path:
    return venv_dir() / "bin" / "python"


def installed() -> bool:
    return venv_python().exists() and subprocess.run(
        [str(venv_python()), "-c", "import synapse.app.homeserver"], capture_output=True).returncode == 0


def install() -> float:
    """Create the virtualenv and install Synapse into it; the seconds it took."""
    started = time.monotonic()
    if not venv_python().exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv_dir())], check=True)
    subprocess.run([str(venv_python()), "-m", "pip", "install", "-q", REQUIREMENT], check=True)
    return time.monotonic() - started


def require_installed() -> None:
    """Fail (under CI) or skip (elsewhere) a test that needs Synapse when it is not installed."""
    if installed():
        return
    import pytest
    message = f"Synapse is not installed in {venv_dir()}: {INSTALL_HINT}"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _die_with_parent() -> None:
    """preexec_fn: the kernel kills Synapse when the test process dies, however it dies (PR_SET_PDEATHSIG)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def worker_ports() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    number = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 15
    base = 20000 + (number % 16) * 700
    return range(base, base + 700)


def signing_key() -> str:
    """A Synapse signing key file's line: algorithm, key version, the unpadded base64 of a 32-byte ed25519 seed."""
    seed = base64.b64encode(os.urandom(32)).decode().rstrip("=")
    return f"ed25519 a_{uuid.uuid4().hex[:4]} {seed}\n"


def config_yaml(root: Path, port: int, shared_secret: str) -> str:
    lifted = "{per_second: 10000, burst_count: 10000}"
    return f"""
server_name: "{SERVER_NAME}"
pid_file: "{root}/homeserver.pid"
listeners:
  - port: {port}
    bind_addresses: ['127.0.0.1']
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "{root}/homeserver.db"
media_store_path: "{root}/media"
signing_key_path: "{root}/signing.key"
log_config: "{root}/log.yaml"
registration_shared_secret: "{shared_secret}"
enable_registration: false
bcrypt_rounds: 4
report_stats: false
macaroon_secret_key: "{uuid.uuid4().hex}"
form_secret: "{uuid.uuid4().hex}"
trusted_key_servers: []
suppress_key_server_warning: true
enable_metrics: false
url_preview_enabled: false
presence:
  enabled: false
rc_message: {lifted}
rc_registration: {lifted}
rc_login:
  address: {lifted}
  account: {lifted}
  failed_attempts: {lifted}
rc_joins:
  local: {lifted}
  remote: {lifted}
rc_invites:
  per_room: {lifted}
  per_user: {lifted}
  per_issuer: {lifted}
rc_admin_redaction: {lifted}
"""


LOG_YAML = """
version: 1
formatters:
  precise:
    format: '%(asctime)s - %(name)s - %(lineno)d - %(levelname)s - %(request)s - %(message)s'
handlers:
  file:
    class: logging.FileHandler
    formatter: precise
    filename: {log}
root:
  level: WARNING
  handlers: [file]
loggers:
  synapse.app: {{level: INFO}}
disable_existing_loggers: false
"""


class Synapse:
    """One homeserver under ``root``: ``start()`` (port chosen, health checked), ``stop()``, ``register(...)``,
    ``call(...)`` for the client and admin APIs. ``started_in_s``: how long the last start took."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.shared_secret = uuid.uuid4().hex
        self.port = 0
        self.process: Optional[subprocess.Popen] = None
        self.started_in_s = 0.0
        self._admin: Optional[dict] = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.root / "homeserver.log"

    def start(self) -> "Synapse":
        require_installed()
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "signing.key").write_text(signing_key())
        (self.root / "log.yaml").write_text(LOG_YAML.format(log=self.log_file))
        started, tried = time.monotonic(), []
        candidates = random.sample(worker_ports(), PORT_TRIES)
        for port in candidates:
            tried.append(port)
            if self._start_on(port):
                self.started_in_s = time.monotonic() - started
                return self
        raise RuntimeError(f"Synapse could not listen on any of ports {tried}; its log:\n{self.log_tail()}")

    def _start_on(self, port: int) -> bool:
        """True once healthy on ``port``; False if the port was taken (Synapse exited); raises otherwise."""
        self.port = port
        (self.root / "homeserver.yaml").write_text(config_yaml(self.root, port, self.shared_secret))
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                [str(venv_python()), "-m", "synapse.app.homeserver", "--config-path", str(self.root / "homeserver.yaml")],
                cwd=self.root, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent)
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                if "Address already in use" in self.log_tail():
                    return False
                raise RuntimeError(f"Synapse exited with {self.process.returncode} at start:\n{self.log_tail()}")
            if self.healthy():
                return True
            time.sleep(0.05)   # polling the health endpoint until the deadline
        self.stop()
        raise RuntimeError(f"Synapse was not healthy within {START_DEADLINE_S:.0f}s:\n{self.log_tail()}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.base_url + "/health", timeout=2) as answer:
                return answer.status == 200 and answer.read().strip() == b"OK"
        except (OSError, urllib.error.URLError):
            return False

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)

    # ------------------------------------------------------------------------------------------------ the APIs
    def call(self, method: str, path: str, token: Optional[str] = None, body: Optional[dict] = None,
             params: Optional[dict] = None, expect: tuple = (200,)) -> Any:
        """One request to the client or admin API (``path`` from ``/_matrix`` or ``/_synapse``): its JSON answer;
        an unexpected status raises with the server's errcode."""
        url = self.base_url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                status, text = answer.status, answer.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        payload = json.loads(text) if text else {}
        if status not in expect:
            raise AssertionError(f"{method} {path}: {status} {payload}")
        return payload

    def register(self, localpart: str, admin: bool = False) -> dict:
        """A new user by the shared secret: {"user_id", "access_token", "device_id", "password"}."""
        nonce = self.call("GET", "/_synapse/admin/v1/register")["nonce"]
        password = uuid.uuid4().hex
        mac = hmac.new(self.shared_secret.encode(), digestmod=hashlib.sha1)
        mac.update(b"\x00".join([nonce.encode(), localpart.encode(), password.encode(),
                                 b"admin" if admin else b"notadmin"]))
        user = self.call("POST", "/_synapse/admin/v1/register", body={
            "nonce": nonce, "username": localpart, "password": password, "admin": admin, "mac": mac.hexdigest()})
        return dict(user, password=password)

    def login(self, user: dict) -> dict:
        """A new device (access token) of a registered user."""
        return self.call("POST", "/_matrix/client/v3/login", body={
            "type": "m.login.password", "identifier": {"type": "m.id.user", "user": user["user_id"]},
            "password": user["password"]})

    @property
    def admin(self) -> dict:
        if self._admin is None:
            self._admin = self.register(f"admin-{uuid.uuid4().hex[:8]}", admin=True)
        return self._admin

    def limit_messages(self, user_id: str, per_second: int, burst: int) -> None:
        """Override one user's message rate limit (0, 0: none at all)."""
        self.call("POST", f"/_synapse/admin/v1/users/{urllib.parse.quote(user_id)}/override_ratelimit",
                  self.admin["access_token"], {"messages_per_second": per_second, "burst_count": burst})


_shared: Optional[Synapse] = None


def shared_synapse() -> Synapse:
    """The test process's one Synapse, started on first use (a test session's worth of tests share it: each
    module registers its own users, so they never see each other's rooms), stopped at exit."""
    global _shared
    if _shared is None or _shared.process is None or _shared.process.poll() is not None:
        root = Path(tempfile.mkdtemp(prefix="synapse-"))
        server = Synapse(root)
        server.start()
        atexit.register(lambda: (server.stop(), shutil.rmtree(root, ignore_errors=True)))
        _shared = server
    return _shared


def main(argv: list[str]) -> int:
    if argv[:1] == ["install"]:
        seconds = install()
        print(f"Synapse installed in {venv_dir()} in {seconds:.1f}s")
        return 0
    if argv[:1] == ["run"]:
        server = Synapse(Path(tempfile.mkdtemp(prefix="synapse-"))).start()
        print(f"Synapse at {server.base_url}, healthy in {server.started_in_s:.2f}s; Ctrl-C stops it")
        try:
            server.process.wait()
        except KeyboardInterrupt:
            server.stop()
        return 0
    print("usage: python -m tests.servers.synapse install | run", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
