"""The session supervisor: one_for_one over the session shards, and the shard map (session key -> shard).

Its children are ``[sessions] shards`` SessionShard processes on the leader (default: one per core) and, in a
convention with ``[cluster] shards_per_worker``, that many on each worker that offers ``gateway.shards``, placed
there by host (ChildSpec.placement), with a delivery sweeper ``sweeper:<host>`` for the ledger of that host (its
shards' replies are recorded there: actors/sweeper.py); each permanent and hosting the Session and StreamConsumer cells of its keys
(actors/sessions/shard.py). A key lives on the shard that rendezvous hashing picks over every shard of every host
(common/host_map.py; on the leader alone, common/shard_map.py), so its inbox rows, its interrupted turn and its
doorbells always meet the same shard, across restarts of either. Each shard is named for where it runs:
``shard:<i>`` on the leader, ``shard:<host>/<i>`` on a worker.

State: the shards (children), and the workers whose shards run (by admin address: their host name). Sessions,
admission and passivation are each shard's.

Messages it takes:
  InboxDoorbell(key)   passed to the key's shard: adapters ring the shard directly once the Directory gives its
                       address, and this supervisor only while it does not (the inbox is the truth: a doorbell only
                       says "look", and a shard that is restarting reads its inbox when it starts)
  ActorSystemConventionUpdate   (from Thespian's admin, with shards_per_worker) a worker joined: its shards are
                       started there, and its sweeper; a worker was lost: they are shown unavailable (no address in the
                       Directory: what routes to them waits, durable on the leader) until it joins again
  (the supervisor behaviour's: Started, ChildReady, exits, RestartChild, DescribeTree)
Messages it sends: Started to each shard, InboxDoorbell to shards, AddressesChanged("shards") to the root.

A shard killed with -9 (OOM, operator) is restarted at once and re-creates every session of its keys that has inbox
rows or an interrupted turn. Shards count toward this supervisor's intensity: a shard that keeps dying is a fault of
the gateway, not of one conversation (a conversation's crashes stay inside its shard, counted per session).
"""
from __future__ import annotations

import dataclasses

from actors.messages import InboxDoorbell, ShardArgs
from common.cluster import HOST_CAPABILITY, SHARDS_CAPABILITY
from common.host_map import SWEEPER_PREFIX, ShardPlace, place_named, place_of
from common.shard_map import SHARD_PREFIX, default_shard_count, shard_name
from supervision.spec import ChildSpec, ChildStatus, Restart, flags_from_config
from supervision.supervisor import Supervisor
from runtime.child_addresses import forget_child_address
from common.config import setting

SHARD_ACTOR = "actors.sessions.shard.SessionShard"
SWEEPER_ACTOR = "actors.sweeper.DeliverySweeper"


def shard_spec(place: ShardPlace, places: tuple) -> ChildSpec:
    """A shard's child spec; ``places``: the child names of every shard of the convention now (the shard starts
    the sessions of the keys it wins among them)."""
    return ChildSpec(place.child_name, SHARD_ACTOR, kind="SessionShard",
                     args=ShardArgs(place.index, sum(1 for n in places if place_named(n).on_leader), places),
                     restart=Restart.PERMANENT, shutdown_timeout_s=10.0,
                     placement=None if place.on_leader else {HOST_CAPABILITY: place.host})


def sweeper_spec(host: str) -> ChildSpec:
    """The delivery sweeper of a worker host: it finishes the replies a crash left in that host's ledger."""
    return ChildSpec(SWEEPER_PREFIX + host, SWEEPER_ACTOR, kind="DeliverySweeper", restart=Restart.PERMANENT,
                     placement={HOST_CAPABILITY: host})


def shard_specs(config: dict) -> list[ChildSpec]:
    count = setting(config, "sessions", "shards") or default_shard_count()
    places = tuple(shard_name(i) for i in range(count))
    return [shard_spec(place_named(name), places) for name in places]


class SessionSupervisor(Supervisor):
    announces = "shards"       # adapters ring a key's shard directly, at the address the Directory gives

    def child_specs(self, args) -> list[ChildSpec]:
        self.workers: dict[str, str] = {}          # admin address -> host name, for each worker running shards
        self.per_worker = setting(self.config, "cluster", "shards_per_worker") if setting(
            self.config, "cluster", "enabled") else 0
        if self.per_worker:
            self.notifyOnSystemRegistrationChanges(True)
        return shard_specs(self.config)

    def flags(self, args):
        return flags_from_config(self.config)

    def shard_names(self) -> tuple:
        return tuple(name for name in self.children if name.startswith(SHARD_PREFIX))

    def places(self) -> list[ShardPlace]:
        return [place_named(name) for name in self.shard_names()]

    def on_InboxDoorbell(self, message: InboxDoorbell, sender) -> None:
        child = self.children.get(place_of(message.session_key, self.places()).child_name)
        if child is not None and child.address is not None:
            self.send(child.address, message)

    def on_ActorSystemConventionUpdate(self, message, sender) -> None:
        caps, address = message.remoteCapabilities or {}, str(message.remoteAdminAddress)
        host = str(caps.get(HOST_CAPABILITY) or self.workers.get(address) or "")
        if not host or (message.remoteAdded and not caps.get(SHARDS_CAPABILITY)):
            return
        mine = [ShardPlace(host, i) for i in range(self.per_worker)]
        if message.remoteAdded:
            self.workers[address] = host
            names = self.shard_names() + tuple(p.child_name for p in mine if p.child_name not in self.children)
            for name in self.shard_names():   # every shard learns the new map at its next start
                child = self.children[name]
                child.spec = dataclasses.replace(child.spec, args=dataclasses.replace(child.spec.args, places=names))
            for spec in [shard_spec(place, names) for place in mine] + [sweeper_spec(host)]:
                child = self.children.get(spec.name)
                if child is None or child.address is None:
                    self.log.info("starting %s on host %s", spec.name, host)
                    if child is not None:
                        child.recent = type(child.recent)(1_000_000, self._flags.period_s)   # a fresh start
                    self.start_child(spec)
        else:
            self.workers.pop(address, None)
            for name in [p.child_name for p in mine] + [SWEEPER_PREFIX + host]:
                child = self.children.get(name)
                if child is not None and child.address is not None:
                    # The host is gone, and with it the shard: no exit notice will come. Its keys keep their
                    # place in the map (no other shard takes them over empty); their rows wait on the leader.
                    forget_child_address(self, child.address)
                    child.address, child.seen_as, child.pid, child.status = None, None, 0, ChildStatus.UNAVAILABLE
                    child.last_exit = f"host {host} lost"
            self.announce_children()

    def within_intensity(self, child, now: float) -> bool:
        """A worker's shard or sweeper that keeps failing is that host's trouble: it stops being restarted (shown
        failed, started again when its host joins again) instead of counting toward this supervisor's intensity,
        whose end would stop the leader's own shards too."""
        if not child.spec.placement:
            return super().within_intensity(child, now)
        if child.recent.recent(now) + 1 <= self._flags.max_restarts:
            return True
        self.log.error("%s: %s exited %d times in %gs (last: %s); not restarted until its host joins again",
                       self.name, child.spec.name, child.recent.recent(now) + 1, self._flags.period_s,
                       child.last_exit)
        child.status = ChildStatus.FAILED
        return False

    def pending_work(self) -> int:
        return 0
