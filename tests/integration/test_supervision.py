"""The supervisor behaviour on real actor processes."""
from __future__ import annotations

import os
import signal
import time

import pytest

from supervision.messages import DescribeTree, Fault, RestartChild, Started, SupervisorGaveUp, TreeReply
from supervision.spec import ChildSpec, Restart, Strategy, SupervisorFlags
from supervision.supervisor import SupervisorArgs
from daemon.asking import ask_for, listen_for
from tests.actor_system import running_actor_system, wait_for

pytestmark = pytest.mark.timeout(60)
DEBUG = {"debug": {"fault_injection": True}}


def tree(asys, sup):
    reply = ask_for(asys, sup, DescribeTree(1), TreeReply, 5)
    assert isinstance(reply, TreeReply), reply
    return {c.name: c for c in reply.node.children}


def start_supervisor(asys, children, **flags):
    sup = asys.createActor("supervision.supervisor.Supervisor")
    asys.tell(sup, Started("sup", "Supervisor", SupervisorArgs(SupervisorFlags(**flags), tuple(children)), DEBUG))
    return sup


def running(asys, sup, names):
    nodes = tree(asys, sup)
    return all(nodes[n].state == "running" and nodes[n].pid for n in names) and nodes


def worker(name, restart=Restart.PERMANENT, actor="tests.actors_for_tests.Worker"):
    return ChildSpec(name, actor, restart=restart, shutdown_timeout_s=1.0)


def test_killed_child_is_restarted_and_answers():
    with running_actor_system() as asys:
        sup = start_supervisor(asys, [worker("a"), worker("b")])
        nodes = wait_for(lambda: running(asys, sup, ["a", "b"]), 10, what="children up")
        old_pid = nodes["a"].pid
        os.kill(old_pid, signal.SIGKILL)
        nodes = wait_for(lambda: (n := running(asys, sup, ["a"])) and n["a"].pid != old_pid and n, 10,
                         what="a restarted")
        assert nodes["a"].restarts == 1
        assert "killed" in nodes["a"].last_exit
        assert nodes["b"].restarts == 0 and nodes["b"].pid != old_pid


def test_restart_child_kills_and_restarts_with_the_reason():
    with running_actor_system() as asys:
        sup = start_supervisor(asys, [worker("a")])
        nodes = wait_for(lambda: running(asys, sup, ["a"]), 10)
        asys.tell(sup, RestartChild("a", "operator asked"))
        after = wait_for(lambda: (n := running(asys, sup, ["a"])) and n["a"].restarts == 1 and n, 10)
        assert after["a"].last_exit == "operator asked"
        assert after["a"].pid != nodes["a"].pid


def test_rest_for_one_restarts_the_later_siblings_only():
    with running_actor_system() as asys:
        sup = start_supervisor(asys, [worker("a"), worker("b"), worker("c")], strategy=Strategy.REST_FOR_ONE)
        before = wait_for(lambda: running(asys, sup, ["a", "b", "c"]), 10)
        os.kill(before["b"].pid, signal.SIGKILL)
        after = wait_for(lambda: (n := running(asys, sup, ["a", "b", "c"])) and n["c"].pid != before["c"].pid
                         and n["b"].pid != before["b"].pid and n, 10)
        assert after["a"].pid == before["a"].pid


def test_one_for_all_restarts_everyone():
    with running_actor_system() as asys:
        sup = start_supervisor(asys, [worker("a"), worker("b")], strategy=Strategy.ONE_FOR_ALL)
        before = wait_for(lambda: running(asys, sup, ["a", "b"]), 10)
        os.kill(before["b"].pid, signal.SIGKILL)
        wait_for(lambda: (n := running(asys, sup, ["a", "b"])) and n["a"].pid != before["a"].pid
                 and n["b"].pid != before["b"].pid, 10)


def test_crash_loop_exceeds_intensity_and_escalates():
    with running_actor_system() as asys:
        start_supervisor(asys, [worker("ok"), worker("bad", actor="tests.actors_for_tests.CrashOnStart")],
                         max_restarts=3, period_s=30, backoff_base_s=0.01, backoff_max_s=0.05)
        message = listen_for(asys, SupervisorGaveUp, 20)
        assert isinstance(message, SupervisorGaveUp), message
        assert "bad exited 4 times" in message.reason
        assert "cannot start" in message.reason


def test_a_full_disk_is_waited_out_not_counted_toward_intensity(tmp_path):
    """A crash on unavailable storage is retried at the slowest backoff for as long as it lasts, and the tree
    carries on once it is over; counted like a bug, the same crashes would make the supervisor give up."""
    full = tmp_path / "disk-is-full"
    full.touch()
    spec = ChildSpec("db_user", "tests.actors_for_tests.NeedsDisk", args={"full_while": str(full)},
                     shutdown_timeout_s=1.0)
    with running_actor_system() as asys:
        sup = start_supervisor(asys, [worker("ok"), spec], max_restarts=2, period_s=30, backoff_base_s=0.01,
                               backoff_max_s=0.1)
        wait_for(lambda: tree(asys, sup)["db_user"].restarts >= 8, 20, 0.05, "many restarts on the full disk")
        full.unlink()
        nodes = wait_for(lambda: running(asys, sup, ["ok", "db_user"]), 10, 0.05, "the child up once space is back")
        assert "StorageFull" in nodes["db_user"].last_exit
        assert nodes["ok"].restarts == 0     # and the supervisor answered: it did not give up


