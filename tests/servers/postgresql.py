"""A real PostgreSQL for the tests: Debian's server binaries (package ``postgresql``), a throwaway cluster made here.

``initdb`` makes the cluster in a temporary directory with password authentication (scram) for its one role, and
``postgres`` serves it on a free loopback port and on a unix socket inside that directory, never on the machine's
shared socket directory. PostgreSQL refuses to run as root; the tests run as root under CI, so then the cluster's
files belong to ``nobody`` and both commands run as that user (``runuser``). Durability settings are off (fsync,
synchronous_commit): the tests kill clients, never the machine, and a commit the server acknowledged is visible to
every later connection either way.

``create_database()`` gives a fresh database (one per test module); ``dsn(database)`` the libpq URL without the
password, which a client gets from the environment or a file, as the gateway's configuration asks
(``PASSWORD_ENV``). A missing server fails the tests with the install hint under ``CI``; elsewhere they skip.

In a network namespace of the cluster lab (tests/cluster/netns.py): ``command_prefix`` runs both commands there,
``listen`` is the namespace's address and ``hba_networks`` the networks allowed in (scram, like loopback). The tests'
own connections (``local_dsn``) then go through the unix socket, which a filesystem path reaches from any network
namespace; ``dsn`` is what the other hosts of the lab connect to.
"""
from __future__ import annotations

import glob
import itertools
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.servers.umask import server_umask

INSTALL_HINT = "PostgreSQL's server is not installed: apt-get install postgresql (.ci/run installs it)"
ROLE = "gateway"
PASSWORD_ENV = "GATEWAY_TEST_PGPASSWORD"
START_S = 60.0   # initdb plus the first start on a loaded 2-core machine
SERVER_USER = "nobody"


def server_bin() -> Path | None:
    """The newest installed server's binaries (Debian keeps them out of PATH, per major version)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def require_postgresql() -> Path:
    found = server_bin()
    if found is None or not (found / "postgres").exists():
        if os.environ.get("CI"):
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgreSQL:
    def __init__(self, listen: str = "127.0.0.1", hba_networks: tuple[str, ...] = (),
                 command_prefix: tuple[str, ...] = (), port: int = 0) -> None:
        """``port`` 0: a free loopback port (tried again where it was taken meanwhile); a namespace of its own
        needs none of that, any port is free there."""
        self.bin = require_postgresql()
        self.listen, self.hba_networks, self.command_prefix = listen, tuple(hba_networks), list(command_prefix)
        self.fixed_port = port
        self.root = Path(tempfile.mkdtemp(prefix="gateway-pg-"))
        self.data, self.socket_dir = self.root / "data", self.root / "run"
        self.password = secrets.token_urlsafe(18)
        self.port = 0
        self.process: subprocess.Popen | None = None
        self._names = itertools.count(1)
        self._as_root = os.geteuid() == 0

    def _command(self, *argv: str) -> list[str]:
        return self.command_prefix + (["runuser", "-u", SERVER_USER, "--", *argv] if self._as_root else list(argv))

    def start(self) -> "PostgreSQL":
        """initdb, then the server on a free port (tried again on another where the port was taken meanwhile);
        where it never comes up, the directory is removed and the error carries the end of its log."""
        try:
            self._init()
            for _attempt in range(1 if self.fixed_port else 5):
                self.port = self.fixed_port or free_port()
                if self._serve():
                    return self
            raise RuntimeError(f"PostgreSQL did not start; its log ends:\n{self.log()[-3000:]}")
        except BaseException:
            self.stop()
            raise

    def _init(self) -> None:
        with server_umask():
            self.socket_dir.mkdir()
            pwfile = self.root / "pwfile"
            pwfile.write_text(self.password + "\n")
            if self._as_root:
                user = pwd.getpwnam(SERVER_USER)
                for path in (self.root, self.socket_dir, pwfile):
                    os.chown(path, user.pw_uid, user.pw_gid)
            os.chmod(self.root, 0o700)
            done = subprocess.run(self._command(str(self.bin / "initdb"), "-D", str(self.data), "-U", ROLE,
                                                f"--pwfile={pwfile}", "--auth=scram-sha-256", "--no-sync",
                                                "--encoding=UTF8", "--locale=C.UTF-8"),
                                  capture_output=True, text=True, timeout=START_S)
            pwfile.unlink()
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")
        if self.hba_networks:   # initdb allows loopback and the socket; these networks the same way (scram)
            with open(self.data / "pg_hba.conf", "a", encoding="utf-8") as hba:
                hba.writelines(f"host all all {network} scram-sha-256\n" for network in self.hba_networks)

    def _serve(self) -> bool:
        settings = {"listen_addresses": self.listen, "port": str(self.port),
                    "unix_socket_directories": str(self.socket_dir), "fsync": "off", "synchronous_commit": "off",
                    "full_page_writes": "off", "max_connections": "200", "logging_collector": "off"}
        argv = [str(self.bin / "postgres"), "-D", str(self.data)]
        for key, value in settings.items():
            argv += ["-c", f"{key}={value}"]
        log = open(self.root / "server.log", "ab")
        try:
            self.process = subprocess.Popen(self._command(*argv), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.process = None
                return False   # the port was taken meanwhile (or a real failure: the caller reports the log)
            if self._accepts():
                return True
            time.sleep(0.1)
        raise RuntimeError(f"PostgreSQL did not accept connections within {START_S:.0f}s; its log ends:\n"
                           f"{self.log()[-3000:]}")

    def _accepts(self) -> bool:
        import psycopg
        try:
            psycopg.connect(self.local_dsn("postgres"), password=self.password, connect_timeout=5).close()
            return True
        except psycopg.OperationalError:
            return False

    def dsn(self, database: str) -> str:
        """The libpq URL of ``database`` at the address the server listens on, without its password."""
        return f"postgresql://{ROLE}@{self.listen}:{self.port}/{database}"

    def local_dsn(self, database: str) -> str:
        """The URL this test process uses: ``dsn`` on loopback; through the unix socket when the server runs in a
        network namespace of its own (its address is not routed from here)."""
        if not self.command_prefix:
            return self.dsn(database)
        return f"postgresql://{ROLE}@/{database}?host={self.socket_dir}&port={self.port}"

    def create_database(self) -> str:
        """A fresh, empty database; returns its name."""
        import psycopg
        name = f"test_{next(self._names)}_{secrets.token_hex(3)}"
        with psycopg.connect(self.local_dsn("postgres"), password=self.password, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        import psycopg
        with psycopg.connect(self.local_dsn("postgres"), password=self.password, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def log(self) -> str:
        try:
            return (self.root / "server.log").read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """Fast shutdown (SIGINT to the postmaster itself: runuser passes on no SIGINT; clients are cut, nothing
        waits for them), then the directory is removed."""
        if self.process is not None:
            try:
                os.kill(int((self.data / "postmaster.pid").read_text().split()[0]), signal.SIGINT)
            except (OSError, ValueError, IndexError):
                self.process.kill()   # no postmaster.pid: it never got as far as serving
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        shutil.rmtree(self.root, ignore_errors=True)
