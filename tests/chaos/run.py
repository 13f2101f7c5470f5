"""One chaos run: start the world, send the load while faults are injected at random moments, let it settle, drain,
start once more (the next instance must find nothing left to do), stop, then check every guarantee and print the
table of faults injected and violations found.
"""
from __future__ import annotations

import json
import random
import shutil
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests.actor_system import wait_for
from tests.chaos import checks
from tests.chaos.faults import FAULTS, Sampler, Skipped, restart
from tests.chaos.world import Plan, World

RECOVERY_DEADLINE_S = 60.0     # after a fault, every actor must be running again within this (G8)


@dataclass
class Report:
    faults: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    checked: Counter = field(default_factory=Counter)
    violations: dict = field(default_factory=dict)          # guarantee -> list of lines
    log: list = field(default_factory=list)
    elapsed_s: float = 0.0
    marked_resends: int = 0     # replies re-sent with the visible marker after a send whose outcome was lost
    lost_found: int = 0         # lost sends whose copy was found by its id (Telegram private chats), not re-sent
    gave_up: int = 0            # messages answered with the notice for a turn cut more than max_resumes times
    slowest_answer_s: float = 0.0   # the longest a message waited for its answer
    fault_s: float = 0.0        # the time spent inside faults, which the liveness bound allows on top

    def add(self, guarantee: str, checked: int, violations: list[str]) -> None:
        self.checked[guarantee] += checked
        self.violations.setdefault(guarantee, []).extend(violations)

    @property
    def total_violations(self) -> int:
        return sum(len(v) for v in self.violations.values())

    def table(self) -> str:
        lines = ["| fault | injected | not injected |", "|---|---:|---:|"]
        for name in sorted(set(self.faults) | set(self.skipped)):
            lines.append(f"| {name} | {self.faults[name]} | {self.skipped[name]} |")
        lines += ["", "| guarantee | checked | violations |", "|---|---:|---:|"]
        for guarantee in sorted(self.checked):
            lines.append(f"| {guarantee} | {self.checked[guarantee]} | {len(self.violations.get(guarantee, []))} |")
        lines += ["", f"Chats where a reply was re-sent with the visible marker (a send whose outcome was lost, "
                      f"with the daemon or the connection, where its copy could not be found): {self.marked_resends}",
                  f"Lost sends whose copy was found by its id in a Telegram private chat and edited into the answer "
                  f"(actors/adapters/lost_copies.py): {self.lost_found}",
                  f"Messages answered with the notice that their turn was cut more often than [sessions] max_resumes "
                  f"(G8 resumes a turn that often, then asks for the message again): {self.gave_up}",
                  f"Slowest answer: {self.slowest_answer_s:.1f}s after its message (the liveness bound: "
                  f"{checks.ANSWER_BOUND_S:.0f}s plus {self.fault_s:.1f}s spent inside faults)"]
        return "\n".join(lines)


def say(report: Report, line: str) -> None:
    stamped = f"[{report.elapsed_s:7.1f}s] {line}"
    report.log.append(stamped)
    print(stamped, flush=True)


