"""The root of the actor tree, and the tree itself as data (``root_children``).

The root is a one_for_one supervisor started by the launcher; its parent is the launcher's external address, so a
``SupervisorGaveUp`` from the root reaches the launcher, which exits non-zero for the service manager to act.

Besides supervising, the root is the front door for operators: it answers StatusRequest (from a fresh walk of the
tree) and passes DrainRequest and ShutdownRequest to the watchdog, which owns both.

Messages it takes (beyond the supervisor's): StatusRequest, DrainRequest, ShutdownRequest, DrainReport and
ShutdownReady (from the watchdog), AddressesChanged (where the adapters and the session shards are: the Directory
it publishes whenever one of its well-known actors moves), ReloadRequest (`reload`, SIGHUP: the file is read and
checked here, actors/config_reload.py; what it may change goes down the tree as ConfigChanged, and a child the new
configuration adds, the cron actor, is started). Messages it sends: GatewayStatus, DrainReport, DrainDone (to the
launcher), ShutdownReady, ReloadReport, ConfigChanged.

State (beyond the supervisor's): the directory it publishes, the requesters of a drain or shutdown, and whether the
gateway is stopping (``Stopping``): none -> DRAINING | SHUTTING_DOWN once one is asked, for the rest of this life
(a reload is refused from then on; the watchdog owns the drain's own phases).

A reload lives in the processes' memory only: after a kill -9 or a restart the gateway reads the file again, which
is the same file a reload read.
"""
from __future__ import annotations

import enum
import importlib

from actors.messages import (DrainDone, DrainReport, DrainRequest, GatewayStatus, ReloadReport, ReloadRequest,
                             ShutdownReady, ShutdownRequest, StatusRequest)
from actors.config_reload import reload_from_file
from actors.adapters import registry
from actors.adapters.connection import adapter_rows
from actors.sessions.model_health import shard_models
from supervision.messages import AddressesChanged, Directory, DirectoryWanted
from supervision import tree
from supervision.spec import ChildSpec, Restart, flags_from_config
from supervision.supervisor import Supervisor
from common.config import ConfigError, setting
from common.host_map import SWEEPER_PREFIX
from common.shard_map import SHARD_PREFIX
from actors.scheduling.watches import agent_watches_offered
from actors.sessions.shard import CONSUMER_ACTOR, SESSION_ACTOR
from actors.sessions.supervisor import SHARD_ACTOR


def root_children(config: dict) -> list[ChildSpec]:
    """The tree below the root. Order matters for shutdown (reverse) and start (forward): the metrics actor starts
    early and stops late, so it sees the whole life and /readyz answers 503 all through a drain."""
    metrics = [ChildSpec("metrics", "actors.metrics.Metrics", shutdown_timeout_s=2.0)] \
        if setting(config, "metrics", "enabled") else []
    # The operator's console (actors/console/): a leaf that serves pages and asks the root what the CLI asks.
    console = [ChildSpec("console", "actors.console.actor.Console", shutdown_timeout_s=2.0)] \
        if setting(config, "console", "enabled") else []
    # Last: it starts once the tree it hands runs to is up, and stops first, so no run is claimed during a shutdown.
    cron = [ChildSpec("cron", "actors.cron.Cron")] if config.get("cron") else []
    watcher = [ChildSpec("watcher", "actors.watcher.Watcher")] \
        if config.get("watch") or agent_watches_offered(config) else []
    # The convention's hosts, on a leader (docs/distribution.md).
    hosts = [ChildSpec("hosts", "actors.hosts.ConventionHosts", kind="ConventionHosts")] \
        if setting(config, "cluster", "enabled") else []
    return [
        ChildSpec("watchdog", "actors.watchdog.Watchdog", shutdown_timeout_s=2.0),
        *metrics,
        ChildSpec("sweeper", "actors.sweeper.DeliverySweeper", kind="DeliverySweeper"),
        ChildSpec("ticker", "actors.ticker.Ticker"),
        ChildSpec("sessions", "actors.sessions.supervisor.SessionSupervisor", restart=Restart.PERMANENT,
                  shutdown_timeout_s=10.0),
        ChildSpec("adapters", "actors.adapters.supervisor.AdapterSupervisor", shutdown_timeout_s=10.0),
        *hosts,
        *console,
        *cron,
        *watcher,
    ]


HOST_LIST = ("ConventionHosts",)


def host_rows(hosts, shards) -> list[dict]:
    """Each host of the convention with the shards it runs (their ``host`` fact) and their live sessions."""
    rows = []
    for n in hosts:
        mine = [dict(s.facts) for s in shards if dict(s.facts).get("host") == n.name]
        rows.append({"name": n.name, "state": n.state, "address": n.address, "since": n.started_at, **dict(n.facts),
                     "shards": len(mine), "sessions": sum(f.get("sessions", 0) for f in mine)})
    return rows


