"""A shard's keys that another shard wins now: each drained here, then handed over with its records, then forgotten.

When a host joins, rendezvous hashing (common/host_map.py) gives its shards the keys they win, and only those. The
shard that held such a key keeps its records until the new one has them: it stops serving the key (its shard does
not start a session for a key it does not win), lets a live session finish what its inbox holds (Passivate), then
sends the session's records as export format version 2 (storage/moving.py) in a ``SessionHandover``; on
``SessionTaken`` it deletes exactly what the file held (``forget_moved``). On a worker, a key with inbox rows but no
session (its first message came just before the map changed) has its rows sent as ``StoreInbound`` and marked
forwarded once stored, as an adapter does (actors/adapters/forwarding.py), and a handover with no file says there is
nothing else; on the leader such rows are the adapters' walk's to forward.
When nothing is left to move, the shard tells every worker shard ``MovesDone`` for that map: their new chats need not
ask it any more.

State (one per shard; its fields are its own): the map it is on (places, digest, the shards' addresses), the keys
moving and where to, the files handed over and not yet answered (with when), the keys whose live session was asked
to passivate first, asks (``SessionWanted``) that came on a map this shard is not on yet.

What survives kill -9, and why nothing is lost or doubled: nothing of this is durable, because all of it is read
again from the database and the map. A shard that starts looks over its keys (``plan``) and moves again what it
still holds. The destination's import is idempotent, a second file of a session it serves already adds only the
rows it lacks (``served_here_ok``), and it holds a key until every earlier home answered (moves_in.py). The forget
commits only after the destination's import did. Between the two both hold the records and only the destination
serves the key.

Runs on the shard's actor thread (every call here is from one of its handlers); storage calls go through ``db``.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional

from actors.messages import MovesDone, SessionHandover, StoreInbound
from common.host_map import ShardPlace, map_digest, place_of
from common.logging_setup import key_hash
from storage import ImportRefused, StorageError

RESEND_S = 10.0        # a handover unanswered this long goes again (the message or the destination was lost)
# Handovers sent and not yet answered, at most: each costs an export here and an import transaction there, on the
# shards' loops. A host joining moves a share of every shard's keys at once; hundreds in one handler keep both loops
# from answering the watchdog's ping for seconds (1,000 chats over three hosts), and it restarts them mid-reply.
MOVE_WINDOW = 16
FORGET_TRIES = 5       # second files of one key (each forget met newer input) before it is left here, reported


class MovesOut:
    def __init__(self, me: ShardPlace, db: Callable, store: Any, send: Callable[[Any, Any], None], log):
        self.me, self.db, self.store, self.send, self.log = me, db, store, send, log
        self.places: list[ShardPlace] = []
        self.digest = ""
        self.addresses: dict[str, Any] = {}           # shard child name -> address (None: not running now)
        self.moving: dict[str, str] = {}              # key -> the shard that wins it now
        self.sent: dict[str, tuple[Optional[bytes], float, int]] = {}   # key -> (file, sent at, forget tries)
        self.draining: set[str] = set()               # keys whose live session was asked to passivate
        self.early_asks: list[tuple[Any, Any]] = []   # (SessionWanted, sender) on a map this shard is not on yet
        self.moved = 0                                # sessions handed over and forgotten here, for the views

    # ------------------------------------------------------------------------------------------------- the map
    def start_on(self, places: list[ShardPlace]) -> None:
        """The map the shard was started on: what it wins until a Directory says more (``plan``)."""
        self.places = list(places)

    def wins(self, key: str) -> bool:
        return not self.places or place_of(key, self.places) == self.me

    def plan(self, places: list[ShardPlace], addresses: dict, live_keys, is_live: Callable[[str], bool],
             passivate: Callable[[str], bool]) -> None:
        """The map (or a shard's address) changed, or the shard started: look over every key whose records this
        shard keeps and move those another shard wins now. Keys of this host's database are this shard's when it
        wins them among its host's shards (the others of the host look after theirs). On the leader, a key with
        inbox rows and no session is not one of them: the leader's inbox holds every chat's rows, and the
        adapters' walk forwards those of a worker's keys (actors/adapters/forwarding.py)."""
        changed = map_digest(places) != self.digest
        self.places, self.digest, self.addresses = list(places), map_digest(places), dict(addresses)
        if changed:
            here = [p for p in self.places if p.host == self.me.host]
            keys = set(self.db(self.store.sessions.current_keys())) | set(live_keys)
            if not self.me.on_leader:
                keys |= set(self.db(self.store.inbox.sessions_with_pending()))
            for key in sorted(keys):
                if here and place_of(key, here) == self.me and not self.wins(key):
                    self.moving.setdefault(key, place_of(key, self.places).child_name)
            for key in [k for k in self.moving if self.wins(k)]:   # the map changed back before it went
                self.moving.pop(key, None)
                self.sent.pop(key, None)
            if self.moving:
                self.log.info("%s: %d session(s) move to the shards that win them now", self.me.child_name,
                              len(self.moving))
        for key in list(self.moving):
            self.advance(key, is_live(key), passivate)
        asks, self.early_asks = self.early_asks, []
        for message, sender in asks:
            self.wanted(message, sender, is_live, passivate)
        self._done_if_empty()

    def advance(self, key: str, live: bool, passivate: Callable[[str], bool]) -> None:
        """The next step of one key's move: drain its live session, or hand its records over (once the destination
        has an address: a lost host's shard waits for its host)."""
        if key in self.sent or self.addresses.get(self.moving[key]) is None:
            return
        if live:
            if key not in self.draining and passivate(key):
                self.draining.add(key)
            return
        self.draining.discard(key)
        if len(self.sent) < MOVE_WINDOW:   # else it goes when an answer frees the window (refill) or at a tick
            self._hand_over(key, again=False, tries=0)

    def refill(self, is_live: Callable[[str], bool], passivate: Callable[[str], bool]) -> None:
        """Hand over the keys that waited for the window, up to its size."""
        for key in list(self.moving):
            if len(self.sent) >= MOVE_WINDOW:
                return
            if key not in self.sent and key not in self.draining:
                self.advance(key, is_live(key), passivate)

    def drained(self, key: str, passivate: Callable[[str], bool]) -> None:
        """The key's session cell stopped (passivated, or crashed for good)."""
        if key in self.moving:
            self.draining.discard(key)
            self.advance(key, False, passivate)

    def _hand_over(self, key: str, again: bool, tries: int) -> None:
        dest = self.addresses.get(self.moving[key])
        try:
            info = self.db(self.store.sessions.current(key))
            # The session's cell is not live here, so a turn it had in flight was cut: the destination resumes it.
            data = self.db(self.store.sessions.export_for_move(info.session_id, interrupted=True)) if info else None
            rows = () if info else tuple(
                (r.seq, r.session_key, r.platform, r.platform_message_id, r.payload)
                for r in self.db(self.store.inbox.rows_in_state(key)))
        except StorageError as exc:
            self.log.warning("%s: the move of a session waits for storage: %s", self.me.child_name, exc,
                             extra={"session": key_hash(key)})
            return   # the next tick tries again
        if rows:
            self.send(dest, StoreInbound(rows))   # answered InboundStored: marked forwarded then (mark_stored)
        self.sent[key] = (data, time.monotonic(), tries)
        self.send(dest, SessionHandover(key, data, self.me.child_name, again))

    def mark_stored(self, seqs: tuple, shard: str) -> None:
        try:
            self.db(self.store.inbox.forwarded(seqs, shard))
        except StorageError as exc:   # they stay received, and go again with the next handover of their key
            self.log.warning("%s: rows stored by %s could not be marked forwarded: %s", self.me.child_name, shard,
                             exc)

    def taken(self, key: str, refused: Optional[str]) -> None:
        """The destination committed the handover (or refused it, saying why)."""
        data, _at, tries = self.sent.pop(key, (None, 0.0, 0))
        if key not in self.moving:
            return
        if refused:
            self.log.error("%s: %s refused a session moved to it, which stays here unserved: %s", self.me.child_name,
                           self.moving[key], refused, extra={"session": key_hash(key)})
            self.moving.pop(key)
        elif data is None:
            self.moving.pop(key)
        else:
            try:
                self.db(self.store.sessions.forget_moved(data))
                self.moving.pop(key)
                self.moved += 1
            except ImportRefused as exc:
                if tries + 1 >= FORGET_TRIES:
                    self.log.error("%s: a moved session keeps getting input here; left here: %s",
                                   self.me.child_name, exc, extra={"session": key_hash(key)})
                    self.moving.pop(key)
                else:   # input came after the file was written: a second file carries it, the first is kept there
                    self._hand_over(key, again=True, tries=tries + 1)
            except StorageError as exc:
                self.sent[key] = (data, 0.0, tries)   # forget again at the next tick, once storage takes it
                self.log.warning("%s: forgetting a moved session waits for storage: %s", self.me.child_name, exc)
                return
        self._done_if_empty()

    def wanted(self, message, sender, is_live: Callable[[str], bool], passivate: Callable[[str], bool]) -> None:
        """A shard that wins these keys asks for them: hand each over, or say none is here."""
        if message.digest != self.digest:
            if len(self.early_asks) < 10_000:   # answered on the new map; an ask dropped past this is asked again
                self.early_asks.append((message, sender))
            return
        for key in message.keys:
            if key in self.moving:
                if key in self.sent:   # asked again: the destination restarted, or the handover was lost
                    data, _at, tries = self.sent[key]
                    self.send(sender, SessionHandover(key, data, self.me.child_name, again=True))
                else:
                    self.advance(key, is_live(key), passivate)
            else:
                self.send(sender, SessionHandover(key, None, self.me.child_name))

    def tick(self, is_live: Callable[[str], bool], passivate: Callable[[str], bool]) -> None:
        """Every few seconds while keys move: hand over again what was not answered in RESEND_S, forget what
        storage refused to forget, and move on the keys that waited for an address."""
        now = time.monotonic()
        for key, (data, at, tries) in list(self.sent.items()):
            if at == 0.0:
                self.sent.pop(key)
                self.sent[key] = (data, now, tries)
                self.taken(key, None)
            elif now - at > RESEND_S and self.addresses.get(self.moving.get(key, "")) is not None:
                self.sent[key] = (data, now, tries)
                self.send(self.addresses[self.moving[key]],
                          SessionHandover(key, data, self.me.child_name, again=True))
        for key in list(self.moving):
            if key not in self.sent:
                self.advance(key, is_live(key), passivate)

    def _done_if_empty(self) -> None:
        if self.moving or not self.digest:
            return
        for name, address in self.addresses.items():
            if address is not None and name != self.me.child_name and "/" in name:   # worker shards only
                self.send(address, MovesDone(self.me.child_name, self.digest))

    def facts(self) -> tuple:
        return (("moving_out", len(self.moving)), ("moved_out", self.moved)) if self.moving or self.moved else ()
