"""Hosts of one convention, each in its own network namespace: joining, the hosts in `status` and `tree`, failure
detection after kill -9 of a whole host (measured), a host that comes back, a leader restarted under its workers,
and the refusal of an address that is not private."""
from __future__ import annotations

import datetime
import subprocess
import time

import pytest

from tests.cluster import netns
from tests.cluster.hosts import CHECK_S, MISSES, LeaderGateway, WorkerHost
from tests.actor_system import wait_for
from tests.gateway import PYTHON, ROOT, nodes

pytestmark = pytest.mark.skipif(bool(netns.skip_reason()), reason=netns.skip_reason() or "")
DETECTION_BOUND_S = (MISSES + 1) * CHECK_S


@pytest.fixture(scope="module")
def lab():
    lab = netns.Lab.of_hosts("c", "leader", "w1", "w2")
    yield lab
    lab.down()


@pytest.fixture(scope="module")
def cluster(lab, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("convention")
    leader = LeaderGateway(tmp / "leader", lab)
    leader.start()
    workers = {name: WorkerHost(tmp, lab, name, leader) for name in ("w1", "w2")}
    for worker in workers.values():
        worker.join()
    try:
        leader.wait_hosts({"leader": "running", "w1": "running", "w2": "running"})
        yield leader, workers
    finally:
        for worker in workers.values():
            worker.stop()
        leader.cli("stop", timeout=60)
        leader.kill_everything()


def test_workers_join_and_status_and_tree_show_every_host(cluster):
    leader, _workers = cluster
    status = leader.status()
    hosts = {h["name"]: h for h in status["hosts"]}
    assert set(hosts) == {"leader", "w1", "w2"}, hosts
    assert hosts["leader"]["role"] == "leader" and hosts["w1"]["role"] == "worker"
    assert hosts["w1"]["address"].endswith(f"{leader.lab.hosts['w1']}:17811)"), hosts["w1"]
    assert status["health"] == "healthy", status["problems"]
    # Every shard runs on the leader for now (docs/distribution.md): the hosts show where each runs.
    assert hosts["leader"]["shards"] == len(status["shards"]) >= 1 and hosts["w1"]["shards"] == 0, hosts
    assert all(shard["host"] == "leader" for shard in status["shards"]), status["shards"]
    shown = leader.cli("status", check=True).stdout
    assert "hosts        3, 0 lost" in shown and "w2" in shown, shown
    tree_hosts = {n["name"]: n["state"] for n in nodes(leader.tree()) if n["kind"] == "Host"}
    assert tree_hosts == {"leader": "running", "w1": "running", "w2": "running"}, tree_hosts
    metrics = leader.metrics()
    for host, role in (("leader", "leader"), ("w1", "worker"), ("w2", "worker")):
        assert f'gateway_host_up{{host="{host}",role="{role}"}} 1' in metrics, metrics
    assert 'kind="Host"' not in metrics   # hosts are not counted among the actors


def test_admin_commands_on_a_worker_point_at_the_leader(cluster):
    leader, workers = cluster
    worker = workers["w1"]
    result = subprocess.run([*leader.lab.exec_prefix("w1"), PYTHON, str(ROOT / "run_gateway.py"), "--config",
                             str(worker.config), "status"], capture_output=True, text=True, timeout=60,
                            env=dict(leader.env, GATEWAY_STATE_DIR=str(worker.dir / "state")))
    assert result.returncode == 3, result
    assert f"is worker host w1 of the convention at {leader.address}:17811" in result.stdout + result.stderr


def test_the_hosts_actor_killed_with_minus_9_lists_every_host_again(cluster):
    """It keeps no state of its own: the admin sends its restarted incarnation one update per registered member."""
    import os
    import signal
    leader, _workers = cluster
    hosts_node = next(n for n in nodes(leader.tree()) if n["kind"] == "ConventionHosts")
    os.kill(hosts_node["pid"], signal.SIGKILL)
    wait_for(lambda: any(n["kind"] == "ConventionHosts" and n["pid"] not in (0, hosts_node["pid"])
                         and n["state"] == "running" for n in nodes(leader.tree())),
             45, 0.2, "the hosts actor running again in a new process")
    leader.wait_hosts({"leader": "running", "w1": "running", "w2": "running"})
    shown = next(n for n in nodes(leader.tree()) if n["kind"] == "ConventionHosts")
    assert shown["pid"] != hosts_node["pid"] and shown["restarts"] >= 1, shown


def test_kill9_of_a_whole_worker_is_detected_and_it_rejoins(cluster, record_property):
    leader, workers = cluster
    killed_at = time.monotonic()
    assert leader.lab.kill_host("w2"), "no process ran in w2's namespace"
    workers["w2"].proc.wait(10)
    # A dead member (not yet declared lost) does not hold up the leader: a turn is answered meanwhile.
    answer = leader.cli("chat", "--as", "ada", "--message", "still answering?", timeout=60)
    assert answer.returncode == 0 and "still answering?" in answer.stdout, answer
    leader.wait_hosts({"w2": "lost", "w1": "running"}, timeout=DETECTION_BOUND_S + 30)
    detected = time.monotonic() - killed_at   # the turn above included: the time from the kill
    record_property("lost_host_detected_s", round(detected, 2))
    print(f"a worker killed with -9 was declared lost after {detected:.1f}s "
          f"(check-in every {CHECK_S}s, {MISSES} misses)")
    # The bound plus what one `status` poll costs on a loaded 2-core machine (a CLI start and a tree walk).
    assert detected <= DETECTION_BOUND_S + 6, f"lost after {detected:.1f}s, bound {DETECTION_BOUND_S}s"
    status = leader.status()
    assert status["health"] == "degraded" and any("host w2 lost" in p for p in status["problems"]), status
    assert 'gateway_host_up{host="w2",role="worker"} 0' in leader.metrics()
    workers["w2"].join("--port", "0")   # back at another address: the lost entry of that name goes
    leader.wait_hosts({"w2": "running"}, timeout=30)
    status = leader.status()
    assert status["health"] == "healthy" and [h["name"] for h in status["hosts"]].count("w2") == 1, status


def test_a_worker_that_stops_cleanly_leaves_at_once(cluster):
    leader, workers = cluster
    assert workers["w1"].stop() == 0, workers["w1"].log()[-2000:]
    stopped = time.time()
    leader.wait_hosts({"w1": "lost"}, timeout=30)
    # Timed by the leader's own log line, not by `status` polls (each a CLI process, slow on a busy machine): the
    # goodbye is taken as the worker stops; a member found lost by missed check-ins shows (MISSES - 1) * CHECK_S
    # after its last check-in at the earliest.
    line = [line for line in leader.log().splitlines() if "host w1 left the convention" in line][-1]
    left = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp() - stopped
    assert left < CHECK_S + 2, f"a clean leave took {left:.1f}s to show: {line}"
    workers["w1"].join()
    leader.wait_hosts({"w1": "running"}, timeout=30)


def test_workers_register_again_with_a_restarted_leader(cluster):
    """The leader is a single point: killed with -9 and started again on its address, it finds its workers again
    within a check-in period or two (docs/distribution.md, 'When the leader dies')."""
    leader, _workers = cluster
    leader.lab.kill_host("leader")
    leader.start()
    again = leader.wait_hosts({"leader": "running", "w1": "running", "w2": "running"},
                              timeout=(MISSES + 2) * CHECK_S + 30)
    print(f"both workers registered with the restarted leader {again:.1f}s after it was ready")


def test_a_public_looking_address_is_refused_with_a_clear_message(tmp_path):
    result = subprocess.run([PYTHON, str(ROOT / "run_gateway.py"), "join", "10.77.0.1:17811", "--bind", "1.2.3.4"],
                            capture_output=True, text=True, timeout=60,
                            env={"GATEWAY_STATE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert result.returncode == 77, result
    assert "1.2.3.4 is not a private network address" in result.stderr + result.stdout
    assert "--network-is-private" in result.stderr + result.stdout


def test_a_public_leader_is_refused_with_a_clear_message(tmp_path):
    result = subprocess.run([PYTHON, str(ROOT / "run_gateway.py"), "join", "8.8.8.8:17811", "--bind", "10.77.0.2"],
                            capture_output=True, text=True, timeout=60,
                            env={"GATEWAY_STATE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                 "GATEWAY_CLUSTER_SECRET": "a-secret-long-enough-0123"})
    assert result.returncode == 77, result
    assert "the leader's address 8.8.8.8 is not a private network address" in result.stderr + result.stdout


def test_join_without_the_cluster_secret_is_refused_with_a_clear_message(tmp_path):
    result = subprocess.run([PYTHON, str(ROOT / "run_gateway.py"), "join", "10.77.0.1:17811", "--bind", "10.77.0.2"],
                            capture_output=True, text=True, timeout=60,
                            env={"GATEWAY_STATE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert result.returncode == 78, result
    assert "needs a shared secret" in result.stderr + result.stdout and "GATEWAY_CLUSTER_SECRET" in result.stderr


PLACE_SNIPPET = """
import json, os, sys
from common import peer_credentials
from daemon.transport_key import cluster_key
from runtime import frame_mac, loopback, peer_check
loopback.install(sys.argv[1]); peer_check.install(peer_credentials.admission(allow_remote=True))
frame_mac.install(cluster_key(os.environ["GATEWAY_CLUSTER_SECRET"]))
from thespian.actors import ActorSystem
asys = ActorSystem("multiprocTCPBase", {"Admin Port": int(sys.argv[2])})
found = {}
for host in ("w1", None):
    probe = asys.createActor("tests.actors_for_tests.PlacedProbe",
                             targetActorRequirements={"gateway.host": host} if host else None)
    found[host or "unplaced"] = asys.ask(probe, "where", 20)
print(json.dumps(found))
"""


def test_an_actor_placed_by_host_runs_there_and_opens_that_hosts_database(cluster, tmp_path):
    """The placement session shards use (ChildSpec.placement, common/cluster.py runs_here): asked for on w1, the
    actor runs in a process of w1's namespace and its store is w1's own file; asked for on no host, it stays on
    the leader, whose processes have no worker state dir."""
    import json
    leader, workers = cluster
    leader.wait_hosts({"w1": "running"})
    result = subprocess.run([*leader.lab.exec_prefix("leader"), PYTHON, "-c", PLACE_SNIPPET, leader.address, "17811"],
                            env=leader.env, capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["w1"]["pid"] in leader.lab.pids("w1"), (found, leader.lab.pids("w1"))
    assert found["w1"]["store"] == str(workers["w1"].dir / "state" / "gateway.db"), found
    assert found["unplaced"]["pid"] in leader.lab.pids("leader"), found
    assert found["unplaced"]["store"] == "/leader/gateway.db", found



def test_no_port_of_a_worker_listens_beyond_its_private_address(cluster):
    """G7 on every member: the worker's admin and each actor it runs (the probe placed above included) listen on
    its --bind address only."""
    leader, _workers = cluster
    out = subprocess.run([*leader.lab.exec_prefix("w1"), "ss", "-Hltn"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    listening = {tuple(line.split()[3].rsplit(":", 1)) for line in out.splitlines() if line.strip()}
    assert len(listening) >= 2, listening   # the admin and at least one actor
    assert {ip for ip, _port in listening} == {leader.lab.hosts["w1"]}, listening


CONNECT_SNIPPET = """
import socket, sys
s = socket.socket()
s.bind((sys.argv[1], 0))
s.settimeout(20)
s.connect((sys.argv[2], int(sys.argv[3])))
s.settimeout(1.5)
try:
    print("closed" if s.recv(1) == b"" else "data")
except socket.timeout:
    print("open")   # accepted and being read: the peer check let it through
"""


def test_a_worker_refuses_actor_traffic_from_a_public_looking_address(cluster):
    """The peer check on every member: the worker's admin port takes a connection from the private network, and
    closes at once one from an address outside it (here a second, public-looking address of the leader's host)."""
    leader, _workers = cluster
    lab = leader.lab
    leader.wait_hosts({"w1": "running"})
    subprocess.run([*lab.exec_prefix("leader"), "ip", "addr", "add", "1.2.3.5/32", "dev",
                    _interface(lab, "leader")], check=True, capture_output=True)
    subprocess.run([*lab.exec_prefix("w1"), "ip", "route", "add", "1.2.3.5/32", "dev", _interface(lab, "w1")],
                   check=True, capture_output=True)

    def connect(source: str) -> str:
        result = subprocess.run([*lab.exec_prefix("leader"), PYTHON, "-c", CONNECT_SNIPPET, source, lab.hosts["w1"],
                                 "17811"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout.strip()

    assert connect(lab.hosts["leader"]) == "open"
    assert connect("1.2.3.5") == "closed"


def test_the_leader_refuses_actor_traffic_from_a_public_looking_address(cluster):
    leader, _workers = cluster
    lab = leader.lab
    subprocess.run([*lab.exec_prefix("w1"), "ip", "addr", "add", "1.2.3.6/32", "dev", _interface(lab, "w1")],
                   check=True, capture_output=True)
    subprocess.run([*lab.exec_prefix("leader"), "ip", "route", "add", "1.2.3.6/32", "dev",
                    _interface(lab, "leader")], check=True, capture_output=True)

    def connect(source: str) -> str:
        result = subprocess.run([*lab.exec_prefix("w1"), PYTHON, "-c", CONNECT_SNIPPET, source, leader.address,
                                 "17811"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout.strip()

    assert connect(lab.hosts["w1"]) == "open"
    assert connect("1.2.3.6") == "closed"


def _interface(lab, host: str) -> str:
    out = subprocess.run([*lab.exec_prefix(host), "ip", "-o", "-4", "addr", "show", "to", lab.hosts[host]],
                         capture_output=True, text=True, check=True).stdout
    return out.split()[1]
