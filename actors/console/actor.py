"""The console actor: the operator's console in the browser (docs/console.md), a leaf child of the root.

    [console]
    enabled = true
    host = "127.0.0.1"       # off loopback only with a login_token
    port = 8770              # 0: the OS picks one (the log and <state>/run/console.json say which)
    login_token = ""
    allow_actions = false    # read-only unless true

One implementation, two faces: what the console shows and does is what the admin CLI asks, through the same
messages and functions. The tree and the status are the root's answers to ``DescribeTree`` and ``StatusRequest``
(what `tree` and `status` send through daemon/admin.py); sessions, deliveries and pairing are the CLI's own
storage functions (operations.py, storage/cli.py), on this actor's connection to the store. Every action is logged
with who did it (access.who), and a pairing approved here is recorded as granted by that.

State: the HTTP server (server.py, on the bridge loop), the reads waiting for the root's answer (by token), how
many browsers follow each live topic, and the store, opened on the first read that needs it (an idle console
holds no database connection). Timers: ``listen`` (retry a port in use), ``follow_tree`` and ``follow_status``
(a new snapshot for the open pages, armed only while a page follows: no browser, no work).

Messages it takes: TreeReply and GatewayStatus (the root's answers), RecentMinutes (the metrics actor's last hour,
minute by minute), CronRunReport (the cron actor's answer to "run now"), AdapterCommandDone (an adapter's answer to
a pause, resume or reconnect), SessionCommandDone (a shard's or session's answer to a stop or reset), timers, and
bridge items (ConsoleAsk, StreamsOpen, the server's start). Messages it sends: DescribeTree and StatusRequest to the
root,
RecentMinutesWanted to the metrics actor, CronRunRequest to the cron actor (what `cron run NAME` sends),
AdapterCommand to an adapter (what `adapters pause|resume|reconnect NAME` sends),
SessionCommand to the shard hosting a session (what `sessions stop|reset ID` sends).

Nothing here must survive a kill -9: everything shown is read again from the tree and the store, and an action is
one storage transaction (committed or not; the page says which from the answer, or the next read shows it).
"""
from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path

from actors.console import log_lines, operations
from actors.console.memory import gateway_memory
from actors.console.server import ConsoleAsk, ConsoleServer, StreamsOpen
from actors.console.views import tree_view, status_view
from actors.adapters.connection import adapter_node
from actors.messages import (ADAPTER_COMMANDS, AdapterCommand, AdapterCommandDone, CronRunReport, CronRunRequest,
                             GatewayStatus, RecentMinutes, RecentMinutesWanted, SessionCommand, SessionCommandDone,
                             StatusRequest)
from actors.sessions.operator_commands import owner_shard
from actors.console.recent_minutes import series, totals
from actors.scheduling.jobs import validate_jobs
from supervision.bridge import TaskDone
from supervision.http_serving import http_limits
from supervision.messages import DescribeTree, TreeReply
from supervision import tree
from supervision.storage_access import StoreUser, store_path
from supervision.actor import GatewayActor
from storage import IllegalTransition, NotFound, StorageError
from common.config import setting
from common.runfiles import RunFiles
from common.logging_setup import key_hash
from common.redact import configured_secrets
from storage import cli as storage_cli

WALK_WITHIN_S = 2.0
FOLLOW_TREE_S = 0.5        # a restart shows on an open tree page within this and a walk
FOLLOW_STATUS_S = 2.0
LISTEN_RETRY_S = 5.0
CRON_ANSWER_S = 8.0        # within the page's own wait (server.ANSWER_TIMEOUT_S)
LOG_TAIL_BYTES = 64 * 1024
LOG_TAIL_LINES = 300


