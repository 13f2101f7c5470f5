"""Where an adapter rings a session's doorbell: straight at the session shard that hosts the key, at the address
the Directory gives (chosen by rendezvous hashing, common/host_map.py), saving the hop through the session
supervisor on every message. Pure bookkeeping, no actor: ``ring`` and ``directory_changed`` return the
``(address, InboxDoorbell)`` pairs for the adapter to send, in order.

- No directory yet: the doorbell is held (at most MAX_UNRUNG; beyond that the shard's inbox scan at its start
  covers the rest) and rung when the first directory arrives.
- The key's shard runs on a worker: not rung here; the rows go to it as StoreInbound (forwarding.py), which rings.
- The key's shard has an address: rung there. It has none (the shard is restarting): rung at the session
  supervisor, which passes it to the shard it is starting (Thespian queues mail for a child that is starting).
- A shard's address changed (it was restarted): the doorbells rung at the old address in the last REPLAY_WINDOW_S
  are rung again at the new one. A shard reads its inbox when it starts, but a row committed after that read whose
  doorbell went to the dead address, before this adapter heard of the new one, would otherwise wait for the chat's
  next message. A doorbell only says "look at the inbox", so ringing one again costs a look, never a second turn.
"""
from __future__ import annotations

import collections
import dataclasses
import time
from typing import Any, Optional

from actors.messages import InboxDoorbell

MAX_UNRUNG = 10_000
MAX_RECENT_PER_SHARD = 1_000   # doorbells remembered per shard, for the replay (each a key and a number)
ON_A_WORKER = object()         # _route: the key's shard runs on a worker host, rung by the rows forwarded to it
REPLAY_WINDOW_S = 60.0         # longer than a shard takes to be restarted and announced, even on a loaded machine


class Doorbells:
    """One adapter's doorbells, on its actor thread. ``now`` is monotonic time, from the caller."""

    def __init__(self, max_unrung: int = MAX_UNRUNG, max_recent: int = MAX_RECENT_PER_SHARD,
                 replay_window_s: float = REPLAY_WINDOW_S):
        self.unrung: collections.deque = collections.deque(maxlen=max_unrung)
        self.max_recent, self.replay_window_s = max_recent, replay_window_s
        self.recent: dict[str, collections.deque] = {}   # shard name -> (at, key, seq) rung at its address
        self.known: dict[str, Any] = {}                  # shard name -> the last address the directory gave it

    def ring(self, directory, key: str, seq: int, now: float) -> list[tuple[Any, InboxDoorbell]]:
        target = self._route(directory, key, seq, now)
        if target is None:
            self.unrung.append((key, seq))
        return [] if target is None or target is ON_A_WORKER else [(target, InboxDoorbell(key, seq))]

    def directory_changed(self, directory, now: float) -> list[tuple[Any, InboxDoorbell]]:
        """What to ring now that ``directory`` is the newest: again at restarted shards, and what was held."""
        out = []
        for shard, address in directory.shards:
            if address is None:
                continue
            before = self.known.get(shard)
            self.known[shard] = address
            if before is not None and before != address:
                latest: dict[str, int] = {}
                for at, key, seq in self.recent.pop(shard, ()):
                    if now - at <= self.replay_window_s:
                        latest[key] = max(seq, latest.get(key, seq))
                out += [(address, InboxDoorbell(key, seq)) for key, seq in latest.items()]
        while self.unrung:
            key, seq = self.unrung[0]
            target = self._route(directory, key, seq, now)
            if target is None:
                break
            self.unrung.popleft()
            if target is not ON_A_WORKER:
                out.append((target, InboxDoorbell(key, seq)))
        return out

    def _route(self, directory, key: str, seq: int, now: float) -> Optional[Any]:
        if directory is None:
            return None
        place, address = directory.place_for(key)
        if place is not None and not place.on_leader:
            return ON_A_WORKER   # its StoreInbound rings it, once the rows are there (forwarding.py)
        shard = place.child_name if place is not None else ""
        if address is not None:
            recent = self.recent.get(shard)
            if recent is None:
                recent = self.recent[shard] = collections.deque(maxlen=self.max_recent)
            recent.append((now, key, seq))
            return address
        return directory.sessions


class InternalDoorbells:
    """For an actor that writes the gateway's own inbox rows (the scheduler, the watcher): ``ring`` a row's session
    and ring the held doorbells when the directory arrives. Their doorbells say ``internal``: not platform traffic.
    The actor sets ``self.doorbells = Doorbells()`` and has ``directory`` and ``send`` (GatewayActor)."""
    doorbells: Doorbells

    def ring(self, key: str, seq: int) -> None:
        for address, bell in self.doorbells.ring(self.directory, key, seq, time.monotonic()):
            self.send(address, dataclasses.replace(bell, internal=True))

    def on_directory(self, directory) -> None:
        for address, bell in self.doorbells.directory_changed(directory, time.monotonic()):
            self.send(address, dataclasses.replace(bell, internal=True))
