"""Rows for sessions whose shard runs on another host: forwarded from this adapter's inbox to that shard.

In a convention (docs/distribution.md) a key may live on a worker's shard, which keeps its inbox in its own
database. The adapter commits every round's rows with the offset that acknowledges them in *its* database, as
always (intake.py): an acknowledged event is durable before the platform hears of it (G1), whether the worker is up
or not, so one unreachable worker never holds the acknowledgement of every other chat of the bot (Telegram has one
offset per bot). Then, per worker shard, the rows go as one ``StoreInbound``; the shard commits them in its own
inbox (deduplicated by platform and message id) and answers ``InboundStored``, and only then are the rows here
marked forwarded (storage/inbox.py ``forwarded``). They are never taken by a shard of this host: each shard starts
sessions for its own keys only.

What a lost message, a restarted shard or a host that was lost costs is a walk: every ``WALK_S`` while the directory
names a worker's shard, the adapter reads its received rows older than ``WALK_S``, a page at a time past a cursor,
and forwards again those whose key lives on a worker (a shard without an address, its host lost, waits for the next
walk). The worker's dedup makes a second forward a look, never a second row. What survives kill -9 of either
side: the row here until the worker's commit is answered, so nothing acknowledged is lost and nothing is stored
twice.

Two components of the adapter: ``InboundRoutes`` (its actor thread) says where each new row goes, a doorbell at a
shard of this host (doorbells.py) or the row itself to a worker's shard; ``Forwarding`` (its loop) walks and marks.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Optional

from actors.adapters.doorbells import Doorbells
from actors.messages import InboundStored, StoreInbound
from common.host_map import place_named

WALK_S = 5.0              # a row not forwarded this long is sent again
WALK_PAGE = 500           # rows read per walk: a bound on one walk's work
ROWS_PER_MESSAGE = 100    # rows per StoreInbound: a bound on one message's size (payloads are bounded per row)


@dataclass(frozen=True)
class Unforwarded:
    """Loop -> actor thread: received rows a walk found, ((seq, key, platform, message id, payload), ...)."""
    rows: tuple
    rings: tuple = ()   # none: a forwarded row's session is rung by the shard that stores it


def remote_shard(directory, key: str) -> Optional[tuple[str, Any]]:
    """The (child name, address) of the key's shard when it runs on a worker; None when it runs on this host (or
    no directory names one yet)."""
    if directory is None:
        return None
    name, address = directory.shard_for(key)
    return None if not name or place_named(name).on_leader else (name, address)


def any_remote(directory) -> bool:
    return directory is not None and any(not place_named(name).on_leader for name, _a in directory.shards)


def outgoing(directory, rows) -> list[tuple[Any, StoreInbound]]:
    """The StoreInbound messages for the rows (seq, key, platform, message id, payload) whose key lives on a worker
    shard that has an address now, grouped per shard in seq order, ROWS_PER_MESSAGE at most each."""
    per_shard: dict[str, tuple[Any, list]] = {}   # by name: an actor address is not hashable
    for row in rows:
        found = remote_shard(directory, row[1])
        if found is not None and found[1] is not None:
            per_shard.setdefault(found[0], (found[1], []))[1].append(tuple(row))
    return [(address, StoreInbound(tuple(batch[i:i + ROWS_PER_MESSAGE])))
            for address, batch in per_shard.values() for i in range(0, len(batch), ROWS_PER_MESSAGE)]


class InboundRoutes:
    """Where the rows an intake round stored go: one doorbell per session of this host's shards, the rows of a
    worker's shards as StoreInbound. Actor thread only."""

    def __init__(self):
        self.doorbells = Doorbells()
        self.forwards = False   # the directory names a worker's shard (else nothing is forwarded, at no cost)

    def of_round(self, directory, rings: tuple, rows: tuple, now: float) -> list[tuple[Any, Any]]:
        # One doorbell per session per round: a burst of rows for one chat is one look at its inbox, and a
        # doorbell per row would flood the adapter's transmit queue (and stall the operations behind it).
        latest: dict[str, int] = {}
        for key, seq in rings:
            latest[key] = max(seq, latest.get(key, seq))
        out = [bell for key, seq in latest.items() for bell in self.doorbells.ring(directory, key, seq, now)]
        return out + outgoing(directory, rows) if self.forwards else out

    def directory_changed(self, directory, now: float) -> list[tuple[Any, Any]]:
        self.forwards = any_remote(directory)
        return self.doorbells.directory_changed(directory, now)


class Forwarding:
    def __init__(self, platform_name: Callable[[], str], store: Callable[[], Any], post: Callable[[Any], None],
                 say: Callable[..., None] = lambda level, fmt, *args: None, older_than_s: float = WALK_S):
        self.platform_name, self.store, self.post, self.say = platform_name, store, post, say
        self.older_than_s = older_than_s   # younger rows are in flight: their StoreInbound is on its way
        self.cursor = 0   # loop thread: the last seq the walk read; back to 0 after a short page

    async def walk(self) -> None:
        """One page of received rows older than WALK_S, handed to the actor thread to forward what is a worker's."""
        store = self.store()
        if store is None:
            return
        try:
            rows = await store.inbox.received_after(self.platform_name(), self.cursor, self.older_than_s, WALK_PAGE)
        except Exception as exc:  # noqa: BLE001 - storage busy or failing: the next walk reads again
            self.say(logging.WARNING, "%s: the walk for rows to forward could not read the inbox: %s",
                     self.platform_name(), exc)
            return
        self.cursor = rows[-1].seq if len(rows) == WALK_PAGE else 0
        if rows:
            self.post(Unforwarded(tuple((r.seq, r.session_key, r.platform, r.platform_message_id, r.payload)
                                        for r in rows)))

    async def mark(self, stored: InboundStored) -> None:
        """The shard has them: received -> done (forwarded) here. Lost before it commits, a walk sends them again
        and the shard's dedup answers for them."""
        store = self.store()
        if store is None:
            return
        try:
            await store.inbox.forwarded(stored.seqs, stored.shard)
        except Exception as exc:  # noqa: BLE001 - the rows stay received: the next walk forwards them again
            self.say(logging.WARNING, "%s: %d row(s) %s has stored could not be marked forwarded here: %s",
                     self.platform_name(), len(stored.seqs), stored.shard, exc)
