"""runtime/attach_only.py: an actor system made to attach where no admin answers fails and forks nothing (Thespian
alone would start an admin of the client's there, left running: what an admin command did when the gateway stopped
between its check and its attach), and the process is as before afterwards."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
ATTACH = textwrap.dedent("""
    import sys
    from thespian.actors import ActorSystem
    from thespian.system.multiprocCommon import multiprocessCommon
    from runtime import attach_only
    original = multiprocessCommon.__dict__["_startAdmin"]
    try:
        with attach_only.attaching():
            ActorSystem("multiprocTCPBase", {"Admin Port": int(sys.argv[1])}, transientUnique=True)
        print("attached")
    except attach_only.AdminNotRunning as exc:
        print("refused:", exc)
    print("restored" if multiprocessCommon.__dict__["_startAdmin"] is original else "changed")
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listeners(port: int) -> list:
    return [c for c in psutil.net_connections("tcp") if c.laddr and c.laddr.port == port and c.status == "LISTEN"]


def test_attaching_where_no_admin_answers_fails_and_starts_no_admin():
    port = free_port()
    # Its own session: without the refusal the forked admin keeps the command from exiting, and is killed below.
    command = subprocess.Popen([sys.executable, "-c", ATTACH, str(port)], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        try:
            out, err = command.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the command did not end within 60 s; listening on {port}: {listeners(port)}") \
                from None
        assert command.returncode == 0, err
        lines = out.splitlines()
        assert lines[0].startswith("refused: no admin answers at"), out
        assert lines[1] == "restored", out
        assert listeners(port) == [], "an admin was started on the port"
    finally:   # the command, and an admin it forked (in a session of its own: found by its parent and its port)
        left = {c.pid for c in listeners(port) if c.pid}
        with contextlib.suppress(psutil.Error):
            left |= {p.pid for p in psutil.Process(command.pid).children(recursive=True)}
        for pid in left | {command.pid}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        command.wait(timeout=30)
