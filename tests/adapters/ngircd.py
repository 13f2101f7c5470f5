"""A real IRC server for the tests: Debian's ngircd, on loopback, its configuration written here.

ngircd reads its ports from the configuration and logs where it listens: its ports come from a range per test
worker, and ``restart`` stops it and starts a new one on the same port (tests/adapters/loopback_server.py).

A missing ngircd fails the tests with an install hint; outside CI (``CI`` unset) the tests that need it skip.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional

import pytest

from tests.adapters.loopback_server import LoopbackServer, worker_ports

NGIRCD = shutil.which("ngircd") or ("/usr/sbin/ngircd" if os.path.exists("/usr/sbin/ngircd") else None)
INSTALL_HINT = "ngircd is not installed: apt-get install ngircd (.ci/run installs it)"
PASSWORD = "irc-test-password"
BASE_PORT = 26700


def require_ngircd() -> str:
    if NGIRCD is None:
        if os.environ.get("CI"):
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)
    return NGIRCD


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


class Ngircd(LoopbackServer):
    label = "ngircd"

    def __init__(self, workdir: Path, ports: Optional[range] = None, ping_timeout_s: int = 120,
                 pong_timeout_s: int = 20):
        """``ping_timeout_s``, ``pong_timeout_s``: a client silent this long is pinged, and dropped if no PONG comes
        within the second (ngircd's defaults; shorter where a test needs a vanished client gone soon, but ngircd
        takes at least 5 s for each)."""
        super().__init__(workdir, ports or worker_ports(BASE_PORT))
        self.password = PASSWORD
        self.ping_timeout_s, self.pong_timeout_s = ping_timeout_s, pong_timeout_s

    def command(self, port: int) -> list[str]:
        binary = require_ngircd()
        config = self.workdir / "ngircd.conf"
        config.write_text(CONFIG.format(port=port, password=self.password, ping_timeout=self.ping_timeout_s,
                                         pong_timeout=self.pong_timeout_s))
        os.chmod(self.workdir, 0o755)
        config.chmod(0o644)
        return [binary, "-n", "-f", str(config)]

    def listening(self, line: str, port: int) -> bool:
        return f"Now listening on [127.0.0.1]:{port}" in line
