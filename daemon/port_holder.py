"""Who holds a TCP port the gateway wanted: "pid 4242 (nginx)", or "the gateway of state dir /srv/gw (pid 4242)".

Said wherever the gateway could not listen (`start`'s degraded line, the launcher's admin port, `doctor`). The
listening socket's owner comes from the kernel (psutil reads ``/proc/net/tcp*`` for the socket's inode and finds it
among ``/proc/*/fd``); another gateway is recognised by the pid lock it keeps open (``<state>/run/gateway.pid``),
held by its launcher and shared with every actor process forked from it. A process of another user is invisible
to a non-root caller: then it is "another program", without a pid. Best effort, never raises.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import psutil

from common.runfiles import RunFiles

PID_LOCK = ("run", "gateway.pid")


def listening_pid(port: int) -> Optional[int]:
    """The pid of the process listening on ``port`` (any address), when this user may see it."""
    try:
        for conn in psutil.net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return conn.pid
    except (psutil.Error, OSError):
        pass
    return None


def gateway_state_dir(pid: int) -> Optional[Path]:
    """The state dir of the gateway ``pid`` belongs to (its launcher or an actor process), or None."""
    try:
        process = psutil.Process(pid)
        for candidate in (process, *process.parents()):
            for opened in candidate.open_files():
                path = Path(opened.path)
                if path.parts[-2:] == PID_LOCK:
                    return path.parent.parent
    except (psutil.Error, OSError):
        pass
    return None


def describe_holder(pid: Optional[int], own_state_dir: Optional[Path] = None) -> str:
    """``in use by ...`` for the process ``pid`` (None: not visible to us). No parentheses of its own: it is said
    inside them ("web cannot listen on 127.0.0.1:8765 (in use by pid 77, nginx)")."""
    if pid is None:
        return "in use by another program"
    state_dir = gateway_state_dir(pid)
    if state_dir is not None:
        if own_state_dir is not None and state_dir.resolve() == Path(own_state_dir).resolve():
            return f"in use by this gateway, pid {RunFiles(state_dir).read_pid() or pid}"
        launcher = RunFiles(state_dir).read_pid() or pid   # its launcher: what `stop` and `status` name
        return f"in use by another gateway, pid {launcher}, state dir {state_dir}"
    try:
        return f"in use by pid {pid}, {psutil.Process(pid).name()}"
    except psutil.Error:
        return f"in use by pid {pid}"


def port_holder(port: int, own_state_dir: Optional[Path] = None) -> str:
    return describe_holder(listening_pid(port), own_state_dir)
