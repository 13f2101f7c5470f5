"""The daemon as operators run it: start, kill, stop, drain, crash loops. Real processes, pids checked."""
from __future__ import annotations

import json
import os
import subprocess
import re
import signal
import time

import psutil
import pytest

from tests.gateway import DEFAULT_ADAPTERS_ANY_PORT, Gateway, nodes
from tests.actor_system import free_port, wait_for

pytestmark = pytest.mark.timeout(120)
CHILD_KINDS = ["watchdog", "sweeper", "ticker", "sessions", "adapters"]


@pytest.fixture
def gateway(tmp_path):
    gw = Gateway(tmp_path, extra_toml=DEFAULT_ADAPTERS_ANY_PORT)
    yield gw
    gw.cli("stop")
    gw.kill_everything()


def test_start_status_tree_and_refuses_to_start_twice(gateway):
    info = gateway.start()
    assert info["ok"] and info["pid"]
    tree = gateway.wait_ready()
    names = [n["name"] for n in nodes(tree)]
    assert set(CHILD_KINDS) <= set(names)
    for node in nodes(tree):  # every pid the tree reports is a live process of ours
        proc = psutil.Process(node["pid"])
        assert "python" in proc.name().lower() or "python" in " ".join(proc.cmdline()).lower()
    status = json.loads(gateway.cli("status", "--json", check=True).stdout)
    assert status["running"] and status["actors_up"] == len(names) and status["actors_failed"] == 0
    second = gateway.cli("start", "--json")
    assert second.returncode == 1 and "already running" in second.stdout


@pytest.mark.parametrize("name", CHILD_KINDS)
def test_kill_9_of_each_child_kind_is_restarted_and_answers(gateway, name):
    gateway.start()
    before = {n["name"]: n for n in nodes(gateway.wait_ready())}
    killed_at = time.monotonic()
    os.kill(before[name]["pid"], signal.SIGKILL)
    after = wait_for(lambda: (n := gateway.node(name)) and n["pid"] != before[name]["pid"]
                     and n["state"] == "running" and n, 20, 0.02, f"{name} back")
    took = time.monotonic() - killed_at
    assert after["restarts"] == 1 and "killed" in after["last_exit"]
    assert took < 15, f"{name} took {took:.2f}s to come back"
    gateway.wait_ready()


def test_sigterm_stops_every_process(gateway):
    proc = gateway.run_foreground()
    gateway.wait_ready()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    gateway.assert_no_process_left()


def test_sigkill_of_the_launcher_leaves_no_process_and_next_start_says_so(gateway):
    gateway.start()
    gateway.wait_ready()
    os.kill(gateway.launcher_pid, signal.SIGKILL)
    gateway.assert_no_process_left()
    assert gateway.cli("status").returncode == 3
    gateway.start()
    gateway.wait_ready()
    gateway.wait_log("previous run")


def test_stop_and_drain_leave_no_process(gateway):
    gateway.start()
    gateway.wait_ready()
    stopped = json.loads(gateway.cli("stop", "--json", check=True).stdout)
    assert stopped["ok"] and not stopped["forced"]
    gateway.assert_no_process_left()
    gateway.start()
    gateway.wait_ready()
    drained = json.loads(gateway.cli("drain", "--timeout", "5", "--json", check=True).stdout)
    assert drained["ok"] and drained["exited"] and drained["in_flight_left"] == 0
    gateway.assert_no_process_left()
    log = gateway.log()
    assert "drained in " in log and "every turn finished" in log and "shutdown flush: flushed " in log
    assert "DrainReport(" not in log and "ShutdownReady(" not in log, "a message's repr reached the log"
    assert "leftover" not in log, "a clean exit reported leftover processes"


