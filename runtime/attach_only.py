"""A client attaches to a running admin and never starts one.

Thespian's ``systemBase.__init__`` probes the admin port and, when nothing answers, calls
``multiprocessCommon._startAdmin``: it forks a new admin that outlives the client. The admin client (daemon/admin.py)
checks that the gateway's admin answers before it attaches, but the gateway can stop between that check and
Thespian's own probe (a ``status`` run while the daemon shuts down). Thespian would then start an admin of the
client's on the gateway's port, and the client's ``createActor`` of the root would start a headless gateway in it,
left running with no launcher.

``attaching()`` replaces ``_startAdmin`` for the length of one ``ActorSystem(...)`` call with one that raises
``AdminNotRunning``: the call fails, nothing is forked, and the client says that no gateway runs. The original is
put back on leaving, so a process that also starts actor systems of its own (the test suite) is not changed.

Thespian internal relied on (checked against Thespian 4.0.1: runtime/versions.py): ``multiprocessCommon._startAdmin``,
called by ``systemBase.__init__`` only when its probe finds no admin.
"""
from __future__ import annotations

import contextlib
import functools
import threading
from typing import Iterator

from runtime.shapes import module as load_module, need

COMMON_MODULE = "thespian.system.multiprocCommon"
_lock = threading.Lock()   # one attach at a time in a process: each puts back the original it found


class AdminNotRunning(Exception):
    """No admin answered on the port when Thespian looked: the gateway is not (or no longer) running."""


@contextlib.contextmanager
def attaching() -> Iterator[None]:
    """While inside, an actor system made in this process attaches to a running admin or fails with
    ``AdminNotRunning``; it never forks one."""
    problems: list[str] = []
    starter = need(load_module(COMMON_MODULE, problems), COMMON_MODULE, "multiprocessCommon", problems, kind=type)
    if starter is None:
        raise RuntimeError("; ".join(problems))
    with _lock:
        original = starter.__dict__["_startAdmin"]

        @functools.wraps(original)
        def refuse(self, adminAddr, *args, **kwargs):
            raise AdminNotRunning(f"no admin answers at {adminAddr}")
        starter._startAdmin = refuse
        try:
            yield
        finally:
            starter._startAdmin = original


def missing() -> list[str]:
    problems: list[str] = []
    common = load_module(COMMON_MODULE, problems)
    starter = need(common, COMMON_MODULE, "multiprocessCommon", problems, kind=type)
    need(starter, "multiprocessCommon", "_startAdmin", problems,
         params=("self", "adminAddr", "addrOfStarter", "capabilities", "logDefs"))
    return problems
