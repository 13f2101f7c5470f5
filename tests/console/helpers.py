"""The real daemon with its console, for the tests of this package."""
from __future__ import annotations

import contextlib
import re
from pathlib import Path

from tests.actor_system import wait_for
from tests.gateway import Gateway

SERVING = re.compile(r"console: serving http://(\S+)/ \(port (\d+);")


def console_gateway(tmp_path: Path, *, allow_actions: bool = False, login_token: str = "", host: str = "127.0.0.1",
                    extra: str = "", **kwargs) -> Gateway:
    token = f'login_token = "{login_token}"\n' if login_token else ""
    return Gateway(tmp_path, extra_toml=f"""
[console]
host = "{host}"
port = 0
allow_actions = {str(allow_actions).lower()}
{token}
{extra}
""", **kwargs)


def console_port(gw: Gateway, timeout: float = 20) -> int:
    """The port the console logged (the last one: a restarted console logs again)."""
    try:
        found = wait_for(lambda: SERVING.findall(gw.log()), timeout, 0.05, "the console's serving line")
    except AssertionError as exc:
        tail = "\n".join(gw.log().splitlines()[-30:])
        raise AssertionError(f"{exc}; the gateway log ends with:\n{tail}") from None
    return int(found[-1][1])


@contextlib.contextmanager
def running(gw: Gateway):
    """The gateway started and every actor up, then stopped (and anything left killed) whatever happened."""
    try:
        gw.start()
        gw.wait_ready()
        yield gw
    finally:
        gw.cli("stop")
        gw.kill_everything()
