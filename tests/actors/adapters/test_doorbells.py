"""Where an adapter rings a doorbell (actors/adapters/doorbells.py): at the key's shard, at the session supervisor
while that shard has no address, held until a directory exists, and again at a shard that was restarted."""
from __future__ import annotations

from actors.adapters.doorbells import Doorbells
from actors.messages import InboxDoorbell
from supervision.messages import Directory


def directory(*shards, sessions="supervisor", version=1) -> Directory:
    return Directory(version, sessions=sessions, shards=tuple((f"shard:{i}", a) for i, a in enumerate(shards)))


def key_on(shard: int, count: int = 2) -> str:
    """A session key that lives on ``shard`` of ``count``."""
    probe = directory(*(f"s{i}" for i in range(count)))
    return next(k for k in (f"key-{i}" for i in range(1000)) if probe.shard_for(k)[0] == f"shard:{shard}")


def test_a_doorbell_goes_straight_to_the_keys_shard():
    bells = Doorbells()
    key0, key1 = key_on(0), key_on(1)
    both = directory("s0", "s1")
    assert bells.ring(both, key0, 7, now=0.0) == [("s0", InboxDoorbell(key0, 7))]
    assert bells.ring(both, key1, 8, now=0.0) == [("s1", InboxDoorbell(key1, 8))]


def test_a_shard_without_an_address_is_reached_through_the_supervisor():
    bells = Doorbells()
    assert bells.ring(directory("s0", None), key_on(1), 3, now=0.0) == [("supervisor", InboxDoorbell(key_on(1), 3))]


def test_doorbells_before_any_directory_are_held_then_rung_in_order():
    bells = Doorbells()
    assert bells.ring(None, key_on(0), 1, now=0.0) == [] and bells.ring(None, key_on(1), 2, now=0.0) == []
    assert bells.directory_changed(directory("s0", "s1"), now=1.0) == [("s0", InboxDoorbell(key_on(0), 1)),
                                                                       ("s1", InboxDoorbell(key_on(1), 2))]
    assert not bells.unrung


def test_a_restarted_shard_hears_again_the_recent_doorbells_rung_at_its_old_address():
    bells = Doorbells(replay_window_s=60.0)
    key, other = key_on(0), key_on(1)
    bells.directory_changed(directory("s0", "s1"), now=0.0)
    bells.ring(directory("s0", "s1"), key, 5, now=1.0)
    bells.ring(directory("s0", "s1"), key, 6, now=100.0)
    bells.ring(directory("s0", "s1"), other, 9, now=100.0)
    # shard 0 dies (a gap), then comes back at a new address: its latest doorbell within the window again, once.
    assert bells.directory_changed(directory(None, "s1", version=2), now=100.5) == []
    assert bells.directory_changed(directory("s0-new", "s1", version=3), now=101.0) == [
        ("s0-new", InboxDoorbell(key, 6))]
    assert bells.directory_changed(directory("s0-new", "s1", version=4), now=102.0) == []


def test_what_is_held_and_remembered_is_bounded():
    bells = Doorbells(max_unrung=10, max_recent=5)
    for i in range(100):
        bells.ring(None, f"k{i}", i, now=0.0)
    assert len(bells.unrung) == 10
    for i in range(100):
        bells.ring(directory("s0"), f"k{i}", i, now=0.0)
    assert len(bells.recent["shard:0"]) == 5
