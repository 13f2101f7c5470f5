"""The session supervisor: one_for_one over the session shards, and the shard map (session key -> shard).

Its children are ``[sessions] shards`` SessionShard processes (default: one per core), each permanent and hosting
the Session and StreamConsumer cells of its keys (actors/sessions/shard.py). A key lives on the shard that
rendezvous hashing picks (common/shard_map.py), so its inbox rows, its interrupted turn and its doorbells always
meet the same shard, across restarts of either.

State: the shards (children ``shard:<i>``), nothing else: sessions, admission and passivation are each shard's.

Messages it takes:
  InboxDoorbell(key)   passed to the key's shard: adapters ring the shard directly once the Directory gives its
                       address, and this supervisor only while it does not (the inbox is the truth: a doorbell only
                       says "look", and a shard that is restarting reads its inbox when it starts)
  (the supervisor behaviour's: Started, ChildReady, exits, RestartChild, DescribeTree)
Messages it sends: Started to each shard, InboxDoorbell to shards, AddressesChanged("shards") to the root.

A shard killed with -9 (OOM, operator) is restarted at once and re-creates every session of its keys that has inbox
rows or an interrupted turn. Shards count toward this supervisor's intensity: a shard that keeps dying is a fault of
the gateway, not of one conversation (a conversation's crashes stay inside its shard, counted per session).
"""
from __future__ import annotations

from actors.messages import InboxDoorbell
from common.shard_map import default_shard_count, shard_name, shard_of
from supervision.spec import ChildSpec, Restart, flags_from_config
from supervision.supervisor import Supervisor
from common.config import setting

SHARD_ACTOR = "actors.sessions.shard.SessionShard"


def shard_specs(config: dict) -> list[ChildSpec]:
    count = setting(config, "sessions", "shards") or default_shard_count()
    return [ChildSpec(shard_name(i), SHARD_ACTOR, kind="SessionShard", args={"index": i, "count": count},
                      restart=Restart.PERMANENT, shutdown_timeout_s=10.0) for i in range(count)]


class SessionSupervisor(Supervisor):
    announces = "shards"       # adapters ring a key's shard directly, at the address the Directory gives

    def child_specs(self, args) -> list[ChildSpec]:
        self.shard_count = len(specs := shard_specs(self.config))
        return specs

    def flags(self, args):
        return flags_from_config(self.config)

    def on_InboxDoorbell(self, message: InboxDoorbell, sender) -> None:
        child = self.children.get(shard_name(shard_of(message.session_key, self.shard_count)))
        if child is not None and child.address is not None:
            self.send(child.address, message)

    def pending_work(self) -> int:
        return 0
