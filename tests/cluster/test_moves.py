"""A worker added under load takes its share of sessions, with their transcripts (docs/distribution.md, "Moving
sessions"). A leader and one worker answer a round of web chat visitors; a second worker joins while the next round
is in flight; rendezvous hashing gives its shard some keys of the shards already there, and only those move: each
moved session is drained where it was, its records imported on the new host and forgotten on the old one; it goes on
there with every turn it had. Every round is answered once per visitor."""
from __future__ import annotations

import asyncio

import pytest

from common.host_map import moved_keys, place_named
from storage import Store
from storage.inbox import INBOX_STATES
from tests.actor_system import wait_for
from tests.cluster import netns
from tests.cluster.driving import Driver, check_each_answered_once, shards_running, web_leader_toml
from tests.cluster.hosts import LeaderGateway, WorkerHost

pytestmark = [pytest.mark.skipif(bool(netns.skip_reason()), reason=netns.skip_reason() or ""),
              pytest.mark.timeout(420)]
VISITORS = 24
BEFORE = ["shard:0", "shard:w1/0"]
AFTER = BEFORE + ["shard:w2/0"]


def sessions_of(path) -> dict[str, tuple[str, int]]:
    """key -> (current session id, user messages in its transcript) in one host's database."""
    async def read():
        async with await Store.open(path) as store:
            found = {}
            for key in await store.sessions.current_keys():
                info = await store.sessions.current(key)
                if info is None:   # moved away between the two reads: the next look sees where it lives now
                    continue
                events = await store.sessions.load(info.session_id)
                found[key] = (info.session_id, sum(1 for e in events if e.role == "user"))
            return found
    return asyncio.run(read())


def history_of(path, key) -> list:
    """What one host's database holds of a key: its sessions' transcripts and its inbox rows (a failure's story)."""
    async def read():
        async with await Store.open(path) as store:
            story = [(info.session_id[:8], info.state, [(e.role, e.kind, str(e.payload)[:60])
                                                        for e in await store.sessions.load(info.session_id)])
                     for info in await store.sessions.list(session_key=key)]
            return story, [(r.state, r.platform_message_id) for r in await store.inbox.rows_in_state(key, INBOX_STATES)]
    return asyncio.run(read())


@pytest.fixture(scope="module")
def lab():
    lab = netns.Lab.of_hosts("m", "leader", "w1", "w2")
    yield lab
    lab.down()


def test_a_worker_added_under_load_takes_only_its_share_with_the_transcripts(lab, tmp_path):
    # A turn streams for ~19 s: the second round is still answering as w2 joins, even on a loaded machine (at ~6 s,
    # and once at ~12 s with the machine's load at 15, a join slowed by a busy machine came after the round).
    leader = LeaderGateway(tmp_path / "leader", lab, extra_toml=web_leader_toml(0.7))
    w1, w2 = WorkerHost(tmp_path, lab, "w1", leader), WorkerHost(tmp_path, lab, "w2", leader)
    dbs = {"shard:0": leader.state / "gateway.db", "shard:w1/0": w1.dir / "state" / "gateway.db",
           "shard:w2/0": w2.dir / "state" / "gateway.db"}
    leader.start()
    driver = None
    try:
        w1.join()
        leader.wait_hosts({"leader": "running", "w1": "running"})
        wait_for(lambda: shards_running(leader).get("shard:w1/0") == "running", 60, 0.5,
                 f"shard:w1/0 running (the tree shows {shards_running(leader)})")
        driver = Driver(leader, "move", VISITORS, 150, rounds=3)
        check_each_answered_once(driver.wait_round(1, 200), w1)
        before = {shard: sessions_of(dbs[shard]) for shard in BEFORE}
        keys = [key for held in before.values() for key in held]
        assert len(keys) == VISITORS, f"one session per visitor expected, found {before}"
        for shard, held in before.items():   # the map before w2: each key where rendezvous hashing put it
            for key in held:
                assert moved_keys([key], [place_named(shard)], [place_named(n) for n in BEFORE]) == {}, (key, shard)
        moving = moved_keys(keys, [place_named(n) for n in BEFORE], [place_named(n) for n in AFTER])
        assert 0 < len(moving) < VISITORS, f"the test's keys give w2 no share, or all of them: {moving}"
        assert all(new.child_name == "shard:w2/0" for _old, new in moving.values()), moving

        driver.next_round()   # the second round is in flight while w2 joins and the keys move
        w2.join()
        leader.wait_hosts({"w2": "running"}, timeout=60)
        wait_for(lambda: shards_running(leader).get("shard:w2/0") == "running", 60, 0.2,
                 f"shard:w2/0 running (the tree shows {shards_running(leader)})")
        in_flight = VISITORS - sum(1 for a in driver.answers if a["round"] == 2)
        print(f"{in_flight} of the second round's {VISITORS} turns were still answering when w2's shard ran")
        assert in_flight > 0, "the second round was over before w2 joined: nothing moved under load"
        check_each_answered_once(driver.wait_round(2, 240), w2)

        def settled():
            now = {shard: sessions_of(path) for shard, path in dbs.items()}
            return now if all(key in now["shard:w2/0"] and all(key not in now[s] for s in BEFORE)
                              for key in moving) else None
        after = wait_for(settled, 120, 1.0, f"the {len(moving)} keys w2 wins to live on w2 only "
                                            f"(w2's log ends:\n{w2.log()[-3000:]})")
        driver.next_round()
        check_each_answered_once(driver.wait_round(3, 200), w2)
        driver.finish(60)
        final = {shard: sessions_of(path) for shard, path in dbs.items()}
        for key, (old, _new) in moving.items():
            session_id, users = final["shard:w2/0"][key]
            assert session_id == before[old.child_name][key][0], f"{key} moved as a new session: the transcript " \
                                                                 f"stayed behind ({final})"
            assert users == 3, f"{key}: {users} user messages in its transcript on w2, 3 rounds sent: " \
                               f"{ {shard: history_of(path, key) for shard, path in dbs.items()} }"
        for shard in BEFORE:   # the keys that did not move were never touched
            for key, (session_id, _n) in before[shard].items():
                if key not in moving:
                    assert final[shard][key] == (session_id, 3), (key, shard, final[shard].get(key))
        assert set(after["shard:w2/0"]) == set(moving), "w2 holds exactly the keys it wins"
    finally:
        if driver is not None and driver.proc.poll() is None:
            driver.proc.kill()
        for worker in (w2, w1):
            worker.stop()
        leader.cli("stop", timeout=60)
        leader.kill_everything()