def preload_actor_modules(config: dict) -> None:
    """Import every actor module once, in the launcher: every actor process is forked from it (through the admin
    and the supervisors), so a child starts with its module already loaded instead of importing storage, aiohttp
    and the agents after the fork. That import is most of a restart's latency, and of every consumer's start."""

    paths = [spec.actor for spec in root_children(config)] + [SHARD_ACTOR, SESSION_ACTOR, CONSUMER_ACTOR]
    paths += [registry.entry_of(args).actor for args in registry.validate_all(config).values()]
    for path in paths:
        importlib.import_module(path.rsplit(".", 1)[0])


class Stopping(enum.StrEnum):   # str-valued: the value is what a refused reload says, unchanged
    DRAINING = "draining"
    SHUTTING_DOWN = "shutting down"


class Root(Supervisor):
    def __init__(self):
        super().__init__()
        self.requesters: dict[str, list] = {"drain": [], "shutdown": []}
        self.announced: dict[str, AddressesChanged] = {}   # per group, the newest announcement taken (they may cross)
        self.directory_version = 0
        self.stopping: Stopping | None = None   # once asked: a reload is refused from then on

    # The directory: addresses of the well-known actors, broadcast down the tree whenever one of them changes.
    def on_ChildReady(self, message, sender) -> None:
        super().on_ChildReady(message, sender)
        if message.name in ("sessions", "sweeper", "metrics"):
            self._publish_directory()

    def on_AddressesChanged(self, message: AddressesChanged, sender) -> None:
        # An older announcement overtaken by a newer one would publish a directory missing the adapters that came
        # up in between, and every reply to them would wait for an address that never comes.
        if not message.is_newer_than(self.announced.get(message.group)):
            self.log.info("root: an announcement of the %s arrived after a newer one; kept the newer", message.group)
            return
        self.announced[message.group] = message
        self._publish_directory()

    def _addresses(self, group: str) -> tuple:
        told = self.announced.get(group)
        return told.addresses if told is not None else ()

    def _named(self, group: str, prefix: str) -> tuple:
        # The session supervisor announces its shards and the sweepers of worker hosts together.
        return tuple(pair for pair in self._addresses(group) if pair[0].startswith(prefix))

    def _publish_directory(self) -> None:
        self.directory_version += 1
        # The address each child's own messages come from, once known: the one createActor returned is a stand-in
        # that only this actor can use until Thespian resolves it, and the directory goes to every actor.
        addr = {name: c.seen_as if c.seen_as is not None else c.address for name, c in self.children.items()}
        adapters = tuple((name, a) for name, a in self._addresses("adapters") if a is not None)
        self.directory = Directory(self.directory_version, sessions=addr.get("sessions"), sweeper=addr.get("sweeper"),
                                   adapters=adapters, metrics=addr.get("metrics"),
                                   shards=self._named("shards", SHARD_PREFIX),
                                   sweepers=self._named("shards", SWEEPER_PREFIX))
        self.on_directory(self.directory)

    def on_DirectoryWanted(self, message: DirectoryWanted, sender) -> None:
        """Someone below waited too long for an address: the directory goes to that child again, which forwards
        it down its subtree (a Directory lost on its way is replaced; one still lacking the address says that the
        actor is not running, which the asker then reports)."""
        self.log.info("root: the directory was asked for again (%s)", message.why)
        if self.directory is not None:
            self.send(sender, self.directory)

    def child_specs(self, args):
        return root_children(self.config)

    def flags(self, args):
        return flags_from_config(self.config)

    def on_StatusRequest(self, message: StatusRequest, sender) -> None:
        self.describe_subtree(lambda node: self.send(sender, self._status(node)))

    def _status(self, node) -> GatewayStatus:
        c = tree.counts(node, without_children_of=HOST_LIST)   # hosts are listed, not actors of this tree
        fixed = tree.counts(node, without_children_of=("SessionSupervisor", *HOST_LIST))
        sweeper = tree.find_kind(node, "DeliverySweeper")
        watchdog = tree.find_kind(node, "Watchdog")
        return GatewayStatus(started_at=self.started_at, actors_up=c["up"], actors_restarting=c["restarting"],
                             actors_failed=c["failed"], sessions_live=len(tree.find_kind(node, "Session")),
                             obligations_pending=sum(n.pending for n in sweeper),
                             draining=any(n.state == "draining" for n in watchdog),
                             detail={"actors": c["actors"], "pending_work": c["pending"],
                                     "fixed_tree_restarting": fixed["restarting"] + fixed["failed"],
                                     "recovery": {k: v for n in sweeper for k, v in n.facts},
                                     "adapters": adapter_rows(node, self._adapter_kinds()),
                                     "shards": [{"name": n.name, "state": n.state, "pid": n.pid,
                                                 **{k: v for k, v in n.facts if k != "models"}}
                                                for n in tree.find_kind(node, "SessionShard")],
                                     "models": shard_models(node),
                                     **({"cron": dict(crons[-1].facts)} if (crons := tree.find_kind(node, "Cron"))
                                        else {}),
                                     **({"watch": dict(found[-1].facts)} if (found := tree.find_kind(node, "Watcher"))
                                        else {}),
                                     **({"hosts": host_rows(hosts, tree.find_kind(node, "SessionShard"))}
                                        if (hosts := tree.find_kind(node, "Host"))
                                        else {}),
                                     "config": self._config_facts()})

    def _config_facts(self) -> dict:
        """Which reading of the configuration runs: `status` shows it, so an operator sees a reload land."""
        return {"file": self.config.get("_source", ""), "generation": self.config.get("_generation", 1),
                "sha256": self.config.get("_sha256", ""), "loaded_at": self.config.get("_loaded_at", 0.0)}

    def _adapter_kinds(self) -> dict[str, str]:
        """Each configured adapter's kind: status shows one missing from the tree (its supervisor just restarted)."""
        return {name: registry.entry_of(table).kind for name, table in registry.validate_all(self.config).items()}

    def _watchdog(self):
        child = self.children.get("watchdog")
        return child.address if child is not None else None

    def on_DrainRequest(self, message: DrainRequest, sender) -> None:
        self._forward("drain", message, sender)

    def on_ShutdownRequest(self, message: ShutdownRequest, sender) -> None:
        self._forward("shutdown", message, sender)

    def _forward(self, what: str, message, sender) -> None:
        watchdog = self._watchdog()
        if watchdog is None:
            reply = (DrainReport(False, 0.0, -1, "the watchdog is restarting; try again") if what == "drain"
                     else ShutdownReady(0, "the watchdog is restarting"))
            self.send(sender, reply)
            return
        self.requesters[what].append(sender)
        self.stopping = Stopping.DRAINING if what == "drain" else Stopping.SHUTTING_DOWN
        self.send(watchdog, message)

    # Reload: the file again, checked whole; the live parts down the tree (actors/config_reload.py).
    def on_ReloadRequest(self, message: ReloadRequest, sender) -> None:
        self.send(sender, self._reload(message))

    def _reload(self, message: ReloadRequest) -> ReloadReport:
        generation, source = self.config.get("_generation", 1), self.config.get("_source", "")
        if self.stopping is not None:
            self.log.warning("reload (%s) refused: the gateway is %s", message.via, self.stopping)
            return ReloadReport(False, generation, error=f"the gateway is {self.stopping}; a reload would not "
                                                         "outlive it (the next start reads the file)")
        if message.path and source and message.path != source:
            error = (f"the gateway runs on {source}; a reload reads that file again (asked for {message.path}): "
                     "use --config with the gateway's own file")
            self.log.warning("reload (%s) refused: %s", message.via, error)
            return ReloadReport(False, generation, error=error)
        try:
            planned = reload_from_file(self.config)
        except ConfigError as exc:
            self.log.error("reload (%s) refused, the running configuration is kept: %s: %s: %s", message.via,
                           exc.file, exc.key, exc.reason)
            return ReloadReport(False, generation, error=f"{exc.file}: {exc.key}: {exc.reason}", file=exc.file,
                                key=exc.key, config_error=True)
        old, self.config = self.config, planned.config
        self.on_config_changed(old)   # to every child, which pass it down (supervision/supervisor.py)
        for spec in root_children(self.config):
            if spec.name not in self.children:   # [cron.NAME] jobs where there were none: the scheduler starts
                self.start_child(spec)
        report = ReloadReport(True, self.config["_generation"], self.config.get("_sha256", ""),
                              self.config.get("_loaded_at", 0.0), planned.changed, planned.needs_restart)
        self.log.info("reload (%s) of %s: %s", message.via, source, report)
        return report

    def on_DrainReport(self, message: DrainReport, sender) -> None:
        for requester in self.requesters["drain"]:
            self.send(requester, message)
        self.requesters["drain"] = []
        if self.parent is not None:  # work left after the timeout stays durable for the next instance (G9)
            self.send(self.parent, DrainDone(message))

    def on_ShutdownReady(self, message: ShutdownReady, sender) -> None:
        for requester in self.requesters["shutdown"]:
            self.send(requester, message)
        self.requesters["shutdown"] = []
