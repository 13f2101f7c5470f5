"""Session shards on a worker host (docs/distribution.md), each host in its own network namespace: the leader places
``[cluster] shards_per_worker`` shards on a worker that joins; a chat whose key lives there is stored in the
leader's inbox with its acknowledgement, forwarded into the worker's own database, answered by the worker's shard
through the leader's adapter, once; the leader's row is marked forwarded, and the worker's ledger holds the reply."""
from __future__ import annotations

import asyncio

import pytest

from common.host_map import place_named, place_of
from storage import Store
from storage.ledger import Target
from tests.actor_system import wait_for
from tests.cluster import netns
from tests.cluster.driving import Driver, check_each_answered_once, counts, p99, shards_running, web_leader_toml
from tests.cluster.hosts import LeaderGateway, WorkerHost

pytestmark = [pytest.mark.skipif(bool(netns.skip_reason()), reason=netns.skip_reason() or ""),
              pytest.mark.timeout(300)]
VISITORS = 24


@pytest.fixture(scope="module")
def lab():
    lab = netns.Lab.of_hosts("s", "leader", "w1")
    yield lab
    lab.down()


@pytest.fixture(scope="module")
def cluster(lab, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("worker-shards")
    leader = LeaderGateway(tmp / "leader", lab, extra_toml=web_leader_toml(0.0))
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


def test_a_workers_shard_takes_its_chats_and_answers_each_once(cluster, record_property):
    leader, worker = cluster
    wait_for(lambda: shards_running(leader).get("shard:w1/0") == "running", 60, 0.5,
             f"shard:w1/0 running on the worker (the tree shows {shards_running(leader)})")
    driver = Driver(leader, "steady", VISITORS, 120)
    check_each_answered_once(driver.finish(200), worker)
    record_property("reply_p99_s", p99([a["after_s"] for a in driver.answers]))
    (leader_inbox, _), (worker_inbox, worker_ledger) = (counts(leader.state / "gateway.db"),
                                                         counts(worker.dir / "state" / "gateway.db"))
    assert worker_inbox["done"] > 0, f"no chat's rows reached the worker's inbox: {worker_inbox}"
    assert worker_ledger["delivered"] == worker_inbox["done"], (worker_ledger, worker_inbox)
    assert leader_inbox["received"] == 0 and leader_inbox["done"] == VISITORS, leader_inbox


def test_a_worker_killed_under_load_and_brought_back_loses_nothing_and_stalls_no_other_chat(cluster,
                                                                                         record_property):
    leader, worker = cluster
    wait_for(lambda: shards_running(leader).get("shard:w1/0") == "running", 60, 0.5,
             f"shard:w1/0 running on the worker (the tree shows {shards_running(leader)})")
    assert leader.lab.kill_host("w1"), "no process ran in w1's namespace"
    worker.proc.wait(10)
    driver = Driver(leader, "outage", VISITORS, 240)
    leader.wait_hosts({"w1": "lost"}, timeout=60)
    # The leader's own shard answers its chats meanwhile: they do not wait for the worker.
    wait_for(lambda: driver.answers, 60, 0.2, "an answer from the leader's shard while the worker is down")
    during = list(driver.answers)
    assert len(during) < VISITORS, "every chat was answered with its worker down: none lives on the worker"
    status = leader.status()
    assert any("w1" in p for p in status.get("problems", [])), status
    worker.join("--port", "0")
    leader.wait_hosts({"w1": "running"}, timeout=60)
    check_each_answered_once(driver.finish(300), worker)
    outage_p99 = p99([a["after_s"] for a in during])
    record_property("leader_chats_reply_p99_during_outage_s", outage_p99)
    print(f"chats of the leader's shard answered while the worker was down: {len(during)}, reply p99 "
          f"{outage_p99:.2f}s; the worker's chats were answered after it came back")
    wait_for(lambda: counts(leader.state / "gateway.db")[0]["received"] == 0, 30, 0.2,
             "every row the worker had not stored forwarded once it was back")


def test_a_reply_left_in_a_workers_ledger_is_finished_by_that_hosts_sweeper(cluster):
    """What a crash on the worker leaves unfinished (a reply with its final text, nobody delivering it) is in the
    worker's ledger, which the leader's sweeper never reads: the worker's own sweeper finishes it through the
    leader's adapter, recording the send in the worker's ledger."""
    leader, worker = cluster
    wait_for(lambda: shards_running(leader, "DeliverySweeper").get("sweeper:w1") == "running", 60, 0.5,
             f"sweeper:w1 running (the tree shows {shards_running(leader, 'DeliverySweeper')})")
    path = worker.dir / "state" / "gateway.db"
    # A key the worker's shard serves: a sweeper leaves the replies of another host's keys to that host.
    places = [place_named("shard:0"), place_named("shard:w1/0")]
    key = next(k for k in (f"web:dm:left-behind-{i}" for i in range(100)) if place_of(k, places) == places[1])
    elsewhere = next(k for k in (f"web:dm:moving-{i}" for i in range(100)) if place_of(k, places) == places[0])

    async def leave_a_reply(session_key=key, ref="web:lost-1"):
        async with await Store.open(path) as store:
            return (await store.ledger.record_obligation(session_key, ref,
                                                         Target("web", "left-behind"), "reply",
                                                         chunks=["what a crash left unsent"])).obligation_id

    async def state_of(db, oid):
        async with await Store.open(db) as store:
            return await store.ledger.get(oid)
    # Left first, so the sweep that finishes the other would have met it first: the leader's shard serves its key
    # (as after a move to the leader's host half done), so it is not this host's to finish.
    not_ours = asyncio.run(leave_a_reply(elsewhere, "web:lost-2"))
    oid = asyncio.run(leave_a_reply())
    delivered = wait_for(lambda: (ob := asyncio.run(state_of(path, oid))).state == "delivered" and ob, 60, 0.5,
                         "the worker's sweeper to deliver the reply left in its ledger")
    assert len(delivered.parts) == 1 and delivered.send_intent is None and not delivered.ambiguous, delivered
    assert asyncio.run(state_of(leader.state / "gateway.db", oid)) is None, "the leader's ledger is not touched"
    left = asyncio.run(state_of(path, not_ours))
    assert (left.state, left.attempts) == ("pending", 0), f"a reply of a key the leader serves was swept: {left}"


def test_sessions_and_deliveries_on_the_leader_show_every_hosts_records(cluster):
    """The leader's CLI cannot open a worker's database: it asks one running shard of each worker host for the same
    read and merges the answers, each row naming its host (daemon/cli_hosts.py)."""
    import json
    leader, worker = cluster
    wait_for(lambda: shards_running(leader).get("shard:w1/0") == "running", 60, 0.5,
             f"shard:w1/0 running on the worker (the tree shows {shards_running(leader)})")
    check_each_answered_once(Driver(leader, "admin", 8, 120).finish(200), worker)
    worker_db = worker.dir / "state" / "gateway.db"

    async def truth(path):
        async with await Store.open(path) as store:
            return set(await store.sessions.current_keys()), (await store.ledger.counts()).get("delivered", 0)
    (leader_keys, leader_delivered), (worker_keys, worker_delivered) = (asyncio.run(truth(leader.state / "gateway.db")),
                                                                        asyncio.run(truth(worker_db)))
    assert worker_keys, "no session lives on the worker: nothing to show from it"
    listed = json.loads(leader.cli("sessions", "list", "--json", "--limit", "1000", check=True).stdout)
    by_host = {}
    for s in listed["sessions"]:
        by_host.setdefault(s["host"], set()).add(s["session_key"])
    assert by_host.get("w1") == worker_keys and by_host.get("leader", set()) == leader_keys, by_host
    assert listed["unavailable"] == []
    one = next(s for s in listed["sessions"] if s["host"] == "w1")
    shown = json.loads(leader.cli("sessions", "show", one["session_id"], "--json", check=True).stdout)
    assert shown["host"] == "w1" and shown["session"]["session_id"] == one["session_id"]
    assert any(e["role"] == "user" for e in shown["events"]), shown["events"]
    plain = leader.cli("sessions", "list", check=True).stdout
    assert "[w1]" in plain and "[leader]" in plain, plain
    owed = json.loads(leader.cli("deliveries", "--json", "--limit", "1000", check=True).stdout)
    assert owed["counts"].get("delivered") == leader_delivered + worker_delivered, (owed["counts"],
                                                                                   owed.get("unavailable"))
    assert {d["host"] for d in owed["deliveries"]} >= {"w1"}


def test_a_reloaded_page_of_a_chat_on_the_worker_shows_its_conversation(cluster):
    """The web chat's history of a chat whose session lives on the worker is read from the worker's database
    through its shard (actors/adapters/remote_reads.py): the page shows the question and its answer."""
    leader, worker = cluster
    wait_for(lambda: shards_running(leader).get("shard:w1/0") == "running", 60, 0.5,
             f"shard:w1/0 running on the worker (the tree shows {shards_running(leader)})")
    driver = Driver(leader, "reload", 8, 120, history=True)
    check_each_answered_once(driver.finish(200), worker)
    async def names_on_worker():
        async with await Store.open(worker.dir / "state" / "gateway.db") as store:
            return {row.platform_message_id.split(":", 1)[1].rsplit("-m", 1)[0]
                    for key in await store.sessions.current_keys() for row in await store.inbox.rows_in_state(
                        key, ("received", "taken", "done", "dropped"))}
    on_worker = asyncio.run(names_on_worker()) & set(driver.histories)
    assert on_worker, f"none of the 8 visitors lives on the worker: {sorted(driver.histories)}"
    for name in sorted(driver.histories):
        frame = driver.histories[name]
        assert frame.get("type") == "history", (name, frame)
        said = [(m["role"], m["text"]) for m in frame["messages"]]
        assert said[0] == ("user", f"hello from {name}") and said[1][0] == "assistant" and len(said) == 2, \
            f"{name} ({'worker' if name in on_worker else 'leader'}): {said}"


def test_the_terminal_chat_of_a_user_whose_session_lives_on_the_worker_is_answered(cluster):
    """`chat --message` on the leader for a user a worker's shard wins: the line is committed on the leader,
    forwarded to that shard, answered there, and the terminal learns it is done from that shard."""
    from actors.adapters.cli.adapter import cli_event
    from actors.messages import CliSay
    from storage import session_key
    leader, worker = cluster
    wait_for(lambda: shards_running(leader).get("shard:w1/0") == "running", 60, 0.5,
             f"shard:w1/0 running on the worker (the tree shows {shards_running(leader)})")
    places = [place_named("shard:0"), place_named("shard:w1/0")]

    def key_of(user):
        return session_key(cli_event(CliSay(user, "hi", "m"), "cli", "default").source, per_user_in_groups=False)
    user = next(u for u in (f"operator{i}" for i in range(100)) if place_of(key_of(u), places) == places[1])
    done = leader.cli("chat", "--as", user, "--message", "hello from the terminal", timeout=120)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert "hello from the terminal" in done.stdout, done.stdout

    async def on_worker():
        async with await Store.open(worker.dir / "state" / "gateway.db") as store:
            return await store.sessions.current(key_of(user)) is not None
    assert asyncio.run(on_worker()), "the user's session is not on the worker"
