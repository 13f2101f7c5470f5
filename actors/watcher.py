"""The watcher: looks at the ``[watch.NAME]`` targets (a URL, a file, an MCP server's resource) every interval and
starts a turn in the watch's chat when one changed (docs/background.md, "Watches"). A leaf child of the root,
present when watches are configured or a profile offers the agent's create_watch tool (a reload that brings the
first ones starts it: actors/root.py). The watches the agent created are read from storage
(storage/agent_watches.py) every STORED_REFRESH_S, and looked at as the configured ones are.

State: the watches (the configuration's, checked when it was loaded), when each is looked at next, which are being
read, the last refusal of each (logged once until it changes), the doorbells it could not ring yet (no directory),
and counts of its looks, the changes it claimed and the reads refused (shown in ``tree`` and ``status``). Everything
else is in storage: what each watch last saw and its changes (storage/watches.py).

Messages it takes:
  Started          open storage, tick at once (every watch is due)
  timer tick       every TICK_S: each watch due (every interval_s, or at its schedule's times; each at once
                   when the watcher starts), and not still being read, is read on a thread (bounded:
                   actors/scheduling/watches.py read_target), so a slow server never holds this actor
  TaskDone         a read's outcome (on the bridge): the first read records what it saw; a read whose hash differs
                   from the stored one claims the change (state moved, change row and the prompt's inbox row in
                   one transaction); then the session is rung; a refusal is logged once until its reason changes
  timer stored     every STORED_REFRESH_S: the watches the agent created, again from storage (new ones are due)
  timer prune      hourly: changes older than [storage] inbox_retention_days are deleted (history only)
  Directory        the doorbells held for want of an address are rung
  StopIntake       a drain began: no more looks (a change seen later is claimed by the next instance)
  ConfigChanged    a reload: the watches again from the new tables (``on_config_changed``): a new or changed one
                   is looked at at the next tick, a removed one no more; a read in flight of a target no longer
                   watched is dropped when it ends (its content is not the watch's now)
Messages it sends: InboxDoorbell(internal=True) to the shard of the change's session (as the scheduler does).

What survives kill -9: every change whose claim committed, with its inbox row, and the new content as the stored
one: the restarted watcher sees no change there, and the restarted shards ring the sessions with rows waiting, so
the change is answered once. A look killed before its commit left the old content stored: the next incarnation sees
the change again and claims it then. A read in flight is lost with the process: the next incarnation reads again.
"""
from __future__ import annotations

import asyncio
import dataclasses
import time

from actors.adapters.doorbells import Doorbells, InternalDoorbells
from actors.scheduling.watches import (ReadRefused, Watch, change_item, content_hash, describe_change, next_look_at,
                                       read_target, stored_watch, validate_watches)
from common.config import setting
from common.mcp_config import server_specs
from supervision.actor import GatewayActor
from supervision.bridge import TaskDone
from supervision.storage_access import StoreUser

TICK_S = 1.0
STORED_REFRESH_S = 5.0
PRUNE_INTERVAL_S = 3600.0
MAX_WAITING = 10              # changes told to one conversation left unanswered before the next is skipped


