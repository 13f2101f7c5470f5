"""The real daemon with a web chat adapter, for the tests of this package."""
from __future__ import annotations

import re
from pathlib import Path

from tests.actor_system import wait_for
from tests.gateway import Gateway

ADAPTER = "web"
SERVING = re.compile(r"web: web chat serving on http://(\S+)/ \(port (\d+)\)")


def webchat_gateway(tmp_path: Path, port: int, extra: str = "", **kwargs) -> Gateway:
    return Gateway(tmp_path, extra_toml=f"""
[adapters.{ADAPTER}]
type = "webchat"
port = {port}
{extra}
""", **kwargs)


def served_port(gw: Gateway, timeout: float = 20) -> int:
    """The port the adapter logged (the last one: a restarted gateway logs again)."""
    try:
        found = wait_for(lambda: SERVING.findall(gw.log()), timeout, 0.05, "the web chat's serving line")
    except AssertionError as exc:   # say why: a bind that failed, an adapter restarting, a log that stopped
        tail = "\n".join(gw.log().splitlines()[-30:])
        raise AssertionError(f"{exc}; the gateway log ends with:\n{tail}") from None
    return int(found[-1][1])


def log_lines(gw: Gateway, fragment: str) -> list[str]:
    return [line for line in gw.log().splitlines() if fragment in line]


def wait_log(gw: Gateway, fragment: str, count: int = 1, timeout: float = 10) -> list[str]:
    """Log lines reach the file through the actor system's logger: a moment after the fact."""
    return wait_for(lambda: len(lines := log_lines(gw, fragment)) >= count and lines, timeout, 0.05,
                    f"{count} log line(s) with {fragment!r}")