def test_an_actor_still_hung_at_exit_is_killed_and_reported(tmp_path):
    """The other side of a clean exit: a process that outlives the actor system's shutdown is a real leftover."""
    # No watchdog round in the test's time (it would replace the hung actor); a short flush bound on the way out.
    gw = Gateway(tmp_path, watchdog_interval=30, ping_deadline=30, watchdog_toml="shutdown_timeout_s = 1")
    try:
        gw.start()
        gw.wait_ready()
        hung = gw.node("ticker")
        gw.cli("fault", "ticker", "--action", "hang", "--seconds", "60", check=True)
        stopped = json.loads(gw.cli("stop", "--json", check=True).stdout)
        assert stopped["ok"], stopped
        gw.assert_no_process_left()
        log = gw.wait_log("leftover process")
        # the hung actor at least (a shutdown it stalled can leave other actors of the system behind too)
        assert re.search(r"stopped [1-9]\d* leftover process\(es\)", log), log.splitlines()[-5:]
        assert not psutil.pid_exists(hung["pid"]) or psutil.Process(hung["pid"]).status() == psutil.STATUS_ZOMBIE
    finally:
        gw.cli("stop")
        gw.kill_everything()


def test_no_listening_socket_outside_loopback(gateway):
    gateway.start()
    gateway.wait_ready()
    pids = set(gateway.seen_pids)
    listening = [c for c in psutil.net_connections(kind="inet")
                 if c.status == psutil.CONN_LISTEN and c.pid in pids]
    assert len(listening) >= len(CHILD_KINDS) + 1
    assert all(c.laddr.ip == "127.0.0.1" for c in listening), listening


@pytest.mark.timeout(180)
def test_crash_loop_escalates_to_root_and_the_launcher_exits_non_zero(tmp_path):
    gw = Gateway(tmp_path, extra_toml='[debug]\nfault_injection = true\ncrash_on_start = "ticker"\n',
                 admin_port=free_port())
    proc = gw.run_foreground()
    try:
        try:
            code = proc.wait(120)   # ~6 s alone; a loaded 2-core machine has taken 25 s
        except subprocess.TimeoutExpired:
            raise AssertionError("the launcher did not exit within 120 s of a crash loop; the log ends:\n"
                                 + "\n".join(gw.log().splitlines()[-40:])) from None
        output = proc.stdout.read()
        assert code == 70, output
        assert "gave up" in output and "ticker" in output
        before_exit = [p for p in psutil.process_iter(["cmdline"]) if str(gw.port) in " ".join(p.info["cmdline"] or [])]
        assert not before_exit
        assert not gw.alive_pids()
    finally:
        proc.kill()
        gw.kill_everything()


def test_watchdog_restarts_an_actor_that_stops_answering(tmp_path):
    from supervision.messages import Fault
    from daemon.admin import AdminClient
    from common import config as config_mod
    gw = Gateway(tmp_path, extra_toml="[debug]\nfault_injection = true\n")
    try:
        gw.start()
        gw.wait_ready()
        os.environ["GATEWAY_STATE_DIR"] = str(gw.state)
        client = AdminClient(config_mod.load(str(gw.config)))
        ticker = next(n for n, _, _ in __import__("supervision.tree", fromlist=["walk"]).walk(client.tree())
                      if n.name == "ticker")
        client.asys.tell(ticker.ref, Fault("hang", 60))
        after = wait_for(lambda: (n := gw.node("ticker")) and n["pid"] != ticker.pid and n["state"] == "running"
                         and n, 30, 0.1, "hung ticker replaced")
        assert "ping" in after["last_exit"] or "describe" in after["last_exit"]
        assert not psutil.pid_exists(ticker.pid) or psutil.Process(ticker.pid).status() == psutil.STATUS_ZOMBIE
        heartbeat = json.loads((gw.state / "run" / "heartbeat.json").read_text())
        assert heartbeat["actors"] >= 6 and time.time() - heartbeat["time"] < 10
    finally:
        os.environ.pop("GATEWAY_STATE_DIR", None)
        gw.cli("stop")
        gw.kill_everything()