def run(plan: Plan, seed: int, verbose: bool = True, artifacts: Path | None = None) -> Report:
    report = Report()
    rng = random.Random(seed)
    began = time.monotonic()

    def tick(line: str) -> None:
        report.elapsed_s = time.monotonic() - began
        if verbose:
            say(report, line)
        else:
            report.log.append(line)

    with World(plan, seed) as world:
        try:
            world.start_gateway()
            tick(f"gateway ready; {len(world.messages)} messages planned over {plan.load_s:.0f}s into "
                 f"{plan.telegram_chats} Telegram chats and {plan.web_visitors} web chats; state disk "
                 + ("a tmpfs of %d MiB" % plan.disk_mb if world.disk_mounted else "not mounted (not root)"))
            sampler = Sampler(world)
            sampler.start()
            loader = threading.Thread(target=world.run_load, daemon=True)
            loader.start()
            report.faults["slow model turns"] = sum("#slow" in m.text for m in world.messages)
            report.faults["failing model turns"] = sum(m.failing for m in world.messages)
            inject_faults(world, plan, rng, report, tick)
            loader.join(plan.load_s + 120)
            assert not world.load_error, f"the load stopped before it sent every message: {world.load_error}"
            tick(f"load sent ({len(world.sent)} messages); settling")
            try:
                wait_for(lambda: checks.settled(world), plan.settle_s, 1.0, "every message answered")
            except AssertionError:
                tick("did not settle in time; checking what is there")
                if artifacts is not None:   # what held the rest up: the live tree and the state as it stands
                    artifacts.mkdir(parents=True, exist_ok=True)
                    (artifacts / "tree-unsettled.txt").write_text(world.gw.cli("tree").stdout)
                    for name in ("gateway.db", "gateway.db-wal"):
                        if (world.gw.state / name).exists():
                            shutil.copy(world.gw.state / name, artifacts / name)
            admin_outputs = [world.gw.cli("status").stdout, world.gw.cli("tree").stdout]
            telegram, web = checks.telegram_view(world), checks.web_view(world)
            tick(f"{checks.answered_count(world, telegram, web)} of {len(world.sent)} questions answered")
            drain_and_restart(world, report, tick)
            sampler.stop.set()
            sampler.join(5)
            report.add("G7 loopback only", sampler.samples, sampler.violations)
            checked, violations, marked = checks.replies(world, telegram, web)
            report.add("G1+G3 replies in chats", checked, violations)
            if violations and artifacts is not None:
                save_reply_evidence(world, violations, artifacts)
            report.marked_resends = marked
            report.add("G3 final text shown", *checks.final_texts(world, telegram, web))
            report.gave_up = checks.gave_up_notices(telegram, web)
            report.lost_found = world.gw.log().count("edited into place")
            report.add("G1+G2 web history", *checks.web_questions(world, web))
            report.add("G1+G2 inbox rows", *checks.inbox(world))
            report.add("G2+G4 serial transcripts", *checks.transcripts(world))
            checked, violations, report.slowest_answer_s = checks.liveness(world, telegram, web)
            report.fault_s = world.fault_s
            report.add("liveness bound", checked, violations)
            report.add("G6 no secret shown", *checks.secrets_hidden(world, telegram, admin_outputs))
            world.gw.cli("stop", timeout=120)
            orphans = orphan_check(world)
            report.add("no orphan process", 1, orphans)
        finally:
            if artifacts is not None:   # the log outlives the world, whatever happened
                artifacts.mkdir(parents=True, exist_ok=True)
                if (world.gw.state / "gateway.log").exists():
                    shutil.copy(world.gw.state / "gateway.log", artifacts / "gateway.log")
    report.elapsed_s = time.monotonic() - began
    return report


def save_reply_evidence(world: World, violations: list[str], artifacts: Path) -> None:
    """What a duplicate or a missing reply is diagnosed from: every Bot API call the fake saw in the chats concerned
    (with each message's versions and times) and the state dir's database as it stands after the drain."""
    artifacts.mkdir(parents=True, exist_ok=True)
    chats = sorted({line.split()[1].rstrip(":") for line in violations if line.startswith("telegram ")})
    timelines = {chat: world.control.get(f"/_control/chats/{chat}") for chat in chats}
    (artifacts / "violating-chats.json").write_text(json.dumps(timelines, indent=1, ensure_ascii=False))
    for name in ("gateway.db", "gateway.db-wal"):
        if (world.gw.state / name).exists():
            shutil.copy(world.gw.state / name, artifacts / name)


def reply_evidence_text(artifacts: Path) -> str:
    """The saved evidence as lines a CI log can carry: each violating chat's Bot API calls, then its messages."""
    path = artifacts / "violating-chats.json"
    if not path.exists():
        return ""
    lines = []
    for chat, timeline in json.loads(path.read_text()).items():
        t0 = min([op["at"] for op in timeline["ops"]] or [0.0])
        lines.append(f"chat {chat}: Bot API calls")
        lines += [f"  {op['at'] - t0:8.2f}s {op['method']} message {op['message_id']} -> {op['status']} "
                  f"{op['description'] or ''}" for op in timeline["ops"]]
        lines.append(f"chat {chat}: messages")
        for message in timeline["messages"]:
            versions = [f"{v.get('at', t0) - t0:.2f}s {v['text'][:60]!r}" for v in message.get("history", [])]
            lines.append(f"  {message['message_id']} {'deleted ' if message.get('deleted') else ''}"
                         f"{'out' if message.get('outgoing') else 'in'}: " + " | ".join(versions))
    return "\n".join(lines)


