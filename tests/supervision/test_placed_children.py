"""A child placed on another host (ChildSpec.placement) reports its pid there: that number means nothing on this
host. Restarting it asks it to exit; it never signals whatever local process happens to have that pid, and the
liveness check does not take it for gone because no local process has it."""
from __future__ import annotations

import subprocess
import sys

import pytest

from thespian.actors import ActorExitRequest
from supervision.messages import RestartChild
from supervision.spec import ChildSpec, ChildStatus
from supervision.supervisor import ChildState, Supervisor

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def bystander():
    """A process of this host whose pid a remote child happens to share."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def supervisor_with(child: ChildState) -> tuple[Supervisor, list]:
    supervisor, sent = Supervisor(), []
    supervisor.send = lambda to, message: sent.append((to, message))
    supervisor.children = {child.spec.name: child}
    return supervisor, sent


def test_restarting_a_placed_child_asks_it_to_exit_and_signals_no_local_process(bystander):
    spec = ChildSpec("shard:w1/0", "actors.sessions.shard.SessionShard", placement={"gateway.host": "w1"})
    child = ChildState(spec, address="remote shard", pid=bystander.pid, status=ChildStatus.RUNNING)
    supervisor, sent = supervisor_with(child)
    supervisor.on_RestartChild(RestartChild("shard:w1/0", "did not answer 2 pings", bystander.pid), None)
    assert bystander.poll() is None, "a local process with the remote child's pid was killed"
    assert [m for _to, m in sent if isinstance(m, ActorExitRequest)], sent


def test_a_local_child_that_does_not_answer_is_killed_by_its_pid(bystander):
    child = ChildState(ChildSpec("shard:0", "actors.sessions.shard.SessionShard"), address="local shard",
                       pid=bystander.pid, status=ChildStatus.RUNNING)
    supervisor, _sent = supervisor_with(child)
    supervisor.on_RestartChild(RestartChild("shard:0", "did not answer 2 pings", bystander.pid), None)
    assert bystander.wait(10) == -9


def test_a_placed_child_whose_pid_no_local_process_has_is_not_taken_for_gone():
    from common.config import defaults
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()   # its pid is free now: no local process has it
    spec = ChildSpec("shard:w1/0", "actors.sessions.shard.SessionShard", placement={"gateway.host": "w1"})
    child = ChildState(spec, address="remote shard", pid=finished.pid, status=ChildStatus.RUNNING)
    supervisor, _sent = supervisor_with(child)
    supervisor.config, supervisor.after = defaults(), lambda seconds, name, data=None: None
    gone = []
    supervisor.child_gone = gone.append
    for _ in range(3):
        supervisor.on_timer_liveness(None)
    assert gone == [] and child.address == "remote shard"


def test_a_workers_child_that_keeps_failing_stops_being_restarted_without_stopping_the_supervisor():
    from actors.sessions.supervisor import SessionSupervisor, sweeper_spec
    from supervision.spec import Intensity, SupervisorFlags

    supervisor = SessionSupervisor()
    supervisor._flags = SupervisorFlags(max_restarts=3, period_s=30.0)
    supervisor.intensity = Intensity(3, 30.0)
    gave_up = []
    supervisor.give_up = gave_up.append
    child = ChildState(sweeper_spec("w1"), recent=Intensity(1_000_000, 30.0))
    verdicts = []
    for at in range(5):
        verdict = supervisor.within_intensity(child, 100.0 + at)
        verdicts.append(verdict)
        if verdict:
            child.recent.record(100.0 + at)
    assert verdicts == [True, True, True, False, False] and child.status == "failed"
    assert gave_up == [], "one worker's failing child must not stop the leader's shards"
