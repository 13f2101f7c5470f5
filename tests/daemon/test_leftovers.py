"""What the launcher counts as left by a previous run (daemon/launcher.py ``leftovers_of``): processes of that
run's session that still run, not the zombies of killed ones that their parent has not reaped yet."""
from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from daemon.launcher import leftovers_of
from tests.actor_system import wait_for

pytestmark = pytest.mark.timeout(30)

# A session leader that forks a child which exits at once and is never reaped (a zombie), then waits.
LEADER = "import os, time\nif os.fork() == 0:\n    os._exit(0)\ntime.sleep(60)\n"


def test_a_previous_runs_zombie_is_not_counted_as_left_running():
    leader = subprocess.Popen([sys.executable, "-c", LEADER], start_new_session=True)
    try:
        def zombie():
            children = psutil.Process(leader.pid).children()
            return children and children[0].status() == psutil.STATUS_ZOMBIE and children[0].pid
        child = wait_for(zombie, 15, 0.02, "the leader's child to exit unreaped")
        sid = os.getsid(leader.pid)
        assert leftovers_of(sid) == [leader.pid], f"the zombie {child} is dead, not left running"
        leader.kill()
        leader.wait(10)
        assert leftovers_of(sid) == []
    finally:
        if leader.poll() is None:
            leader.kill()
            leader.wait(10)
