"""Which sessions a shard serves when hosts share one database (``[cluster] shared``, docs/distribution.md): the
partitions of the session keys it holds by lease.

Every key belongs to one of ``[cluster] partitions`` partitions (rendezvous hashing of its placement key,
common/shard_map.py: a background task's key goes with its chat's). Each shard of each host is a *member*: it holds
the lease ``member:<host>/<shard>`` as its presence, and takes partition leases (``partition:<i>``) while it holds
fewer than its fair share, ``ceil(partitions / live members)``, preferring the partitions that rank it highest
(rendezvous again, so a partition tends to go back where it was), and releases the ones over its share when members
join. A member that dies stops renewing: its leases expire after ``[cluster] lease_s`` and the others take its
partitions. The state of a partition's sessions is in the shared database already, so taking it over is starting
its sessions there (an interrupted turn resumes under the re-sent rules, G3); nothing is copied.

``SharedPartitions`` is the shard's component, on its actor thread, with the shard's store (``run`` runs a storage
call to completion). ``tick`` (every quarter of the lease time) renews, takes and releases, and says which
partitions were gained and lost; ``serves(key)`` gates the shard's sessions; ``fences`` is what every group
transaction of the shard checks as it begins (storage/inline.py): once another member took a partition, nothing
this shard's cells write commits. ``waiting_keys`` is the doorbell across hosts: an adapter of another host
commits rows to the shared inbox and rings its own host's shard, so the holder looks for rows no session has taken
yet, ringing each key once per row it has not rung for.

What survives kill -9: nothing here. The leases stay until they expire; the rows and turns are in the database.
"""
from __future__ import annotations

import hashlib
import math
import secrets
import time
from typing import Callable, Iterable, Optional

from common.cluster import host_name
from common.config import setting
from common.shard_map import shard_of
from storage import Fence, Lease, Store, StorageError

PARTITION_PREFIX, MEMBER_PREFIX = "partition:", "member:"
RING_AGAIN_S = 3.0


def partition_name(index: int) -> str:
    return f"{PARTITION_PREFIX}{index}"


def preference(member: str, partition: int) -> bytes:
    """How much ``member`` wants ``partition`` (higher first): the same on every host, so members agree."""
    return hashlib.blake2b(f"{partition}\0{member}".encode(), digest_size=8).digest()


def fair_share(partitions: int, live_members: int) -> int:
    return math.ceil(partitions / max(1, live_members))


def plan(member: str, partitions: int, held: set[int], taken_by_others: set[int], live_members: int
         ) -> tuple[list[int], list[int]]:
    """(partitions to take, partitions to release) for ``member``: free ones it prefers most until it holds its
    fair share, and the ones it prefers least beyond that share. Pure."""
    share = fair_share(partitions, live_members)
    ranked = sorted(range(partitions), key=lambda p: preference(member, p), reverse=True)
    take = [p for p in ranked if p not in held and p not in taken_by_others][:max(0, share - len(held))]
    release = [p for p in reversed(ranked) if p in held][:max(0, len(held) - share)]
    return take, release


def held_by(leases: Iterable[Lease], host: str) -> Callable[..., bool]:
    """``serves(key, partitions=N)``: whether a live partition lease of ``host`` covers ``key`` (the sweeper's view:
    it finishes only the replies of this host's partitions)."""
    mine = {int(lease.name[len(PARTITION_PREFIX):]) for lease in leases
            if lease.name.startswith(PARTITION_PREFIX) and lease.live and lease.holder == host}
    return lambda key, partitions: shard_of(key, partitions) in mine