def inject_faults(world: World, plan: Plan, rng: random.Random, report: Report, tick) -> None:
    """Faults one after another at random moments of the load window; after each, the tree must be whole again."""
    moments = sorted(rng.uniform(2.0, plan.load_s) for _ in range(plan.faults))
    started = time.monotonic()
    for moment in moments:
        while time.monotonic() - started < moment:
            time.sleep(0.05)      # the schedule is wall-clock moments, nothing to wait for
        fault = rng.choice(FAULTS)()
        fault_began = time.monotonic()
        try:
            what = fault.inject(world, rng)
        except Skipped as skip:
            report.skipped[fault.name] += 1
            tick(f"{fault.name}: not injected ({skip})")
            continue
        except Exception as exc:  # noqa: BLE001 - the gateway did not come back from it: a finding, and the run goes on
            report.faults[fault.name] += 1
            report.add("G8 recovery after a fault", 1, [f"{fault.name}: {type(exc).__name__}: {exc}"[:400]])
            tick(f"{fault.name}: FAILED {type(exc).__name__}: {str(exc)[:200]}")
            if world.gw._tree_or_none() is None and not world.gw.alive_pids():
                restart(world)
            continue
        report.faults[fault.name] += 1
        tick(f"{fault.name}: {what}")
        recovered = recover(world)
        world.fault_s += time.monotonic() - fault_began
        report.add("G8 recovery after a fault", 1, [] if recovered is None else [f"after {fault.name} ({what}): "
                                                                                  f"{recovered}"])


def recover(world: World) -> str | None:
    """None when every actor runs again within the deadline; else what was wrong. A daemon that exited (its root
    gave up) is started again, as its service manager would, and that is reported."""
    deadline = time.monotonic() + RECOVERY_DEADLINE_S
    while time.monotonic() < deadline:
        tree = world.gw._tree_or_none()
        if tree is None and not world.gw.alive_pids():
            restart(world)
            return "the daemon exited and had to be started again"
        if tree is not None and not (down := not_running(tree)):
            return None
        time.sleep(0.2)
    return f"not whole after {RECOVERY_DEADLINE_S:.0f}s: {down if tree is not None else 'the tree did not answer'}"


def not_running(tree: dict) -> list[str]:
    """The fixed tree's actors that are not running. Sessions and replies come and go (and a killed one restarts
    on demand): their recovery is judged by the answers in the chats, not by a snapshot."""
    down, stack = [], [tree]
    while stack:
        node = stack.pop()
        if node["state"] not in ("running", "busy"):
            down.append(f"{node['kind']} {node['name']} {node['state']}")
        if node["kind"] != "SessionSupervisor":
            stack.extend(node.get("children", []))
    return down


def drain_and_restart(world: World, report: Report, tick) -> None:
    """G9: drain exits 0 with nothing lost; the next instance finds every inbound row done and no obligation
    open, and answers a new message."""
    violations = []
    drained = world.gw.cli("drain", "--timeout", "60", timeout=120)
    if drained.returncode != 0:
        violations.append(f"drain exited {drained.returncode}: {drained.stdout[-200:]} {drained.stderr[-200:]}")
    try:
        world.gw.assert_no_process_left(30)
    except AssertionError as exc:
        violations.append(f"after drain: {exc}")
    tick(f"drained (exit {drained.returncode}); starting the next instance")
    world.gw.start()
    world.gw.wait_ready(60)
    try:
        wait_for(lambda: checks.obligations_open(world) == 0, 60, 0.5, "nothing pending in the next instance")
    except AssertionError:
        violations.append(f"{checks.obligations_open(world)} obligations still open in the next instance")
    report.add("G9 drain", 1, violations)


def orphan_check(world: World) -> list[str]:
    try:
        world.gw.assert_no_process_left(30)
    except AssertionError as exc:
        return [str(exc)]
    config = str(world.gw.config)
    left = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if config in " ".join(proc.info["cmdline"] or ()) and proc.status() != psutil.STATUS_ZOMBIE:
            left.append(f"pid {proc.pid} still runs: {' '.join(proc.info['cmdline'])[:120]}")
    return left
