"""Which host runs which session shard, and which shard a key lives on across hosts: rendezvous hashing, pure.

A convention of gateway hosts (common/cluster.py) runs ``shards_per_host`` shards on every host that offers them.
A shard is named by its host and its index there (``HOST/0``); a session key lives on the shard with the highest
score for it over every shard of every host. So adding a host moves to it only the keys its shards win (about
1/(hosts+1) of them) and removing a host moves only its own keys, spread over the others; keys of the hosts that
stay never move between them. The score is a keyed hash (the same in every process, on every host and across
restarts), as for the shards of one host (common/shard_map.py).

The leader's own shards score exactly as common/shard_map.py scores ``shard:<i>``: with the leader alone, every key
is where it has always been, and adding the first worker moves only the keys that worker's shards win.

A shard's child name (its name in the supervision tree and in the Directory) says where it runs: ``shard:<i>`` on
the leader, as always, and ``shard:<host>/<i>`` on a worker. ``place_named`` reads it back, so whoever holds the
Directory routes a key without knowing the hosts: the leader's shards read back without their host (they score by
index alone).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Optional

from common.shard_map import SHARD_PREFIX, placement_key

SWEEPER_PREFIX = "sweeper:"   # a worker host's delivery sweeper: ``sweeper:<host>``, beside that host's shards


@dataclass(frozen=True, order=True)
class ShardPlace:
    host: str
    index: int
    on_leader: bool = False

    @property
    def name(self) -> str:
        return f"{self.host}/{self.index}"

    @property
    def child_name(self) -> str:
        return f"{SHARD_PREFIX}{self.index}" if self.on_leader else f"{SHARD_PREFIX}{self.host}/{self.index}"


def place_named(child_name: str) -> ShardPlace:
    """The place a shard's child name stands for (``shard:3`` on the leader, ``shard:w1/0`` on host w1)."""
    if not child_name.startswith(SHARD_PREFIX):
        raise ValueError(f"{child_name!r} is not a shard's name")
    host, _, index = child_name[len(SHARD_PREFIX):].rpartition("/")
    if not index.isdigit() or (host == "" and "/" in child_name[len(SHARD_PREFIX):]):
        raise ValueError(f"{child_name!r} is not a shard's name")
    return ShardPlace(host, int(index), on_leader=host == "")


def shard_places(hosts: Iterable[str], shards_per_host: int, leader: str | None = None) -> list[ShardPlace]:
    """Every shard of the convention, in a stable order (by host name, then index); ``leader``: the host whose
    shards keep common/shard_map.py's scores."""
    if shards_per_host < 1:
        raise ValueError("a host runs at least one shard")
    return [ShardPlace(host, i, host == leader) for host in sorted(set(hosts)) for i in range(shards_per_host)]


def _score(place: ShardPlace, session_key: str) -> bytes:
    session_key = placement_key(session_key)   # a background task's key scores as its chat's
    text = f"{place.index}\0{session_key}" if place.on_leader else f"{place.host}\0{place.index}\0{session_key}"
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def place_of(session_key: str, places: list[ShardPlace]) -> ShardPlace:
    """The shard (host and index) that hosts ``session_key``. ``places`` must not be empty."""
    if not places:
        raise ValueError("no shard to place a session on: no host offers gateway.shards")
    return max(places, key=lambda place: _score(place, session_key))


def moved_keys(keys: Iterable[str], before: list[ShardPlace], after: list[ShardPlace]) -> dict[str, tuple]:
    """The keys whose shard changes from ``before`` to ``after``: key -> (old place, new place). What a change of
    membership has to drain and export/import (storage/transfer.py), and nothing else."""
    moves = {}
    for key in keys:
        old, new = place_of(key, before), place_of(key, after)
        if old != new:
            moves[key] = (old, new)
    return moves


def earlier_homes(session_key: str, places: list[ShardPlace], me: ShardPlace) -> list[ShardPlace]:
    """The shards that may hold ``session_key``'s records while ``me`` wins it now: a host that joined took the
    key from the shard that won it before, which is the next one down in the key's ranking, or the one after that
    if that one's host joined later still, and so on down to the leader's best shard, which has been there all
    along. Shards of ``me``'s own host share its database, so they are never among them; a leader's shard has
    none (hosts that join only take keys from the shards already there). Empty if ``me`` does not win the key."""
    ranked = sorted(places, key=lambda place: _score(place, session_key), reverse=True)
    if not ranked or ranked[0] != me or me.on_leader:
        return []
    homes = []
    for place in ranked[1:]:
        if place.host != me.host:
            homes.append(place)
        if place.on_leader:
            break
    return homes


def map_digest(places: Iterable[ShardPlace]) -> str:
    """A short name of one shard map, the same on every host: what a shard says it finished moving keys for."""
    text = "\n".join(sorted(place.child_name for place in places))
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def runs_on(place: Optional[ShardPlace], worker: Optional[str]) -> bool:
    """Whether the shard at ``place`` runs on this host: ``worker`` is this worker host's name, None on the leader.
    No place (no shard map yet): yes, as before any host joined."""
    if place is None:
        return True
    return place.on_leader if worker is None else (not place.on_leader and place.host == worker)
