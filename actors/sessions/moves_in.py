"""A worker shard's keys whose records may still be elsewhere: held until every earlier home has answered.

A shard on a host that joined wins some keys that lived on the shards already there (common/host_map.py). Before its
shard starts a session for such a key it must have that key's records, or know there are none: a session started
empty would answer without the transcript and, once the records came, leave two current sessions of one key. So a
key with no session in this host's database is *held*: its rows wait (durable in this shard's inbox, as they do
for a free slot) and each of its earlier homes (``host_map.earlier_homes``) is asked with ``SessionWanted``. Each
answers with a ``SessionHandover``: the records, imported here in one transaction and answered ``SessionTaken``, or
none. When all have answered the key is free and its session starts if rows wait. An earlier home that said
``MovesDone`` on this map holds nothing another shard wins, so it is not asked; that makes the first message of a
new chat cost no round trip once the shards before it are done moving.

The leader's shards hold nothing: hosts that join take keys from the shards already there, never give them to the
leader.

State (its fields are its own): the map (places, digest, addresses), the held keys with the homes still to answer,
the keys known to be here (their records are here, or nobody had any), the shards done moving on this map.

What survives kill -9: nothing here is durable, and nothing needs to be. A shard that starts again holds again
every key it has no session of, and asks again; a home that handed a key over already answers that it holds none,
since it forgot the key only after this shard's import committed.

Runs on the shard's actor thread; storage calls go through ``db``.
"""
from __future__ import annotations

from typing import Any, Callable

from actors.messages import SessionTaken, SessionWanted
from common.host_map import ShardPlace, earlier_homes, map_digest
from common.logging_setup import key_hash
from storage import ImportRefused

KNOWN_BOUND = 200_000    # keys remembered as settled (a lookup of the database each past this: correct, slower)


class MovesIn:
    def __init__(self, me: ShardPlace, db: Callable, store: Any, send: Callable[[Any, Any], None], log):
        self.me, self.db, self.store, self.send, self.log = me, db, store, send, log
        self.places: list[ShardPlace] = []
        self.digest = ""
        self.addresses: dict[str, Any] = {}
        self.held: dict[str, set[str]] = {}     # key -> the earlier homes (child names) that have not answered
        self.known: set[str] = set()
        self.done: set[str] = set()             # shards that said MovesDone on this map
        self.taken_in = 0                       # sessions imported here, for the views

    def on_map(self, places: list[ShardPlace], addresses: dict) -> None:
        if map_digest(places) != self.digest:
            self.done.clear()
            self.known.clear()
        self.places, self.digest, self.addresses = list(places), map_digest(places), dict(addresses)
        self.ask_again()

    def admit(self, key: str) -> bool:
        """Whether the key's session may start here now; False: it is held (its rows wait), its homes asked."""
        if self.me.on_leader or key in self.known or not self.places:
            return True
        if key in self.held:
            return False
        homes = {p.child_name for p in earlier_homes(key, self.places, self.me)} - self.done
        if homes and self.db(self.store.sessions.current(key)) is None:
            self.held[key] = homes
            self._ask(key, homes)
            return False
        if len(self.known) >= KNOWN_BOUND:
            self.known.clear()
        self.known.add(key)
        return True

    def _ask(self, key: str, homes) -> None:
        for home in homes:
            address = self.addresses.get(home)
            if address is not None:   # a home on a lost host is asked when it is back (ask_again)
                self.send(address, SessionWanted((key,), self.me.child_name, self.digest))

    def ask_again(self) -> None:
        for key, homes in self.held.items():
            self._ask(key, homes)

    def handover(self, message, sender) -> bool:
        """A home's answer; True if it frees the key. Records are imported before SessionTaken is answered, so
        the home forgets them only once they are here."""
        refused = None
        if message.data is not None:
            try:
                outcome = self.db(self.store.sessions.import_moved(message.data, served_here_ok=message.again))
                self.taken_in += outcome.changed
            except ImportRefused as exc:
                refused = str(exc)
                self.log.error("%s: a session moved from %s was refused: %s", self.me.child_name, message.source,
                               refused, extra={"session": key_hash(message.key)})
            # A StorageError (a full disk) propagates: nothing is answered, the home hands it over again later.
        self.send(sender, SessionTaken(message.key, self.me.child_name, refused))
        return self._answered(message.key, message.source)

    def _answered(self, key: str, home: str) -> bool:
        homes = self.held.get(key)
        if homes is None:
            return False
        homes.discard(home)
        if homes:
            return False
        del self.held[key]
        self.known.add(key)
        return True

    def moves_done(self, message) -> list[str]:
        """A home is done moving on this map: the keys that waited only for it are free."""
        if message.digest != self.digest:
            return []
        self.done.add(message.source)
        return [key for key in list(self.held) if self._answered(key, message.source)]

    def facts(self) -> tuple:
        return (("held", len(self.held)), ("moved_in", self.taken_in)) if self.held or self.taken_in else ()
