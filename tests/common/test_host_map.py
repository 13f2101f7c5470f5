"""common/host_map.py: rendezvous hashing over the shards of every host moves only the keys of a host that comes
or goes."""
from collections import Counter

import pytest

from common.host_map import (ShardPlace, earlier_homes, map_digest, moved_keys, place_named, place_of, runs_on,
                             shard_places)
from common.shard_map import shard_of
from supervision.messages import Directory

KEYS = [f"telegram:bot:chat{i}" for i in range(3000)]


def test_places_are_stable_and_named():
    assert shard_places(["b", "a", "a"], 2) == [ShardPlace("a", 0), ShardPlace("a", 1), ShardPlace("b", 0),
                                                 ShardPlace("b", 1)]
    assert ShardPlace("w1", 3).name == "w1/3"
    with pytest.raises(ValueError):
        shard_places(["a"], 0)
    with pytest.raises(ValueError):
        place_of("k", [])


def test_keys_spread_over_every_shard():
    places = shard_places(["leader", "w1", "w2"], 2)
    counts = Counter(place_of(key, places) for key in KEYS)
    assert set(counts) == set(places)
    assert min(counts.values()) > len(KEYS) / len(places) * 0.8, counts


def test_adding_a_host_moves_only_the_keys_its_shards_win():
    before = shard_places(["w1", "w2"], 2)
    after = shard_places(["w1", "w2", "w3"], 2)
    moves = moved_keys(KEYS, before, after)
    assert moves and all(new.host == "w3" for _old, new in moves.values())
    assert 0.25 < len(moves) / len(KEYS) < 0.42, len(moves)   # about a third


def test_removing_a_host_moves_only_its_own_keys():
    before = shard_places(["w1", "w2", "w3"], 2)
    after = shard_places(["w1", "w3"], 2)
    moves = moved_keys(KEYS, before, after)
    assert all(old.host == "w2" and new.host != "w2" for old, new in moves.values())
    assert len(moves) == sum(1 for key in KEYS if place_of(key, before).host == "w2")


def test_the_leaders_shards_keep_the_single_host_map():
    alone = shard_places(["leader"], 3, leader="leader")
    assert all(place_of(key, alone).index == shard_of(key, 3) for key in KEYS)
    with_worker = shard_places(["leader", "w1"], 3, leader="leader")
    moves = moved_keys(KEYS, alone, with_worker)
    assert all(new.host == "w1" for _old, new in moves.values())
    assert 0.4 < len(moves) / len(KEYS) < 0.6, len(moves)   # about half: the worker has half the shards


def test_a_shards_child_name_says_where_it_runs_and_reads_back():
    assert ShardPlace("leader", 2, on_leader=True).child_name == "shard:2"
    assert ShardPlace("w1", 0).child_name == "shard:w1/0"
    assert place_named("shard:2") == ShardPlace("", 2, on_leader=True)
    assert place_named("shard:w1/0") == ShardPlace("w1", 0)
    assert place_named("shard:a/b/3") == ShardPlace("a/b", 3), "a host name is read up to the last slash"
    for bad in ("shard:", "shard:x", "session:1", "shard:/1", "shard:w1/", "shard:-1"):
        with pytest.raises(ValueError):
            place_named(bad)


def test_the_directory_routes_over_every_host_as_the_host_map_does():
    leader_only = Directory(1, shards=tuple((f"shard:{i}", f"a{i}") for i in range(3)))
    assert all(leader_only.shard_for(key) == (f"shard:{shard_of(key, 3)}", f"a{shard_of(key, 3)}")
               for key in KEYS), "with the leader alone, every key stays where it always was"
    places = shard_places(["leader", "w1", "w2"], 2, leader="leader")
    spread = Directory(2, shards=tuple((p.child_name, p.name) for p in places))
    for key in KEYS:
        expected = place_of(key, places)
        assert spread.shard_for(key) == (expected.child_name, expected.name)
    assert Directory(3).shard_for("k") == ("", None)


def test_a_joined_hosts_shard_asks_for_a_key_the_shards_that_won_it_before_down_to_the_leaders():
    names = ["shard:0", "shard:1", "shard:w1/0", "shard:w2/0"]
    places = [place_named(n) for n in names]
    w2 = place_named("shard:w2/0")
    keys = [f"web:dm:{i}" for i in range(400)]
    won = [k for k in keys if place_of(k, places) == w2]
    assert won, "w2 wins some of 400 keys"
    for key in won:
        homes = earlier_homes(key, places, w2)
        without_w2 = [p for p in places if p != w2]
        assert homes and homes[0] == place_of(key, without_w2), "the shard that won it before is asked first"
        assert homes[-1].on_leader and all(not p.on_leader for p in homes[:-1]), homes
        assert w2 not in homes
    other = next(k for k in keys if place_of(k, places) != w2)
    assert earlier_homes(other, places, w2) == [], "a key w2 does not win is none of its business"
    assert earlier_homes(keys[0], places, place_named("shard:0")) == [], "a leader's shard took keys from nobody"


def test_every_host_names_one_shard_map_alike():
    names = ["shard:0", "shard:w1/0", "shard:w2/0"]
    assert map_digest(place_named(n) for n in names) == map_digest(place_named(n) for n in reversed(names))
    assert map_digest(place_named(n) for n in names) != map_digest(place_named(n) for n in names[:2])


def test_a_host_knows_which_shards_run_on_it():
    leader, w1 = place_named("shard:0"), place_named("shard:w1/0")
    assert runs_on(leader, None) and not runs_on(w1, None), "the leader runs its own shards only"
    assert runs_on(w1, "w1") and not runs_on(w1, "w2") and not runs_on(leader, "w1")
    assert runs_on(None, "w1") and runs_on(None, None), "no map yet: as before any host joined"
