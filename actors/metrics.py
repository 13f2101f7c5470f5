"""The metrics actor: Prometheus ``/metrics`` and the ``/healthz`` / ``/readyz`` probes, on one loopback port.

    [metrics]
    enabled = true
    host = ""                # empty: the gateway's bind_host (loopback by default)
    port = 9464              # 0: the OS picks a free one; the port in use is in runtime.json and in `status`

A leaf child of the root (it runs an aiohttp server on its async bridge, so it creates no actors). Every metric and
endpoint is described in docs/metrics.md.

State: counters and histograms built from the facts other actors tell it (turns, restarts, flood waits), the last
connection state each adapter reported (with the address of the incarnation that reported it), and a snapshot of
the gauges it reads itself at scrape time: a DescribeTree walk of the root and the ledger's counts by state. The
snapshot is reused for ``CACHE_S``, so a scrape storm costs one walk per second, not one per request.

Messages it takes: RecentMinutesWanted (the console: answered RecentMinutes, the last hour minute by minute),
TurnFinished (sessions), LostSend (stream consumers, the sweeper), StalledReply (stream
consumers), HookFailed (any actor that ran a plugin's hook), ActorRestarted
(supervisors), FloodWaited, IntakeSilent and AdapterConnection (adapters), TreeReply (its walks), StopIntake (a drain began: the
gateway is no longer ready), timers walk_deadline and listen, and bridge items: scrape requests and the server's start. Messages it sends: DescribeTree
to the root.

Facts are best effort: ``report`` drops a fact when the directory names no metrics actor (disabled), one sent while
it restarts is lost, and nothing ever waits for this actor. Everything here is in memory: after a kill -9 the counters restart from zero
(Prometheus' ``rate`` and ``increase`` expect that of a counter) and adapters report their state again when the new
incarnation appears in the directory.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from supervision.bridge import TaskDone
from supervision.http_serving import HttpLimits, host_allowed, http_limits, serve
from supervision.messages import DescribeTree, TreeReply
from supervision.storage_access import StoreUser
from supervision import tree
from supervision.actor import GatewayActor
from common.runfiles import RunFiles
from common.config import setting
from actors import metric_families
from actors.messages import RecentMinutes
from actors.metric_families import CONTENT_TYPE, Histogram
from actors.console.recent_minutes import MinuteCounters
from actors.sessions.model_health import FAILING, model_problems, shard_models
from actors.watchdog import WatchdogPhase

CACHE_S = 1.0                  # a snapshot younger than this answers a scrape without a new walk
WALK_WITHIN_S = 2.0            # what the root is given to describe the tree
HEALTHY_WALK_AGE_S = 10.0      # /healthz fails once the tree has not answered a walk for this long
ANSWER_TIMEOUT_S = 5.0         # the HTTP side gives up on the actor after this long (503)
LISTEN_RETRY_S = 5.0           # a port in use is retried, never a crash: metrics must not take the gateway down
LEDGER_TIMEOUT_S = 2.0
DRAINING_PHASES = tuple(p.value for p in WatchdogPhase if p is not WatchdogPhase.WATCHING)   # as the tree shows them
LOCAL_ADAPTER_KINDS = ("CliAdapter",)   # the terminal has no platform connection to lose: up is connected


# ------------------------------------------------------------------------------- for the actors that tell facts

@dataclass(frozen=True)
class Scrape:
    """Bridge item: the HTTP side asks the actor for one answer."""
    request_id: int
    path: str                  # metrics | healthz | readyz


# ---------------------------------------------------------------------------------------------- the actor

class Metrics(StoreUser, GatewayActor):
    uses_bridge = True

    def __init__(self):
        super().__init__()
        self.turns: Counter = Counter()                  # (profile, platform, outcome) -> turns
        self.turn_seconds: dict = defaultdict(Histogram)  # (profile, platform) -> histogram
        self.internal_turns: Counter = Counter()         # (profile, platform, outcome) -> turns of scheduled runs
        self.restarts: Counter = Counter()               # child kind -> restarts
        self.flood_waits: Counter = Counter()            # platform -> flood waits
        self.intake_stalls: Counter = Counter()          # adapter -> zombie intakes restarted (liveness.py)
        self.flood_seconds: Counter = Counter()          # platform -> seconds waited
        self.lost_sends: Counter = Counter()             # (platform, outcome) -> sends whose outcome was unknown
        self.stalled_replies: Counter = Counter()        # (platform, reason) -> replies past their progress bound
        self.hook_failures: Counter = Counter()          # (plugin, hook, outcome) -> hook calls skipped
        self.connections: dict = {}                      # adapter name -> (connected, reporter's address, seq)
        self.adapter_refs: dict = {}                     # adapter name -> (pid, address) last seen in a walk
        self.snapshot: dict | None = None
        self.snapshot_at = 0.0                           # monotonic; 0: never
        self.walk_token = 0                              # the walk in flight (0: none)
        self.tokens = itertools.count(1)
        self.waiting: list[Scrape] = []
        self.server: MetricsServer | None = None
        self.port = self.listen_failures = 0
        self.registry = metric_families.registry_of(self.families)   # its own, not prometheus_client's global
        self.recent = MinuteCounters()                   # the last hour, minute by minute (the console's charts)

    # ------------------------------------------------------------------------------------------- life cycle
    def on_start(self, args) -> None:
        self.host = (setting(self.config, "metrics", "host") or self.config["gateway"]["bind_host"]).strip()
        self.wanted_port = setting(self.config, "metrics", "port")
        self.state_dir = Path(self.config["gateway"]["state_dir"])
        self.heartbeat_max_age = 3 * setting(self.config, "watchdog", "interval_s") + 5.0
        self.open_store()
        self.on_timer_listen(None)

    def on_timer_listen(self, _data) -> None:
        self.server = MetricsServer(self.host, self.wanted_port, self.bridge.post, http_limits(self.config))
        self.bridge.submit(self.server.start(), tag="listen")

    def on_stop(self) -> None:
        if self.server is not None and self.bridge is not None:
            try:
                self.db(self.server.stop(), timeout=2.0)
            except Exception:  # noqa: BLE001 - on the way out; the socket closes with the process anyway
                pass
        self.close_store()

    def on_loop_Scrape(self, item: Scrape) -> None:   # from the HTTP side
        self._scrape(item)

    def on_loop_TaskDone(self, item: TaskDone) -> None:
        if item.tag != "listen":
            return
        if item.error is not None:
            if not self.listen_failures:  # once: a port held by another program would otherwise flood the log
                self.log.error("metrics: cannot listen on %s:%s (%s); retrying every %gs", self.host,
                               self.wanted_port, item.error, LISTEN_RETRY_S)
                # Recorded too, so `start` and `status` say it (without a url: nothing serves there yet).
                RunFiles(self.state_dir).record_metrics({"host": self.host, "port": self.wanted_port,
                                                        "pid": os.getpid(), "url": None,
                                                        "error": " ".join(str(item.error).split())[:300]})
            self.listen_failures += 1
            self.server = None
            self.after(LISTEN_RETRY_S, "listen")
            return
        self.port, url = item.result, f"http://{_host_port(self.host, item.result)}/metrics"
        self.log.info("metrics: serving %s, /healthz and /readyz%s", url,
                      f" (after {self.listen_failures} failed attempts)" if self.listen_failures else "")
        RunFiles(self.state_dir).record_metrics({"host": self.host, "port": self.port, "pid": os.getpid(),
                                                "url": url})

    # -------------------------------------------------------------------------------------------- the facts
    def on_TurnFinished(self, fact, sender) -> None:
        if getattr(fact, "internal", False):   # the gateway's own event (a scheduled run): not user traffic
            self.internal_turns[(fact.profile, fact.platform, fact.outcome)] += 1
            return
        self.turns[(fact.profile, fact.platform, fact.outcome)] += 1
        self.turn_seconds[(fact.profile, fact.platform)].observe(fact.seconds)
        self.recent.turn(time.time(), fact.seconds, fact.outcome == "failed")

    def on_ActorRestarted(self, fact, sender) -> None:
        self.restarts[fact.kind] += 1
        self.recent.restart(time.time())

    def on_RecentMinutesWanted(self, message, sender) -> None:
        turns = Counter()
        for (_profile, platform, _outcome), n in self.turns.items():
            turns[platform] += n
        platforms = sorted(set(turns) | set(self.flood_waits))
        self.send(sender, RecentMinutes(self.recent.rows(), tuple(
            (p, turns[p], self.flood_waits[p], round(self.flood_seconds[p], 3)) for p in platforms)))

    def on_FloodWaited(self, fact, sender) -> None:
        self.flood_waits[fact.platform] += 1
        self.flood_seconds[fact.platform] += fact.seconds

    def on_IntakeSilent(self, fact, sender) -> None:
        self.intake_stalls[fact.adapter] += 1

    def on_LostSend(self, fact, sender) -> None:
        self.lost_sends[(fact.platform, fact.outcome)] += 1

    def on_StalledReply(self, fact, sender) -> None:
        self.stalled_replies[(fact.platform, fact.reason)] += 1

    def on_HookFailed(self, fact, sender) -> None:
        self.hook_failures[(fact.plugin, fact.hook, fact.outcome)] += 1

    def on_AdapterConnection(self, fact, sender) -> None:
        # Kept with the reporter's address: a report from an incarnation that has since died says nothing. Of one
        # reporter's reports only the newest counts: two of them can arrive in either order.
        held = self.connections.get(fact.adapter)
        if held is not None and held[1] == sender and fact.seq <= held[2]:
            return
        self.connections[fact.adapter] = (fact.connected, sender, fact.seq)

    # ------------------------------------------------------------------------------------- scrapes and walks
    def _scrape(self, request: Scrape) -> None:
        if self.snapshot is not None and time.monotonic() - self.snapshot_at < CACHE_S:
            self._answer(request)
            return
        self.waiting.append(request)
        if not self.walk_token:
            self.walk_token = next(self.tokens)
            self.send(self.parent, DescribeTree(self.walk_token, WALK_WITHIN_S))
            self.after(WALK_WITHIN_S + 0.5, "walk_deadline", self.walk_token)

    def on_TreeReply(self, message: TreeReply, sender) -> None:
        if message.token != self.walk_token:
            return
        self.walk_token = 0
        self.snapshot, self.snapshot_at = self._read_gauges(message.node), time.monotonic()
        self._answer_waiting()

    def on_timer_walk_deadline(self, token) -> None:
        if token == self.walk_token:  # the root did not answer: serve what we have; /healthz will say so
            self.walk_token = 0
            self._answer_waiting()

    def _answer_waiting(self) -> None:
        for request in self.waiting:
            self._answer(request)
        self.waiting = []

    def _read_gauges(self, root) -> dict:
        deliveries = self.snapshot["deliveries"] if self.snapshot else {}
        recovery = self.snapshot.get("recovery", {}) if self.snapshot else {}
        try:
            deliveries = self.db(self.store.ledger.counts(), timeout=LEDGER_TIMEOUT_S)
            recovery = self.db(self.store.sessions.recovery_totals(), timeout=LEDGER_TIMEOUT_S)
            recovery["late"] = len(self.db(self.store.inbox.late(setting(self.config, "sessions", "answer_bound_s")),
                                           timeout=LEDGER_TIMEOUT_S))
        except Exception as exc:  # noqa: BLE001 - a busy database costs one stale gauge, not the scrape
            self.log.warning("metrics: ledger counts unavailable: %s", exc)
        every = [(node, parent) for node, parent, _ in tree.walk(root)]
        nodes = [(node, parent) for node, parent in every if node.kind != "Host"]   # hosts: listed, not actors
        hosts = {(n.name, dict(n.facts).get("role", "")): n.state == "running" for n, _ in every if n.kind == "Host"}
        adapters = {node.name: self._connected(node) for node, parent in nodes
                    if parent is not None and parent.kind == "AdapterSupervisor"}
        watchdog = tree.find_kind(root, "Watchdog")
        return {"actors": Counter((node.kind, node.state) for node, _ in nodes),
                "sessions_live": len(tree.find_kind(root, "Session")),
                "sessions_up": any(n.name == "sessions" and n.state in tree.UP_STATES for n, _ in nodes),
                "watchdog_phase": watchdog[0].state if watchdog else "absent",
                "adapters": adapters, "deliveries": deliveries, "recovery": recovery, "hosts": hosts,
                "models": shard_models(root)}

    def _connected(self, node) -> bool:
        if node.state not in tree.UP_STATES:
            return False
        if node.kind in LOCAL_ADAPTER_KINDS:
            return True
        if node.ref is not None:
            self.adapter_refs[node.name] = (node.pid, node.ref)
        pid, ref = self.adapter_refs.get(node.name, (0, None))  # a node from an earlier answer carries no ref
        connected, reporter, _seq = self.connections.get(node.name, (False, None, 0))
        return connected and ref is not None and pid == node.pid and reporter == ref

    # ------------------------------------------------------------------------------------------- the answers
    def _answer(self, request: Scrape) -> None:
        if request.path == "metrics":
            status, body = 200, self.exposition()
        else:
            problems = self.health_problems() if request.path == "healthz" else self.readiness_problems()
            status, body = (503, "; ".join(problems) + "\n") if problems else (200, "ok\n")
        if self.server is not None:
            self.bridge.call(self.server.answer, request.request_id, status, body)

    def draining(self) -> bool:
        phase = self.snapshot["watchdog_phase"] if self.snapshot else ""
        return self.intake_stopped or phase in DRAINING_PHASES

    def health_problems(self) -> list[str]:
        problems = []
        if not self.snapshot_at:
            problems.append("the actor tree has not answered a walk yet")
        elif (age := time.monotonic() - self.snapshot_at) > HEALTHY_WALK_AGE_S:
            problems.append(f"the actor tree has not answered a walk for {age:.0f}s")
        age = _heartbeat_age(self.state_dir / "run" / "heartbeat.json")
        if age is None:
            problems.append("no watchdog heartbeat yet")
        elif age > self.heartbeat_max_age:
            problems.append(f"the watchdog heartbeat is {age:.0f}s old")
        return problems

    def readiness_problems(self) -> list[str]:
        if self.snapshot is None:
            return ["the actor tree has not answered a walk yet"]
        problems = ["draining"] if self.draining() else []
        if not self.snapshot["sessions_up"]:
            problems.append("the session supervisor is not running")
        problems += [f"adapter {name} is not connected" for name, up in sorted(self.snapshot["adapters"].items())
                     if not up]
        problems += model_problems(self.snapshot.get("models") or [])   # as `health --ready` says (health.py)
        return problems

    def exposition(self) -> str:
        """Every metric in the Prometheus text format 0.0.4 (names and meanings: docs/metrics.md)."""
        return metric_families.exposition(self.registry)

    def families(self) -> list:
        """The metric families of this moment; the actor's registry collects them at each scrape."""
        snap = self.snapshot or {"actors": {}, "sessions_live": 0, "adapters": {}, "deliveries": {}}
        recovery = snap.get("recovery") or {}
        gauge, counter = metric_families.gauge, metric_families.counter
        return [
            gauge("gateway_up", "1 while the gateway is healthy (what /healthz checks), else 0",
                  [({}, 0 if self.health_problems() else 1)]),
            gauge("gateway_draining", "1 from the moment a drain or shutdown begins", [({}, int(self.draining()))]),
            counter("gateway_turns_total", "Turns finished, by profile, platform and outcome",
                    [({"profile": p, "platform": pl, "outcome": o}, n)
                     for (p, pl, o), n in sorted(self.turns.items())]),
            metric_families.histogram("gateway_turn_seconds", "Seconds from an inbound message's arrival to the end "
                                      "of its turn", ("profile", "platform"), self.turn_seconds),
            counter("gateway_internal_turns_total", "Turns answering the gateway's own events (scheduled runs), by "
                    "profile, platform and outcome; never counted among gateway_turns_total",
                    [({"profile": p, "platform": pl, "outcome": o}, n)
                     for (p, pl, o), n in sorted(self.internal_turns.items())]),
            gauge("gateway_deliveries", "Reply obligations in the delivery ledger, by state",
                  [({"state": s}, n) for s, n in sorted(snap["deliveries"].items())]),
            counter("gateway_turn_resumes_total", "Turns resumed after the gateway was restarted mid-turn (from the "
                    "sessions' records: lower after sessions are deleted)", [({}, recovery.get("resumes", 0))]),
            gauge("gateway_inbox_late", "Stored messages no turn has taken within [sessions] answer_bound_s, their "
                  "session running no turn (the sweeper rings them again)", [({}, recovery.get("late", 0))]),
            counter("gateway_resume_notices_total", "Messages given up on after their turn was cut too often, or too "
                    "long ago (the user was told to send them again)", [({}, recovery.get("notices", 0))]),
            counter("gateway_actor_restarts_total", "Child restarts by a supervisor, by child kind",
                    [({"kind": k}, n) for k, n in sorted(self.restarts.items())]),
            gauge("gateway_sessions_live", "Session actors alive (not passivated)", [({}, snap["sessions_live"])]),
            gauge("gateway_actors", "Actors in the tree, by kind and state",
                  [({"kind": k, "state": s}, n) for (k, s), n in sorted(snap["actors"].items())]),
            gauge("gateway_host_up", "1 while a host of the convention checks in, 0 once it is lost (a leader's "
                  "[cluster]; docs/distribution.md)",
                  [({"host": h, "role": r}, int(up)) for (h, r), up in sorted(snap.get("hosts", {}).items())]),
            gauge("gateway_adapter_connected", "1 while the adapter's platform connection is up",
                  [({"adapter": a}, int(up)) for a, up in sorted(snap["adapters"].items())]),
            gauge("gateway_model_up", "1 while the model service answers (its last turn did not fail because of it), "
                  "by model endpoint; listed from a turn's first request to it on",
                  [({"model": row["name"]}, int(row["state"] != FAILING)) for row in snap.get("models") or ()]),
            counter("gateway_intake_stalls_total", "Intakes connected but silent past their bound, restarted (a "
                    "zombie connection), by adapter",
                    [({"adapter": a}, n) for a, n in sorted(self.intake_stalls.items())]),
            counter("gateway_flood_waits_total", "Rate-limit answers (429) waited out, by platform",
                    [({"platform": p}, n) for p, n in sorted(self.flood_waits.items())]),
            counter("gateway_flood_wait_seconds_total", "Seconds chats were held by rate limits",
                    [({"platform": p}, round(s, 6)) for p, s in sorted(self.flood_seconds.items())]),
            counter("gateway_lost_sends_total", "Sends whose outcome was unknown, by platform and how they ended "
                    "(found, never_landed, marked, unanswered)",
                    [({"platform": p, "outcome": o}, n) for (p, o), n in sorted(self.lost_sends.items())]),
            counter("gateway_stalled_replies_total", "Replies that made no progress past their bound, by platform "
                    "and why (no_adapter)",
                    [({"platform": p, "reason": r}, n) for (p, r), n in sorted(self.stalled_replies.items())]),
            counter("gateway_hook_failures_total", "Plugin hook calls skipped, by plugin, hook and outcome (timeout, "
                    "error, busy, bad_answer; hook load: the plugin could not be loaded)",
                    [({"plugin": p, "hook": h, "outcome": o}, n) for (p, h, o), n in sorted(self.hook_failures.items())]),
        ]


