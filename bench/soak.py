"""Soak: the real daemon under a steady load for a long time; its memory must not grow once warm.

    python bench/soak.py --minutes 30 --rate 5 --chats 200 --out docs/bench/soak

Starts the real daemon (``run_gateway.py start``) on a temporary state dir, wired to the fake chat platform
(tests/fakes/fakeplatform.py, in this process) and the offline agent (--chunk-delay, default 0). Then, for
--minutes, one message every 1/--rate seconds goes to the next of --chats chats in turn, so each chat hears from
the user every chats/rate seconds. With [sessions] idle_s = --idle-s shorter than that, sessions keep being spawned,
passivated and respawned (about --rate a second), while the number alive stays about rate * (1.5 idle_s + a turn).
Each message waits for its answer (the reply quoting it, no streaming cursor left); more than --max-in-flight
unanswered messages hold the sender back instead of piling up, and a message still unanswered after
--answer-timeout seconds is counted unanswered.

Every --sample-s seconds one row goes to OUT.csv (flushed at once, so a killed run still leaves its data): RSS and
PSS of the gateway's whole process tree (the launcher and every descendant, psutil memory_full_info), process
count, session processes (the session supervisor's children: live Sessions and their stream consumers) with their
own RSS/PSS, Sessions in ``run_gateway.py tree --json`` when its walk is complete, turns answered so far.
At the end (also after Ctrl-C or SIGTERM, which stop the gateway with its own ``stop`` command first) OUT.png
plots RSS and PSS over time with the process count on a second axis and the warm-up shaded, OUT.json holds the
summary, and the summary is printed.

Verdict: mean tree RSS over the first --window-minutes after warm-up (first 20% of the run, or --warmup-minutes)
against the last --window-minutes. Exit 1 if it grew by more than --max-growth percent or any message went
unanswered, 130 if interrupted, 0 otherwise. Live session processes weigh a lot, so the summary also gives memory
per process and per session process; keep the load steady so their count is stable, and judge the total.

    python bench/soak.py --from-csv docs/bench/soak.csv    # summary and plot again from a CSV (e.g. a killed run)
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.benchlib import UNLIMITED_SENDERS
from common.runfiles import RunFiles
from tests.gateway import nodes
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import CURSOR, pipeline_gateway
from soak_report import percentile, report   # (this script's own folder is on the path)

MIB = 2**20
COLUMNS = ("elapsed_s", "rss_mib", "pss_mib", "processes", "session_procs", "session_rss_mib", "session_pss_mib",
           "sessions_in_tree", "sent", "answered", "unanswered", "in_flight", "actor_restarts", "sample_ms",
           "loadavg_1m", "supervisor_rss_mib", "supervisor_uss_mib")


class Load:
    """The user side: round-robin messages over the chats at a fixed rate, each followed until its answer."""

    def __init__(self, platform: FakePlatform, chats: int, answer_timeout: float):
        self.platform, self.chats, self.answer_timeout = platform, chats, answer_timeout
        self.pending: dict[str, dict[str, float]] = {}  # chat -> token -> wall time sent
        # Counters, not views of ``pending``: the sampler thread reads them while this thread changes the dict.
        self.sent = self.answered = self.unanswered = self.held = self.in_flight = 0
        self.latencies: list[float] = []

    def send(self) -> None:
        chat, token = f"soak{self.sent % self.chats}", f"m{self.sent}x"
        # No digits around an operator in the text: the offline agent would turn it into a calculator call.
        self.platform.inject(chat, f"soak message {token} to {chat}")
        self.pending.setdefault(chat, {})[token] = time.time()
        self.sent += 1
        self.in_flight += 1

    def collect(self) -> None:
        now = time.time()
        for chat, tokens in list(self.pending.items()):
            finals = self.platform.read(lambda s: [(m["text"], m["history"][-1]["at"]) for m in
                                                   s["chats"].get(chat, {}).get("messages", {}).values()
                                                   if not m["deleted"] and CURSOR not in m["text"]])
            for token, sent_at in list(tokens.items()):
                done = next((at for text, at in finals if token in text), None)
                if done is not None:
                    self.answered += 1
                    self.latencies.append(done - sent_at)
                elif now - sent_at > self.answer_timeout:
                    self.unanswered += 1
                else:
                    continue
                del tokens[token]
                self.in_flight -= 1
            if not tokens:
                del self.pending[chat]


class Sampler(threading.Thread):
    """Every ``every`` seconds, one CSV row about the gateway's process tree; apart from the sender so that a slow
    tree walk never makes the load uneven."""

    def __init__(self, gw, load: Load, csv_path: Path, every: float, started: float):
        super().__init__(name="sampler", daemon=True)
        self.gw, self.load, self.every, self.started = gw, load, every, started
        self.stop_event = threading.Event()
        self.failures = 0
        self.supervisor_pid = 0
        self.file = open(csv_path, "w", newline="", encoding="utf-8")
        self.writer = csv.writer(self.file)
        self.writer.writerow(COLUMNS)
        self.file.flush()

    def run(self) -> None:
        n = 0
        while not self.stop_event.is_set():
            try:
                self.sample()
            except Exception as exc:  # noqa: BLE001 - one bad sample (a walk timing out under load) must not end the soak
                self.failures += 1
                print(f"sample failed: {exc!r}", file=sys.stderr, flush=True)
            n += 1
            self.stop_event.wait(max(0.0, self.started + n * self.every - time.monotonic()))
        self.file.close()

    def sample(self) -> None:
        began = time.monotonic()
        result = self.gw.cli("tree", "--json", timeout=60)
        everyone = nodes(json.loads(result.stdout)) if result.returncode == 0 else []
        self.failures += not everyone
        restarts = sum(n.get("restarts", 0) for n in everyone) if everyone else ""
        self.supervisor_pid = next((n["pid"] for n in everyone if n["name"] == "sessions"), self.supervisor_pid)
        # Sessions counted from the OS, not the walk: a session supervisor slow to describe its children under load
        # is shown with none. Its children are the live Session processes and their in-flight stream consumers.
        # The session supervisor's own memory: every Session and StreamConsumer is forked from it, so whatever its
        # heap gains per child it ever started, each new session process starts with.
        supervisor_rss = supervisor_uss = ""
        try:
            if self.supervisor_pid <= 0:      # not known yet; pid 0's children would be the whole machine
                raise ValueError("no session supervisor yet")
            supervisor = psutil.Process(self.supervisor_pid)
            session_pids = {c.pid for c in supervisor.children()}
            info = supervisor.memory_full_info()
            supervisor_rss, supervisor_uss = round(info.rss / MIB, 1), round(info.uss / MIB, 1)
        except (psutil.NoSuchProcess, ValueError):
            session_pids = set()
        in_tree = sum(1 for n in everyone if n["kind"] == "Session")
        rss = pss = session_rss = session_pss = 0.0
        processes = live_sessions = 0  # zombies not yet reaped are neither counted nor measured
        for proc in tree_processes(self.gw.launcher_pid):
            try:
                if proc.status() == psutil.STATUS_ZOMBIE:
                    continue
                info = proc.memory_full_info()
            except psutil.NoSuchProcess:
                continue
            processes += 1
            rss, pss = rss + info.rss, pss + getattr(info, "pss", info.uss)
            if proc.pid in session_pids:
                live_sessions += 1
                session_rss, session_pss = session_rss + info.rss, session_pss + getattr(info, "pss", info.uss)
        load = self.load
        row = (round(began - self.started, 1), round(rss / MIB, 1), round(pss / MIB, 1), processes, live_sessions,
               round(session_rss / MIB, 1), round(session_pss / MIB, 1),
               in_tree if everyone and (in_tree or not live_sessions) else "", load.sent, load.answered,
               load.unanswered, load.in_flight, restarts, round((time.monotonic() - began) * 1000),
               os.getloadavg()[0], supervisor_rss, supervisor_uss)
        # Flushed per row: what reached the page cache survives this process being killed (not a machine crash).
        self.writer.writerow(row)
        self.file.flush()
        print(f"[{row[0] / 60:5.1f} min] rss {row[1]:7.1f} MiB  pss {row[2]:6.1f} MiB  procs {processes:3d}  "
              f"session procs {live_sessions:3d}  answered {load.answered}  unanswered {load.unanswered}  "
              f"in flight {load.in_flight}  load {row[-1]:.1f}", flush=True)


def tree_processes(launcher_pid: int) -> list[psutil.Process]:
    if launcher_pid <= 0:  # pid 0's "children" would be the whole machine
        return []
    try:
        launcher = psutil.Process(launcher_pid)
        return [launcher] + launcher.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def soak(args) -> dict:
    csv_path = Path(f"{args.out}.csv")
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    outcome = {"interrupted": False, "gateway_stop": None, "processes_left": None, "sample_failures": 0}
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp, FakePlatform() as platform:
        extra = f"[sessions]\nidle_s = {args.idle_s}\nmax_live = {max(500, args.chats + 10)}\n"
        agent = f'[agent]\nkind = "offline"\nchunk_delay_s = {args.chunk_delay}\n'
        # Production-like supervision: a soak watches the daemon as it would run, not the tests' tight settings.
        gw = pipeline_gateway(Path(tmp), platform, extra=extra, agent=agent, watchdog_interval=5.0,
                              ping_deadline=10.0, adapter_extra=UNLIMITED_SENDERS)
        load = Load(platform, args.chats, args.answer_timeout)
        sampler = None
        try:
            gw.start()
            gw.wait_ready(timeout=60)
            started = time.monotonic()
            sampler = Sampler(gw, load, csv_path, args.sample_s, started)
            sampler.start()
            drive(load, started, args, load_ended=sampler.stop_event.set)
        except KeyboardInterrupt:
            outcome["interrupted"] = True
        finally:
            # A second Ctrl-C must not cut the cleanup short and leave a gateway behind; the children started from
            # here inherit the ignore, so ``stop`` is not interrupted either. Cleanup is bounded by stop's timeout.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            if sampler is not None:
                sampler.stop_event.set()
                sampler.join(timeout=90)
                outcome["sample_failures"] = sampler.failures
            outcome.update(stop_gateway(gw))
            if load.unanswered or load.in_flight:
                outcome["log_tail"] = gw.log().splitlines()[-30:]
        stats = platform.stats()
    outcome.update(sent=load.sent, answered=load.answered, unanswered=load.unanswered, in_flight_at_end=load.in_flight,
                   sender_held=load.held, platform_errors=stats["errors"],
                   answer_s_p50=percentile(load.latencies, 50), answer_s_p99=percentile(load.latencies, 99))
    return outcome


def drive(load: Load, started: float, args, load_ended) -> None:
    """Send on schedule for the run's length, then let the last answers arrive. Sampling ends with the load: the
    quiet tail while the last answers come would otherwise pass for the end of a steady run."""
    interval, end = 1.0 / args.rate, started + args.minutes * 60
    next_due = started
    while (now := time.monotonic()) < end:
        if now >= next_due:
            if load.in_flight < args.max_in_flight:
                load.send()
            else:
                load.held += 1  # a backlog: skip this slot rather than burst later, the load stays even
            next_due += interval
            if next_due < now - 1.0:  # fell behind (a stalled machine): resume from now, never catch up in a burst
                next_due = now
        load.collect()
        time.sleep(max(0.0, min(next_due - time.monotonic(), 0.05)))
    load_ended()
    deadline = time.monotonic() + args.answer_timeout
    while load.in_flight and time.monotonic() < deadline:
        load.collect()
        time.sleep(0.1)
    load.collect()


def stop_gateway(gw) -> dict:
    """The daemon's own ``stop`` (SIGTERM, graceful drain, SIGKILL after its timeout), then a check against the OS
    that the tree as it was just before is gone; stragglers are killed and reported. The tree is taken now, not
    from old samples: session pids churn all run long and an old pid may belong to someone else by now (psutil
    checks each process's start time before signalling it)."""
    # Interrupted inside ``start``: the launcher may be up all the same, its pid is in the state dir.
    launcher_pid = gw.launcher_pid or RunFiles(gw.state).read_pid() or 0
    before = tree_processes(launcher_pid)
    result = gw.cli("stop", "--json", timeout=120)
    try:
        stopped = json.loads(result.stdout)
    except ValueError:
        stopped = {"ok": False, "error": (result.stdout + result.stderr).strip()[-300:]}
    _, alive = psutil.wait_procs(before, timeout=15)
    left = [p for p in alive if _alive(p)]
    for proc in left:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    return {"gateway_stop": stopped, "processes_left": len(left), "processes_at_stop": len(before)}


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the load (default 30)")
    parser.add_argument("--rate", type=float, default=5.0, help="messages per second (default 5)")
    parser.add_argument("--chats", type=int, default=200, help="chats the messages go round (default 200)")
    parser.add_argument("--idle-s", type=float, default=3.0,
                        help="[sessions] idle_s: sessions idle this long are passivated by a sweep every "
                             "min(idle_s, 30) s. The live count saws between rate*idle_s and twice that: the "
                             "default 3 keeps it low and even, and is no divisor of --sample-s, so samples do not "
                             "keep hitting the same point of the sawtooth")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="offline agent's delay between chunks")
    parser.add_argument("--sample-s", type=float, default=10.0, help="seconds between memory samples (default 10)")
    parser.add_argument("--warmup-minutes", type=float, default=None, help="warm-up (default: first 20%% of the run)")
    parser.add_argument("--window-minutes", type=float, default=5.0,
                        help="length of the early and late windows compared (default 5; shorter runs: half the "
                             "steady part)")
    parser.add_argument("--max-growth", type=float, default=10.0, help="allowed RSS growth in %% (default 10)")
    parser.add_argument("--answer-timeout", type=float, default=60.0, help="seconds before a message counts "
                                                                            "as unanswered (default 60)")
    parser.add_argument("--max-in-flight", type=int, default=None, help="unanswered messages that hold the "
                                                                         "sender back (default 10 s of load)")
    parser.add_argument("--out", default="docs/bench/soak", help="writes OUT.csv, OUT.png, OUT.json")
    parser.add_argument("--from-csv", default=None, help="no run: summary and plot from this CSV")
    args = parser.parse_args()
    args.max_in_flight = args.max_in_flight or max(1, int(args.rate * 10))
    if args.from_csv:
        return report(Path(args.from_csv), args, {})

    def interrupted(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupted)
    outcome = soak(args)
    return report(Path(f"{args.out}.csv"), args, outcome)


if __name__ == "__main__":
    sys.exit(main())
