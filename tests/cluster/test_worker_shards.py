"""Session shards on a worker host (docs/distribution.md), each host in its own network namespace: the leader places
``[cluster] shards_per_worker`` shards on a worker that joins; a chat whose key lives there is stored in the
leader's inbox with its acknowledgement, forwarded into the worker's own database, answered by the worker's shard
through the leader's adapter, once; the leader's row is marked forwarded, and the worker's ledger holds the reply."""
from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from storage import Store
from tests.actor_system import wait_for
from tests.cluster import netns
from tests.cluster.hosts import LeaderGateway, WorkerHost
from tests.gateway import PYTHON, ROOT

pytestmark = [pytest.mark.skipif(bool(netns.skip_reason()), reason=netns.skip_reason() or ""),
              pytest.mark.timeout(300)]
WEB_PORT = 18080
VISITORS = 24


@pytest.fixture(scope="module")
def lab():
    lab = netns.Lab("s").up()
    for host in ("leader", "w1"):
        lab.add_host(host)
    yield lab
    lab.down()


@pytest.fixture(scope="module")
def cluster(lab, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("worker-shards")
    leader = LeaderGateway(tmp / "leader", lab, extra_toml=f"""shards_per_worker = 1
[sessions]
shards = 1
[adapters.web]
type = "webchat"
host = "127.0.0.1"   # inside the leader's namespace: its own loopback
port = {WEB_PORT}
[agent]
chunk_delay_s = 0.0
""")
    leader.start()
    worker = WorkerHost(tmp, lab, "w1", leader)
    worker.join()
    try:
        leader.wait_hosts({"leader": "running", "w1": "running"})
        yield leader, worker
    finally:
        worker.stop()
        leader.cli("stop", timeout=60)
        leader.kill_everything()


def shards_running(leader) -> dict:
    tree = json.loads(leader.cli("tree", "--json", timeout=30).stdout or "{}")
    found = {}

    def walk(node):
        if node.get("kind") == "SessionShard":
            found[node.get("name")] = node.get("state")
        for child in node.get("children", ()):
            walk(child)
    walk(tree.get("tree", tree))
    return found


def test_a_workers_shard_takes_its_chats_and_answers_each_once(cluster):
    leader, worker = cluster
    wait_for(lambda: shards_running(leader).get("shard:w1/0") == "running", 60, 0.5,
             f"shard:w1/0 running on the worker (the tree shows {shards_running(leader)})")
    result = subprocess.run([*leader.lab.exec_prefix("leader"), PYTHON, "-m", "tests.cluster.webchat_driver",
                             f"http://127.0.0.1:{WEB_PORT}", str(VISITORS), "120"],
                            cwd=ROOT, env=leader.env, capture_output=True, text=True, timeout=200)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    unanswered = [name for name, finals in answers.items() if not finals]
    assert not unanswered, f"no answer for {unanswered}; the worker's log ends:\n{worker.log()[-3000:]}"
    doubled = {name: finals for name, finals in answers.items() if len(finals) > 1}
    assert not doubled, f"answered in more than one message: {doubled}"

    async def read(path):
        async with await Store.open(path) as store:
            return await store.inbox.counts(), await store.ledger.counts()
    (leader_inbox, _), (worker_inbox, worker_ledger) = (asyncio.run(read(leader.state / "gateway.db")),
                                                         asyncio.run(read(worker.dir / "state" / "gateway.db")))
    assert worker_inbox["done"] > 0, f"no chat's rows reached the worker's inbox: {worker_inbox}"
    assert worker_ledger["delivered"] == worker_inbox["done"], (worker_ledger, worker_inbox)
    assert leader_inbox["received"] == 0 and leader_inbox["done"] == VISITORS, leader_inbox