# ------------------------------------------------------------------------------------------- pure helpers

def _heartbeat_age(path: Path) -> float | None:
    try:
        return max(0.0, time.time() - float(json.loads(path.read_text())["time"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# -------------------------------------------------------------------------------- the HTTP side (bridge loop)

class MetricsServer:
    """aiohttp on the actor's bridge loop. Each request is handed to the actor thread (``ask``) and waits for its
    answer; the actor alone owns the numbers, so nothing here is shared between threads but the two queues."""

    PATHS = {"/metrics": "metrics", "/healthz": "healthz", "/readyz": "readyz"}

    def __init__(self, host: str, port: int, ask, limits: HttpLimits):
        self.host, self.port, self.ask, self.limits = host, port, ask, limits
        self.pending: dict[int, asyncio.Future] = {}
        self.ids = itertools.count(1)
        self.runner: web.AppRunner | None = None

    async def start(self) -> int:
        app = web.Application()
        app.router.add_get("/{path:.*}", self.handle)
        self.runner, port = await serve(app, self.host, self.port, limits=self.limits, shutdown_timeout=0.5)
        return port

    async def stop(self) -> None:
        runner, self.runner = self.runner, None
        if runner is not None:
            await runner.cleanup()

    async def handle(self, request: web.Request) -> web.Response:
        path = self.PATHS.get(request.path)
        if not host_allowed(request.headers.get("Host", "")):   # as the web chat: no DNS-rebinding page reads this
            return web.Response(status=421, text="scrape by IP address or localhost\n")
        if path is None:
            return web.Response(status=404, text="not found: try /metrics, /healthz or /readyz\n")
        request_id = next(self.ids)
        future = self.pending[request_id] = asyncio.get_running_loop().create_future()
        self.ask(Scrape(request_id, path))
        try:
            status, body = await asyncio.wait_for(future, ANSWER_TIMEOUT_S)
        except asyncio.TimeoutError:
            status, body = 503, "the metrics actor did not answer in time\n"
        finally:
            self.pending.pop(request_id, None)
        return web.Response(status=status, body=body.encode(), headers={"Content-Type": CONTENT_TYPE}
                            if path == "metrics" else {"Content-Type": "text/plain; charset=utf-8"})

    def answer(self, request_id: int, status: int, body: str) -> None:
        future = self.pending.get(request_id)
        if future is not None and not future.done():
            future.set_result((status, body))
