"""daemon/cli_hosts.py: the leader's `sessions` and `deliveries` merged with the worker hosts' answers (pure)."""
from __future__ import annotations

import pytest

from actors.messages import StoreReadResult
from daemon import cli_hosts
from supervision.messages import TreeNode


def session(sid, updated):
    return {"session_id": sid, "session_key": f"k-{sid}", "updated_at": updated, "state": "active"}


def test_sessions_of_every_host_newest_first_each_saying_its_host():
    local = {"count": 2, "sessions": [session("a", 30), session("b", 10)]}
    answers = [("w1", StoreReadResult("shard:w1/0", {"count": 1, "sessions": [session("c", 20)]})),
               ("w2", StoreReadResult("shard:w2/0", error="database is locked"))]
    merged = cli_hosts.merged_list(local, answers, ["host w3: its shards are not running (lost)"], limit=2)
    assert [(s["session_id"], s["host"]) for s in merged["sessions"]] == [("a", "leader"), ("c", "w1")]
    assert merged["count"] == 2
    assert merged["unavailable"] == ["host w3: its shards are not running (lost)", "host w2: database is locked"]


def test_deliveries_add_up_their_counts():
    local = {"counts": {"delivered": 3, "pending": 1}, "ambiguous": 1, "count": 1,
             "deliveries": [{"obligation_id": "x", "created_at": 5}]}
    worker = {"counts": {"delivered": 2, "failed": 1}, "ambiguous": 0, "count": 1,
              "deliveries": [{"obligation_id": "y", "created_at": 9}]}
    merged = cli_hosts.merged_deliveries(local, [("w1", StoreReadResult("shard:w1/0", worker))], [], limit=10)
    assert merged["counts"] == {"delivered": 5, "pending": 1, "failed": 1} and merged["ambiguous"] == 1
    assert [(d["obligation_id"], d["host"]) for d in merged["deliveries"]] == [("y", "w1"), ("x", "leader")]


def test_a_session_the_leader_does_not_hold_is_shown_from_the_host_that_has_it():
    shown = {"session": session("c", 1), "events": []}
    answers = [("w1", StoreReadResult("shard:w1/0", error="no session with id 'c'")),
               ("w2", StoreReadResult("shard:w2/0", shown))]
    assert cli_hosts.found_elsewhere(answers, [])["host"] == "w2"
    assert cli_hosts.found_elsewhere(answers[:1], []) is None


def test_search_hits_of_every_host():
    local = {"query": "hi", "count": 1, "hits": [{"session_id": "a", "seq": 1}]}
    answers = [("w1", StoreReadResult("shard:w1/0", {"query": "hi", "count": 1, "hits": [{"session_id": "c"}]}))]
    merged = cli_hosts.merged_search(local, answers, [], limit=20)
    assert [h["host"] for h in merged["hits"]] == ["leader", "w1"] and merged["query"] == "hi"


def test_a_session_not_found_while_a_host_could_not_be_asked_says_so_rather_than_that_none_exists():
    answers = [("w1", StoreReadResult("shard:w1/0", error="no session with id 'c'"))]
    with pytest.raises(cli_hosts.NotAsked, match="host w2: no answer"):
        cli_hosts.found_elsewhere(answers, ["host w2: no answer within 15s: its records not shown"])


def shard(name, state="running", ref=None):
    return TreeNode(kind="SessionShard", name=name, pid=1, address="", state=state, started_at=0.0, ref=ref)


def test_running_shards_shown_without_addresses_by_a_slow_walk_are_walked_again():
    """A supervisor slow to answer the walk shows its children as they last answered, without addresses
    (supervision/describing.py): such a host is not yet "not running"."""
    assert cli_hosts._unaddressed({"w1": [shard("shard:w1/0"), shard("shard:w1/1")]})
    assert not cli_hosts._unaddressed({"w1": [shard("shard:w1/0"), shard("shard:w1/1", ref="addr")]})
    assert not cli_hosts._unaddressed({"w1": [shard("shard:w1/0", state="lost")]}), "a lost host is not waited for"