class Console(StoreUser, GatewayActor):
    uses_bridge = True

    def __init__(self):
        super().__init__()
        self.server: ConsoleServer | None = None
        self.port = self.listen_failures = 0
        self.tokens = itertools.count(1)
        self.tree_asks: dict[int, list] = {}      # walk token -> requests waiting for it (None: the follow tick)
        self.status_asks: list = []               # requests waiting for the root's GatewayStatus
        self.status_in_flight = 0                 # the token of the status request in flight (0: none)
        self.following: dict[str, int] = {}       # topic -> open pages following it
        self.ticking: set[str] = set()            # topics whose follow timer is armed
        self.recent_rows: tuple = ()              # the metrics actor's last hour, as last answered
        self.platforms: tuple = ()                # and its per-platform turns and rate-limit waits
        self.cron_ref = None                      # the cron actor's address, from the newest walk
        self.cron_runs: dict[str, list] = {}      # job -> "run now" asks waiting (for a walk, then for cron)
        self.cron_sent: dict[str, int] = {}       # job -> token of its CronRunRequest out (its deadline's)
        self.commands_waiting: list = []          # operator commands waiting for a walk to find their target
        self.commands_sent: dict[tuple, tuple] = {}   # (kind, target) -> (ask, token) of its command out

    # ------------------------------------------------------------------------------------------- life cycle
    def on_start(self, args) -> None:
        self.host = setting(self.config, "console", "host")
        self.wanted_port = setting(self.config, "console", "port")
        self.state_dir = Path(self.config["gateway"]["state_dir"])
        self.secrets = tuple(configured_secrets(self.config))
        self.on_timer_listen(None)

    def on_timer_listen(self, _data) -> None:
        self.server = ConsoleServer(self.host, self.wanted_port, self.bridge.post, http_limits(self.config),
                                    login_token=setting(self.config, "console", "login_token"),
                                    allow_actions=setting(self.config, "console", "allow_actions"),
                                    log_line=lambda level, text: self.bridge.post(("log", level, text)),
                                    media_root=str(store_path(self.config).parent / "media"),
                                    log_path=str(self._log_path()))
        self.bridge.submit(self.server.start(), tag="listen")

    def on_stop(self) -> None:
        if self.server is not None and self.bridge is not None:
            try:
                self.db(self.server.stop(), timeout=2.0)
            except Exception:  # noqa: BLE001 - on the way out; the socket closes with the process anyway
                pass
        self.close_store()

    # ------------------------------------------------------------------- items back from the loop (actor thread)
    def on_loop_ConsoleAsk(self, item: ConsoleAsk) -> None:
        try:
            self._take(item)
        except Exception as exc:  # noqa: BLE001 - a request must not crash the actor: a page reloaded in a
            # loop would exhaust the root's restart intensity and take the gateway down with the console
            self.log.exception("console: %s failed", item.op)
            self._answer(item, 500, {"error": f"the console could not answer: {type(exc).__name__}: {exc}"})

    def on_loop_StreamsOpen(self, item: StreamsOpen) -> None:
        self._follow(dict(item.counts))

    def on_loop_TaskDone(self, item: TaskDone) -> None:
        if item.tag == "listen":
            self._listening(item)

    def on_bridge(self, item) -> None:
        """The server's log lines, ``("log", level, text)``: the one loop item without a type of its own."""
        if isinstance(item, tuple) and item and item[0] == "log":
            self.log.log(item[1], "%s", item[2])

    def _listening(self, item: TaskDone) -> None:
        if item.error is not None:
            if not self.listen_failures:   # once: a port held by another program would otherwise flood the log
                self.log.warning("console: cannot listen on %s:%s (%s); retrying every %gs", self.host,
                                 self.wanted_port, item.error, LISTEN_RETRY_S)
            self.listen_failures += 1
            self.server = None
            self.after(LISTEN_RETRY_S, "listen")
            return
        self.port = item.result
        host = f"[{self.host}]" if ":" in self.host else self.host
        url = f"http://{host}:{self.port}/"
        self.log.info("console: serving %s (port %d; %s)", url, self.port,
                      "actions allowed" if self.server.allow_actions else "read-only")
        # Where it listens, for scripts: written whole or not at all (a kill -9 mid-write leaves the old file).
        path = RunFiles(self.state_dir).run_dir / "console.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps({"url": url, "port": self.port, "pid": os.getpid()}) + "\n")
        os.replace(temporary, path)

    # ------------------------------------------------------------------------------------------- the asks
    def _take(self, ask: ConsoleAsk) -> None:
        args = dict(ask.args)
        if ask.op == "tree":
            self._walk(ask)
        elif ask.op in ("status", "adapters"):
            self._ask_status(ask)
        elif ask.op == "logs":
            self._answer(ask, 200, self._log_tail(args))
        elif ask.op == "cron":
            self._on_store(ask, lambda: operations.cron(self._store(), validate_jobs(self.config), time.time()))
        elif ask.op == "action:cron.run":
            self._run_cron(ask, (args.get("job") or "").strip())
        elif ask.op.startswith("action:adapters.") and ask.op[16:] in ADAPTER_COMMANDS:
            self._command_adapter(ask, (args.get("adapter") or "").strip(), ask.op[16:])
        elif ask.op in ("action:sessions.stop", "action:sessions.reset"):
            self._command_session(ask, args.get("session") or "", ask.op[16:])
        elif ask.op in operations.READS:
            self._on_store(ask, lambda: operations.READS[ask.op](self._store(), args, self.secrets))
        elif ask.op.startswith("action:") and ask.op[7:] in operations.ACTIONS:
            action = ask.op[7:]
            self.log.info("console: %s by %s", operations.described(action, args), ask.who)
            self._on_store(ask, lambda: operations.ACTIONS[action](self._store(), args, ask.who), action)
        else:
            self._answer(ask, 404, {"error": f"no such operation {ask.op!r}"})

    def _on_store(self, ask: ConsoleAsk, call, action: str = "") -> None:
        try:
            result = self.db(call())
        except (operations.BadRequest, StorageError) as exc:
            self._refuse(ask, exc)
        else:
            if action:
                self.log.info("console: %s done", action)
            self._answer(ask, 200, result)

    def _refuse(self, ask: ConsoleAsk, exc: Exception) -> None:
        """A bad request or the store's refusal, answered with its status (400, 404, 409; 503: unavailable)."""
        status = (400 if isinstance(exc, operations.BadRequest) else 404 if isinstance(exc, NotFound) else
                  409 if isinstance(exc, IllegalTransition) else 503)
        self._answer(ask, status, {"error": str(exc) if status != 503 else f"the store could not answer: {exc}"})

    def _store(self):
        if self.store is None:
            self.open_store()
        return self.store

    def _answer(self, ask, status: int, payload) -> None:
        if ask is not None and self.server is not None:
            self.bridge.call(self.server.answer, ask.request_id, status, payload)

    def _log_path(self) -> Path:
        return Path(setting(self.config, "gateway", "log_file") or self.state_dir / "gateway.log")

    def _log_tail(self, args: dict) -> dict:
        """The newest lines of the gateway's log file (what `logs` prints), filtered by level (and above), actor
        and words; new ones come by the page's stream (server.py, log_lines.py)."""
        path = self._log_path()
        try:
            lines, size = log_lines.tail(path, LOG_TAIL_BYTES)
        except OSError as exc:
            return {"lines": [], "error": f"cannot read {path}: {exc.strerror}"}
        lines = log_lines.matching(lines, args.get("level", ""), args.get("actor", ""), args.get("q", ""))
        # position: where the page's stream starts (?from=), so a line written between this read and the stream's
        # opening is neither lost nor shown twice.
        return {"file": str(path), "lines": lines[-LOG_TAIL_LINES:], "position": size}

    # ----------------------------------------------------------------------------------- tree and status
    def _walk(self, ask) -> None:
        if self.tree_asks:   # a walk in flight answers this one too
            next(iter(self.tree_asks.values())).append(ask)
            return
        token = next(self.tokens)
        self.tree_asks[token] = [ask]
        self.send(self.parent, DescribeTree(token, WALK_WITHIN_S))
        self.after(WALK_WITHIN_S + 1.0, "walk_deadline", token)

    def on_TreeReply(self, message: TreeReply, sender) -> None:
        waiting = self.tree_asks.pop(message.token, None)
        if waiting is None:
            return
        self.cron_ref = next((n.ref for n, _p, _d in tree.walk(message.node) if n.kind == "Cron" and n.ref), None)
        self._send_cron_runs()
        self._send_commands(message.node)
        view = tree_view(message.node, time.time())
        for ask in waiting:
            self._answer(ask, 200, view)
        if self.server is not None and self.following.get("tree"):
            self.bridge.call(self.server.publish, "tree", view)

    # ---------------------------------------------------------------------------- cron: run a job now
    def _run_cron(self, ask: ConsoleAsk, job: str) -> None:
        """`cron run NAME` through the console: the same CronRunRequest to the cron actor, found by a walk."""
        if not job:
            self._answer(ask, 400, {"error": "job is needed"})
            return
        self.log.info("console: cron.run %r by %s", job[:64], ask.who)
        self.cron_runs.setdefault(job, []).append(ask)
        self._walk(None)   # the cron actor's address as it is now (it may have restarted since the last walk)

    def _send_cron_runs(self) -> None:
        """After a walk: each job's waiting asks go to the cron actor once (one request answers them all)."""
        for job in list(self.cron_runs):
            if self.cron_ref is None:
                for ask in self.cron_runs.pop(job):
                    self._answer(ask, 409, {"error": "no scheduler runs: the configuration has no [cron] jobs"})
            elif job not in self.cron_sent:
                self.cron_sent[job] = next(self.tokens)
                self.send(self.cron_ref, CronRunRequest(job))
                self.after(CRON_ANSWER_S, "cron_deadline", (job, self.cron_sent[job]))

    def on_timer_cron_deadline(self, sent) -> None:
        job, token = sent
        if self.cron_sent.get(job) == token:   # the cron actor did not answer (it restarted, say)
            del self.cron_sent[job]
            for ask in self.cron_runs.pop(job, []):
                self._answer(ask, 503, {"error": "the scheduler did not answer in time"})

    def on_CronRunReport(self, message: CronRunReport, sender) -> None:
        self.cron_sent.pop(message.job, None)
        payload = {"ok": message.ok, "job": message.job, "run_id": message.run_id, "error": message.error}
        for ask in self.cron_runs.pop(message.job, []):
            self._answer(ask, 200 if message.ok else 409, payload)

    def on_timer_walk_deadline(self, token) -> None:
        if token not in self.tree_asks:
            return
        for ask in self.tree_asks.pop(token):
            self._answer(ask, 503, {"error": "the actor tree did not answer in time"})
        for job in [job for job in self.cron_runs if job not in self.cron_sent]:   # never sent: never run later
            for ask in self.cron_runs.pop(job):
                self._answer(ask, 503, {"error": "the actor tree did not answer in time; nothing was run"})
        for *_command, ask in self.commands_waiting:
            self._answer(ask, 503, {"error": "the actor tree did not answer in time; nothing was done"})
        self.commands_waiting = []

    # ------------------------------------------- an operator's commands: adapters, sessions (stop, reset)
    def _command_adapter(self, ask: ConsoleAsk, adapter: str, command: str) -> None:
        """`adapters COMMAND NAME` through the console: the same AdapterCommand, to the adapter found by a walk."""
        if not adapter:
            self._answer(ask, 400, {"error": "adapter is needed"})
            return
        self.log.info("console: adapters.%s %r by %s", command, adapter[:64], ask.who)
        self._command(ask, ("adapter", adapter), lambda root: adapter_node(root, adapter),
                      AdapterCommand(command, ask.who), f"no adapter called {adapter[:64]!r} is running")

    def _command_session(self, ask: ConsoleAsk, session: str, command: str) -> None:
        """`sessions stop|reset ID` through the console: the same SessionCommand, to the shard that hosts it."""
        try:
            key = self.db(storage_cli.resolve(self._store(), operations.needed({"session": session}, "session")))
        except (operations.BadRequest, StorageError) as exc:   # none named, NotFound, AmbiguousId, unavailable
            self._refuse(ask, exc)
            return
        key = key.session_key
        self.log.info("console: sessions.%s %s by %s", command, key_hash(key), ask.who)
        self._command(ask, ("session", key), lambda root: owner_shard(root, key, self.config),
                      SessionCommand(command, key, ask.who), "the session's shard is not running")

    def _command(self, ask, target: tuple, find, message, missing: str) -> None:
        self.commands_waiting.append((target, find, message, missing, ask))
        self._walk(None)   # the target's address as it is now (it may have restarted since the last walk)

    def _send_commands(self, root) -> None:
        for target, find, message, missing, ask in self.commands_waiting:
            node = find(root)
            if node is None:
                self._answer(ask, 404, {"error": missing})
            elif target in self.commands_sent:
                self._answer(ask, 409, {"error": f"a command to that {target[0]} is being done; try again"})
            else:
                self.commands_sent[target] = (ask, next(self.tokens))
                self.send(node.ref, message)
                self.after(CRON_ANSWER_S, "command_deadline", (target, self.commands_sent[target][1]))
        self.commands_waiting = []

    def _command_done(self, target: tuple, done) -> None:
        ask, _token = self.commands_sent.pop(target, (None, 0))
        payload = {"ok": done.ok, target[0]: target[1], "action": done.action, "detail": done.detail}
        self._answer(ask, 200 if done.ok else 409, payload if done.ok else {**payload, "error": done.detail})

    def on_AdapterCommandDone(self, message: AdapterCommandDone, sender) -> None:
        self._command_done(("adapter", message.adapter), message)

    def on_SessionCommandDone(self, message: SessionCommandDone, sender) -> None:
        self._command_done(("session", message.session_key), message)

    def on_timer_command_deadline(self, sent) -> None:
        target, token = sent
        if self.commands_sent.get(target, (None, 0))[1] == token:
            ask, _token = self.commands_sent.pop(target)
            self._answer(ask, 503, {"error": f"the {target[0]} did not answer in time"})

    def _ask_status(self, ask) -> None:
        self.status_asks.append(ask)
        if not self.status_in_flight:
            self.status_in_flight = next(self.tokens)
            metrics = getattr(self.directory, "metrics", None) if self.directory is not None else None
            if metrics is not None:   # asked first: its answer is back before the root has walked the tree
                self.send(metrics, RecentMinutesWanted())
            self.send(self.parent, StatusRequest())
            self.after(WALK_WITHIN_S + 3.0, "status_deadline", self.status_in_flight)

    def on_RecentMinutes(self, message: RecentMinutes, sender) -> None:
        self.recent_rows, self.platforms = message.rows, message.platforms

    def on_GatewayStatus(self, message: GatewayStatus, sender) -> None:
        self.status_in_flight = 0
        now = time.time()
        view = {**status_view(message, now), **self._numbers(now)}
        for ask in self.status_asks:
            self._answer(ask, 200, view)
        self.status_asks = []
        if self.server is not None and self.following.get("status"):
            self.bridge.call(self.server.publish, "status", view)

    def _numbers(self, now: float) -> dict:
        """Beside the status: the last hour's counters, the ledger's counts and what the processes cost."""
        runtime = RunFiles(self.state_dir).read_runtime() or {}
        numbers = {"recent": series(self.recent_rows, now), "hour": totals(self.recent_rows),
                   "metrics": getattr(self.directory, "metrics", None) is not None,
                   "platforms": {p: {"turns": t, "rate_limit_waits": w, "seconds_waited": s}
                                 for p, t, w, s in self.platforms},
                   "memory": gateway_memory(runtime.get("launcher_pid", 0))}
        try:
            numbers["deliveries"] = self.db(self._store().ledger.counts())
        except StorageError as exc:
            numbers["deliveries_error"] = str(exc)
        return numbers

    def on_timer_status_deadline(self, token) -> None:
        if token == self.status_in_flight:
            self.status_in_flight = 0
            for ask in self.status_asks:
                self._answer(ask, 503, {"error": "the gateway did not answer a status request in time"})
            self.status_asks = []

    # ----------------------------------------------------------------------------------- live pages
    def _follow(self, counts: dict) -> None:
        self.following = counts
        for topic in ("tree", "status"):
            if counts.get(topic) and topic not in self.ticking:
                self.ticking.add(topic)
                getattr(self, f"on_timer_follow_{topic}")(None)

    def on_timer_follow_tree(self, _data) -> None:
        if not self.following.get("tree"):
            self.ticking.discard("tree")   # nobody looks: the timer stops here
            return
        self._walk(None)
        self.after(FOLLOW_TREE_S, "follow_tree")

    def on_timer_follow_status(self, _data) -> None:
        if not self.following.get("status"):
            self.ticking.discard("status")
            return
        self._ask_status(None)
        self.after(FOLLOW_STATUS_S, "follow_status")