class SharedPartitions:
    """State: this member's name and life, the partitions it holds (index -> fence), the keys rung for their
    waiting rows (key -> newest seq rung). Collaborators: ``run`` (a storage call run to its end), the store,
    ``log``."""

    def __init__(self, config: dict, shard: str, store: Store, run: Callable, log):
        self.host = host_name(config)
        self.member = f"{self.host}/{shard}"
        self.life = secrets.token_hex(8)
        self.count = int(setting(config, "cluster", "partitions"))
        self.ttl_s = float(setting(config, "cluster", "lease_s"))
        self.store, self.run, self.log = store, run, log
        self.held: dict[int, Fence] = {}
        self.presence: Optional[Fence] = None
        self.rung: dict[str, tuple[int, float]] = {}   # key -> (newest row rung for, when)

    @property
    def tick_s(self) -> float:
        return self.ttl_s / 4

    def partition_of(self, key: str) -> int:
        return shard_of(key, self.count)

    def serves(self, key: str) -> bool:
        return self.partition_of(key) in self.held

    def fences(self) -> tuple[Fence, ...]:
        return tuple(self.held.values())

    def tick(self) -> tuple[set[int], set[int]]:
        """Renew, then take and release toward the fair share: (partitions gained, partitions lost)."""
        lost: set[int] = set()
        try:
            mine = ([self.presence] if self.presence else []) + list(self.held.values())
            kept = self.run(self.store.leases.renew(mine, self.ttl_s))
            if self.presence is not None and self.presence.name not in kept:
                self.presence = None
            for index, fence in list(self.held.items()):
                if fence.name not in kept:
                    lost.add(index)
                    del self.held[index]
            if self.presence is None:
                lease = self.run(self.store.leases.take(MEMBER_PREFIX + self.member, self.host, self.life,
                                                        self.ttl_s))
                self.presence = lease.fence() if lease is not None else None
            leases = self.run(self.store.leases.all())
        except StorageError as exc:
            self.log.warning("%s: cannot renew its partitions (%s); they go to other hosts if this lasts %.0fs",
                             self.member, exc, self.ttl_s)
            return set(), lost
        members = sum(1 for lease in leases if lease.name.startswith(MEMBER_PREFIX) and lease.live)
        others = {int(lease.name[len(PARTITION_PREFIX):]) for lease in leases
                  if lease.name.startswith(PARTITION_PREFIX) and lease.live and lease.life != self.life}
        take, release = plan(self.member, self.count, set(self.held), others, members)
        gained = set()
        for index in take:
            lease = self._take(index)
            if lease is not None:
                self.held[index] = lease.fence()
                gained.add(index)
        if release:
            self.release(release)
            lost.update(release)
        if gained or lost:
            self.log.warning("%s: holds %d partition(s) of %d now (+%d -%d; %d member(s) live)", self.member,
                             len(self.held), self.count, len(gained), len(lost), members)
        return gained, lost

    def _take(self, index: int) -> Optional[Lease]:
        try:
            return self.run(self.store.leases.take(partition_name(index), self.host, self.life, self.ttl_s))
        except StorageError:
            return None

    def release(self, indexes: Iterable[int]) -> None:
        fences = [self.held.pop(i) for i in list(indexes) if i in self.held]
        try:
            self.run(self.store.leases.release(fences))
        except StorageError:
            pass   # they expire on their own

    def release_all(self) -> None:
        """A stop: everything goes at once, presence included, so the others take over without waiting."""
        presence, self.presence = self.presence, None
        self.release(list(self.held))
        if presence is not None:
            try:
                self.run(self.store.leases.release([presence]))
            except StorageError:
                pass

    def waiting_keys(self) -> list[tuple[str, int]]:
        """Keys this member serves with rows no session took yet, each with its newest such row, that were not rung
        for that row already: the doorbells another host's adapter could not ring here."""
        try:
            waiting = self.run(self.store.inbox.newest_received())
        except StorageError:
            return []
        out, now = [], time.monotonic()
        for key, seq in waiting:
            rung_seq, rung_at = self.rung.get(key, (0, 0.0))
            # Rung again while its rows stay untaken: a session that crashed on a busy database (PostgreSQL fails
            # one of two conflicting transactions) and was given up is started again by the next doorbell.
            if self.serves(key) and (rung_seq < seq or now - rung_at > RING_AGAIN_S):
                self.rung[key] = (seq, now)
                out.append((key, seq))
        if len(self.rung) > 100_000:
            self.rung.clear()   # bounded: at worst a key is rung once more
        return out

    def keys_in(self, indexes: set[int], keys: Iterable[str]) -> list[str]:
        return [k for k in keys if self.partition_of(k) in indexes]