def test_a_child_whose_exit_notice_is_lost_is_still_restarted():
    """Thespian can lose a child's exit notice; the supervisor finds the process gone and restarts it anyway."""
    with running_actor_system() as asys:
        sup = asys.createActor("tests.actors_for_tests.DeafSupervisor")
        config = dict(DEBUG, supervision={"liveness_check_s": 0.2})
        asys.tell(sup, Started("sup", "Supervisor", SupervisorArgs(SupervisorFlags(backoff_base_s=0.01),
                                                                   (worker("a"),)), config))
        old_pid = wait_for(lambda: running(asys, sup, ["a"]), 10)["a"].pid
        os.kill(old_pid, signal.SIGKILL)
        nodes = wait_for(lambda: (n := running(asys, sup, ["a"])) and n["a"].pid != old_pid and n, 10, 0.05,
                         "a restarted without its exit notice")
        assert nodes["a"].restarts == 1 and "killed" in nodes["a"].last_exit


def test_a_child_whose_describe_answer_was_lost_is_asked_again():
    """A question (or its answer) lost on the way once must not leave a live child "unresponsive" for good: once
    it is overdue, the child is asked again and shows its own answer."""
    from supervision.describing import SILENT_AFTER_S
    with running_actor_system() as asys:
        sup = start_supervisor(asys, [worker("q", actor="tests.actors_for_tests.LosesFirstQuestion")])
        first = tree(asys, sup)["q"]        # the question it never answers
        assert first.pending != 5
        nodes = wait_for(lambda: (n := tree(asys, sup)) and n["q"].pending == 5 and n, SILENT_AFTER_S + 15, 0.5,
                         "the child asked again and answering")
        assert nodes["q"].state == "running"


def test_a_supervisor_forgets_the_addresses_of_children_that_are_gone():
    """Thespian keeps every child address an actor ever created; a supervisor that restarts (or, for sessions,
    starts anew) thousands of children must not carry them all, nor pass them on to everything it forks."""
    with running_actor_system() as asys:
        sup = asys.createActor("tests.actors_for_tests.CountsAddresses")
        asys.tell(sup, Started("sup", "Supervisor", SupervisorArgs(SupervisorFlags(backoff_base_s=0.01, max_restarts=50),
                                                                   (worker("a"),)), DEBUG))
        pid = wait_for(lambda: running(asys, sup, ["a"]), 10)["a"].pid
        for _ in range(5):
            os.kill(pid, signal.SIGKILL)
            pid = wait_for(lambda: (n := running(asys, sup, ["a"])) and n["a"].pid != pid and n["a"].pid, 10, 0.05,
                           "a restarted")
        held = ask_for(asys, sup, "addresses", tuple, 5)
        assert held == ("addresses", 1), held   # the live child's only


def test_transient_child_that_stops_cleanly_stays_stopped_and_temporary_never_restarts():
    with running_actor_system() as asys:
        sup = start_supervisor(asys, [worker("t", Restart.TRANSIENT, "tests.actors_for_tests.StopsCleanly"),
                                      worker("tmp", Restart.TEMPORARY)])
        nodes = wait_for(lambda: running(asys, sup, ["t", "tmp"]), 10)
        os.kill(nodes["tmp"].pid, signal.SIGKILL)
        wait_for(lambda: "tmp" not in tree(asys, sup), 10, what="temporary child forgotten")
        asys.tell(sup, RestartChild("t", "killed by test"))  # abnormal: a transient child comes back
        wait_for(lambda: (n := running(asys, sup, ["t"])) and n["t"].restarts == 1, 10)


def test_an_actor_on_the_bridge_keeps_answering_while_its_io_runs():
    from supervision.messages import Ping, Pong
    with running_actor_system() as asys:
        sup = start_supervisor(asys, [worker("io", actor="tests.actors_for_tests.Sleeper")])
        nodes = wait_for(lambda: running(asys, sup, ["io"]), 10)
        ref = nodes["io"].ref
        for tag in range(3):
            asys.tell(ref, ("sleep", 1.0, tag))
        start = time.monotonic()
        assert ask_for(asys, ref, Ping(1), Pong, 5) is not None
        assert time.monotonic() - start < 0.5, "the mailbox waited for the I/O"
        woke = []
        while len(woke) < 3:
            message = asys.listen(5)
            assert message is not None, "the bridge results did not come back"
            if isinstance(message, tuple) and message[0] == "woke":
                woke.append(message[1])
        assert sorted(woke) == [0, 1, 2]
        assert time.monotonic() - start < 2.5, "the three sleeps ran concurrently on the loop"


def test_a_handler_that_raises_crashes_the_actor_which_restarts_fresh():
    with running_actor_system() as asys:
        sup = start_supervisor(asys, [worker("w")])
        before = wait_for(lambda: running(asys, sup, ["w"]), 10)
        asys.tell(before["w"].ref, Fault("crash"))
        after = wait_for(lambda: (n := running(asys, sup, ["w"])) and n["w"].pid != before["w"].pid and n, 10)
        assert after["w"].restarts == 1 and "injected crash" in after["w"].last_exit


def test_a_graceful_exit_is_noticed_once_and_restarted_once():
    """Thespian reports a graceful exit twice (ChildActorExited): the second notice must not restart again."""
    with running_actor_system() as asys:
        sup = start_supervisor(asys, [worker("p", actor="tests.actors_for_tests.StopsCleanly")])
        before = wait_for(lambda: running(asys, sup, ["p"]), 10)
        from thespian.actors import ActorExitRequest
        asys.tell(before["p"].ref, ActorExitRequest())
        after = wait_for(lambda: (n := running(asys, sup, ["p"])) and n["p"].pid != before["p"].pid and n, 10)
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            nodes = tree(asys, sup)
            assert nodes["p"].restarts == 1 and nodes["p"].pid == after["p"].pid
            time.sleep(0.1)