class Watcher(InternalDoorbells, StoreUser, GatewayActor):
    uses_bridge = True

    def __init__(self):
        super().__init__()
        self.watches: dict[str, Watch] = {}       # every watch looked at: the configured ones and the stored
        self.configured: dict[str, Watch] = {}
        self.stored: dict[str, Watch] = {}        # the watches the agent created
        self.next_look: dict[str, float] = {}     # monotonic time each watch is looked at next
        self.last_refusal: dict[str, str] = {}
        self.reading: set[str] = set()            # the watches whose read runs on a thread now
        self.doorbells = Doorbells()
        self.looks = 0
        self.changes = 0
        self.refused = 0

    def on_start(self, args) -> None:
        self.configured = {name: w for name, w in validate_watches(self.config).items() if w.enabled}
        self.open_store()
        self.on_timer_stored(None)
        self.after(60.0, "prune")
        self.on_timer_tick(None)

    def on_timer_prune(self, _data) -> None:
        self.after(PRUNE_INTERVAL_S, "prune")
        days = setting(self.config, "storage", "inbox_retention_days")
        if removed := self.db(self.store.watches.purge(days * 86400)):
            self.log.info("watch: retention removed %d change record(s)", removed)

    def on_stop(self) -> None:
        self.close_store()

    def describe(self):
        node = super().describe()
        return dataclasses.replace(node, facts=(("watches", len(self.watches)), ("looks", self.looks),
                                                ("changes", self.changes), ("refused", self.refused)))

    def on_timer_tick(self, _data) -> None:
        self.after(TICK_S, "tick")
        if self.intake_stopped:
            return
        now = time.monotonic()
        for watch in self.watches.values():
            if self.next_look.get(watch.name, 0.0) > now or watch.name in self.reading:
                continue   # not due, or the last read still runs (a slow server): the next look waits for it
            wall = time.time()   # a schedule's times are wall-clock; the wait until then is counted monotonic
            self.next_look[watch.name] = now + (next_look_at(watch, wall) - wall)
            self.reading.add(watch.name)
            # On a thread: a read takes up to timeout_s, and this actor answers its pings meanwhile.
            self.bridge.submit(asyncio.to_thread(read_target, watch), ("read", watch.name, watch.target))

    def on_config_changed(self, old: dict) -> None:
        self.configured = {name: w for name, w in validate_watches(self.config).items() if w.enabled}   # checked
        self.merge()
        self.log.info("watch: %d watch(es) after a reload (%s)", len(self.configured),
                      ", ".join(self.configured) or "none")

    def on_timer_stored(self, _data) -> None:
        self.after(STORED_REFRESH_S, "stored")
        allow_private = setting(self.config, "agent_watches", "allow_private_hosts")
        servers = server_specs(self.config)   # a stored watch of an MCP resource reads it from the configured server
        roots = setting(self.config, "agent_watches", "file_roots")
        self.stored = {row.name: stored_watch(row, allow_private, servers, roots)
                       for row in self.db(self.store.agent_watches.all())}
        self.merge()

    def merge(self) -> None:
        """Every watch from the configured and the stored ones; one new, changed or gone is due at once, or
        forgotten."""
        before, self.watches = self.watches, {**self.stored, **self.configured}
        for name in set(before) | set(self.watches):
            if before.get(name) != self.watches.get(name):
                self.next_look.pop(name, None)
                self.last_refusal.pop(name, None)

    def on_loop_TaskDone(self, item: TaskDone) -> None:
        _kind, name, target = item.tag
        self.reading.discard(name)
        watch = self.watches.get(name)
        if watch is None or watch.target != target or self.intake_stopped or item.cancelled:
            return   # gone, or its target changed by a reload while it was read: the next look reads the new one
        self.looks += 1
        if item.error is not None:   # a refusal, or what a hostile server made the client raise: the same to us
            self.refuse(watch, item.error if isinstance(item.error, ReadRefused) else
                        f"cannot read {watch.target}: {type(item.error).__name__}: {item.error}")
            return
        self.last_refusal.pop(watch.name, None)
        self.look(watch, self.db(self.store.watches.states()).get(name), item.result)

    def refuse(self, watch: Watch, reason) -> None:
        self.refused += 1
        if self.last_refusal.get(watch.name) != str(reason):
            self.log.warning("watch %s: %s (tried again every %gs)", watch.name, reason, watch.interval_s)
        self.last_refusal[watch.name] = str(reason)

    def look(self, watch: Watch, seen, content: bytes) -> None:
        digest = content_hash(content)
        if seen is None or seen.target != watch.target:
            self.db(self.store.watches.baseline(watch.name, watch.target, digest, content))
            self.log.info("watch %s: looking at %s (%d bytes) every %gs", watch.name, watch.target, len(content),
                          watch.interval_s)
            return
        if digest == seen.content_hash:   # nothing new: only the look's time, for `watches list`
            self.db(self.store.watches.looked(watch.name, watch.target))
            return
        item = change_item(watch, seen.changes + 1, describe_change(seen.content, content), time.time())
        claimed = self.db(self.store.watches.claim_change(seen, digest, content, item, MAX_WAITING))
        if not claimed.inserted:
            return   # the state moved since it was read: that change was claimed already
        if claimed.outcome != "injected":
            self.log.warning("watch %s: change %d not told: %s", watch.name, seen.changes + 1, claimed.reason)
            return
        self.changes += 1
        self.log.info("watch %s: change %d of %s stored as inbox #%s", watch.name, seen.changes + 1, watch.target,
                      claimed.inbox_seq)
        self.ring(claimed.session_key, claimed.inbox_seq)
