"""Every headline figure of the gateway, measured in one run next to a baseline, as a table and PNG plots.

    python bench/run_benchmarks.py [--quick] [--out docs/bench]

The baseline (bench/baseline_relay.py) is the floor: one asyncio process that polls the same fake platform with
the same HTTP client, runs the same offline agent with zero latency and sends the final reply once, with no
durability, no streaming edits and no supervision. Where it has an analogue a figure is also a ratio
(gateway / baseline); restart, recovery and drain are the gateway's alone.

* overhead per turn: one message at a time into a warm chat, from the message's arrival at the fake platform to
  the reply's final text there (the agent itself takes ~0 ms). p50 / p99.
* steady rate: one message per fresh chat at a fixed rate; the same overhead under that load.
* burst: one message into each of N fresh chats, all at once; turns/s until the last reply is final, and the
  answered turns per second over time.
* CPU per warm turn: the whole process tree's CPU time over the sequential turns, per turn.
* memory: the idle daemon's PSS (whole tree, before the first message); the growth of the whole tree's PSS over the
  burst, per session it made live (the baseline: the relay's PSS growth per chat).
* start-to-ready: ``run_gateway.py start`` until every actor answers (the baseline: spawn to its first poll).
* restart after SIGKILL: a random leaf actor killed, until its replacement answers its supervisor.
* a shard killed with -9: the kill, a message into one of its chats at that moment, until that answer is final
  (bench/bench_shard_kill.py).
* recovery: the daemon killed with -9 while N replies stream (N obligations in the ledger), then started again;
  start until all N replies are final on the platform.
* drain: ``run_gateway.py drain`` while N turns are in flight; until it exits 0, with every answer delivered.

Writes results.md, results.json, latency.png and throughput.png under --out.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.adapters.pacing import DEFAULT_RESENT_MARKER as RESENT_MARKER
from bench import bench_report
from bench.bench_shard_kill import bench_shard_kills
from bench.benchlib import (BENCH_FAKE_ADAPTER, BaselineProcess, bench_kills, bench_starts, final_times,
                            machine, measure_latency, ms, per_second, percentile, process_tree_cpu_s,
                            process_tree_pss, pss_mib, streaming_chats)
from tests.actor_system import wait_for
from tests.gateway import nodes
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import pipeline_gateway

FULL = {"latency": 200, "sessions": 1000, "rate": 5.0, "rate_s": 20.0, "starts": 10, "kills": 60, "shard_kills": 20,
        "obligations": 100, "in_flight": 100,
        "burst_deadline_s": 420, "drain_timeout_s": 300}
QUICK = {"latency": 30, "sessions": 100, "rate": 5.0, "rate_s": 4.0, "starts": 3, "kills": 10, "shard_kills": 5,
         "obligations": 20, "in_flight": 20,
         "burst_deadline_s": 120, "drain_timeout_s": 60}
# The watchdog's ping deadline is lifted from its default (10 s) out of the way: a supervisor spawning hundreds of
# sessions answers a ping only after that backlog, and on a loaded host the watchdog then restarts it (and every
# session under it), so a run would measure those restarts instead of the pipeline. docs/numbers.md has the figures.
GATEWAY_KWARGS = {"watchdog_interval": 10.0, "max_restarts": 1000, "ping_deadline": 600.0,
                  "adapter_extra": BENCH_FAKE_ADAPTER}
SLOW_AGENT = "[agent]\nchunk_delay_s = 5.0\n"   # ~27 chunks: a turn streams for about two minutes
FAST_AGENT = "[agent]\nchunk_delay_s = 0.0\n"


def progress(what: str, figures: dict) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {what}: {json.dumps(figures)}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------- pipeline phases
def all_final(platform, chats) -> dict | None:
    times = final_times(platform, chats)
    return times if len(times) == len(chats) else None


def pipeline_phases(platform, n: dict, pss_of, cpu_of) -> dict:
    """Latency, steady rate and burst against whatever is polling ``platform``; ``pss_of()`` -> (MiB, sessions),
    ``cpu_of()`` -> CPU seconds it used so far."""
    out = {"idle_pss_mib": round(pss_of()[0], 1)}
    measure_latency(platform, "warm", "warm up")
    cpu_before = cpu_of()
    lat = [measure_latency(platform, "warm", f"latency probe {i}") for i in range(n["latency"])]
    out.update(latency_s=lat, overhead_ms_p50=ms(percentile(lat, 50)), overhead_ms_p99=ms(percentile(lat, 99)),
               cpu_ms_per_turn=round((cpu_of() - cpu_before) * 1000 / len(lat), 2))

    chats, injected = [f"r{i}" for i in range(int(n["rate"] * n["rate_s"]))], {}
    start = time.monotonic()
    for i, chat in enumerate(chats):
        time.sleep(max(0.0, start + i / n["rate"] - time.monotonic()))
        injected[chat] = time.time()
        platform.inject(chat, f"steady {i}")
    done = wait_for(lambda: all_final(platform, chats), 600, 0.2,
                    "every steady-rate reply")
    rate_lat = [done[c] - injected[c] for c in chats]
    out.update(rate_per_s=n["rate"], rate_turns=len(chats), rate_ms_p50=ms(percentile(rate_lat, 50)),
               rate_ms_p99=ms(percentile(rate_lat, 99)))

    mem_before, live_before = pss_of()
    chats = [f"t{i}" for i in range(n["sessions"])]
    start = time.time()
    for i, chat in enumerate(chats):
        platform.inject(chat, f"throughput {i}")
    deadline = time.monotonic() + n["burst_deadline_s"]
    while len(done := final_times(platform, chats)) < len(chats) and time.monotonic() < deadline:
        time.sleep(0.5)
    # An unfinished burst is a figure too: what was answered by the deadline, and at what rate.
    took = (max(done.values()) if len(done) == len(chats) else time.time()) - start
    burst_lat = [t - start for t in done.values()] or [float("nan")]
    mem_after, live_after = pss_of()
    out.update(burst_sessions=len(chats), burst_answered=len(done), burst_complete=len(done) == len(chats),
               burst_s=round(took, 2), turns_per_s=round(len(done) / took, 1),
               burst_per_second=per_second(list(done.values()), start),
               burst_done_s=sorted(round(t - start, 4) for t in done.values()),
               burst_ms_p50=ms(percentile(burst_lat, 50)), burst_ms_p99=ms(percentile(burst_lat, 99)),
               pss_mib_before=round(mem_before, 1), pss_mib_after=round(mem_after, 1),
               sessions_made_live=live_after - live_before,
               mib_per_session=round((mem_after - mem_before) / max(1, live_after - live_before), 3))
    return out


def baseline_pipeline(n: dict) -> dict:
    with FakePlatform() as platform, BaselineProcess(platform.base_url) as relay:
        chats_seen = lambda: len(platform.read(lambda s: s["chats"]))  # noqa: E731 - the relay keeps every chat
        out = pipeline_phases(platform, n, lambda: (pss_mib(relay.pid), chats_seen()),
                              lambda: process_tree_cpu_s(relay.pid))
    progress("baseline pipeline", {k: v for k, v in out.items() if not isinstance(v, list)})
    return out


def gateway_pipeline(n: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp, FakePlatform() as platform:
        gw = pipeline_gateway(Path(tmp), platform, extra="[sessions]\nidle_s = 600\n", **GATEWAY_KWARGS)
        try:
            gw.start()
            gw.wait_ready()

            def pss_of():
                # Sessions are cells of the shard processes: the tree says how many are live. A reply is final on
                # the platform before its consumer and session have recorded it: wait until no cell has work left,
                # or a shard still busy with that answers the walk late and shows its cells as last known.
                wait_for(lambda: json.loads(gw.cli("status", "--json").stdout).get("pending_work") == 0, 300, 0.5,
                         "every cell done with its turn")
                live = sum(1 for node in nodes(gw._tree_or_none() or {}) if node["kind"] == "Session")
                return sum(process_tree_pss(gw.launcher_pid).values()), live
            out = pipeline_phases(platform, n, pss_of, lambda: process_tree_cpu_s(gw.launcher_pid))
            out["live_sessions"] = pss_of()[1]
        finally:
            gw.cli("stop")
            gw.kill_everything()
    progress("gateway pipeline", {k: v for k, v in out.items() if not isinstance(v, list)})
    return out


# -------------------------------------------------------------------------------------------- runtime phases
def baseline_starts(n: int) -> dict:
    ready = []
    with FakePlatform() as platform:
        for _ in range(n):
            with BaselineProcess(platform.base_url) as relay:
                ready.append(relay.ready_s)
    return {"start_s_p50": round(statistics.median(ready), 3), "starts": n}


def recovery(n: int) -> dict:
    """kill -9 of the daemon while n replies stream, then a start with a zero-latency agent: start -> all final."""
    with tempfile.TemporaryDirectory() as tmp, FakePlatform() as platform:
        gw = pipeline_gateway(Path(tmp), platform, agent=SLOW_AGENT, **GATEWAY_KWARGS)
        chats = [f"o{i}" for i in range(n)]
        try:
            gw.start()
            gw.wait_ready()
            for i, chat in enumerate(chats):
                platform.inject(chat, f"pending {i}")
            wait_for(lambda: streaming_chats(platform, chats) == n, 300, 0.2, f"{n} replies streaming")
            os.kill(gw.launcher_pid, signal.SIGKILL)   # the launcher's death takes the whole tree down
            gw.assert_no_process_left(30)
            pending = json.loads(gw.cli("deliveries", "--json", "--limit", "1", check=True).stdout)["counts"]
            gw.config.write_text(gw.config.read_text().replace(SLOW_AGENT, FAST_AGENT))
            started = time.time()
            ready_after = gw.start()["ready_after_s"]
            done = wait_for(lambda: all_final(platform, chats), 600, 0.1,
                            f"{n} recovered replies")
            took = max(done.values()) - started
            shown = {c: [m["text"] for m in platform.messages(c) if not m["deleted"]] for c in chats}
            # A send whose outcome died with the daemon goes again with the visible re-sent mark (the platform has no
            # idempotency key): documented, counted apart. Two copies without the mark are a duplicate.
            duplicates = sum(1 for texts in shown.values() if sum(RESENT_MARKER not in t for t in texts) > 1)
            marked = sum(1 for texts in shown.values() if len(texts) > 1 and sum(RESENT_MARKER not in t
                                                                                 for t in texts) <= 1)
        finally:
            gw.cli("stop")
            gw.kill_everything()
    out = {"obligations": n, "unfinished_at_kill": pending.get("attempting", 0) + pending.get("pending", 0),
           "ledger_at_kill": pending, "recovery_s": round(took, 2), "start_ready_s": ready_after,
           "duplicates": duplicates, "marked_resends": marked}
    progress("recovery", out)
    return out


def drain(n: int, timeout_s: float) -> dict:
    """``run_gateway.py drain`` with n turns streaming: until exit 0; every answer must be whole on the platform."""
    with tempfile.TemporaryDirectory() as tmp, FakePlatform() as platform:
        gw = pipeline_gateway(Path(tmp), platform, agent=SLOW_AGENT.replace("5.0", "2.0"), **GATEWAY_KWARGS)
        chats = [f"d{i}" for i in range(n)]
        try:
            gw.start()
            gw.wait_ready()
            for i, chat in enumerate(chats):
                platform.inject(chat, f"in flight {i}")
            wait_for(lambda: streaming_chats(platform, chats) == n, 300, 0.2, f"{n} turns in flight")
            streaming = n - len(final_times(platform, chats))   # under load the first may end before the last begins
            started = time.time()
            result = gw.cli("drain", "--timeout", str(timeout_s), "--json", timeout=timeout_s + 100)
            took = time.time() - started
            try:
                report = json.loads(result.stdout)
            except ValueError:
                report = {"error": (result.stdout + result.stderr)[-300:]}
            gw.assert_no_process_left(30)
            drain_log = [line for line in gw.log().splitlines() if "drain" in line or "launcher" in line][-12:]
            done = final_times(platform, chats)
            whole = sum(1 for c in chats if any("api_key_env" in t for t in platform.final_texts(c)))
        finally:
            gw.cli("stop")
            gw.kill_everything()
    last_reply = max(done.values()) - started if done else None
    out = {"in_flight": n, "streaming_at_drain": streaming, "exit_code": result.returncode, "drain_s": round(took, 2),
           "answered": len(done), "whole_answers": whole, "in_flight_left": report.get("in_flight_left"),
           "report": report, "log": drain_log,
           "last_reply_after_s": round(last_reply, 2) if last_reply is not None else None,
           "exit_after_last_reply_s": round(took - last_reply, 2) if last_reply is not None else None}
    progress("drain", out)
    return out


# ---------------------------------------------------------------------------------------------------- main
PHASES = {
    "baseline": lambda n: baseline_pipeline(n),
    "gateway": lambda n: gateway_pipeline(n),
    "baseline_start": lambda n: baseline_starts(n["starts"]),
    "gateway_start": lambda n: bench_starts(n["starts"]),
    "restart": lambda n: bench_kills(n["kills"]),
    "shard_kill": lambda n: bench_shard_kills(n["shard_kills"]),
    "recovery": lambda n: recovery(n["obligations"]),
    "drain": lambda n: drain(n["in_flight"], n["drain_timeout_s"]),
}


def run(n: dict, checkpoint: Path, resume: bool) -> dict:
    """Every phase in order; the results so far are written to ``checkpoint`` after each, and with ``resume`` the
    phases it already holds (same parameters) are kept instead of measured again."""
    results = {"machine": machine(), "parameters": n}
    if resume and checkpoint.exists():
        previous = json.loads(checkpoint.read_text())
        if previous.get("parameters") == n:
            results.update({k: v for k, v in previous.items() if k in PHASES or k == "machine"})
    for name, phase in PHASES.items():
        if name in results:
            continue
        results[name] = phase(n)
        if name.endswith("start"):
            progress(name, results[name])
        elif name in ("restart", "shard_kill"):
            progress(name, results[name])
        checkpoint.write_text(json.dumps(results, indent=1) + "\n")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a reduced run (about two minutes) to check the script")
    parser.add_argument("--out", default="docs/bench", help="where results.md, results.json and the plots go")
    parser.add_argument("--resume", action="store_true",
                        help="keep the phases already in OUT/results.json (same parameters) and measure the rest")
    args = parser.parse_args()
    command = "python bench/run_benchmarks.py" + (" --quick" if args.quick else "") + (
        f" --out {args.out}" if args.out != "docs/bench" else "")
    # SIGTERM unwinds like an error, so every gateway and relay this run started is stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wall = time.monotonic()
    results = run(QUICK if args.quick else FULL, out / "results.json", args.resume)
    results["command"] = command
    results["wall_s"] = round(time.monotonic() - wall, 1)
    table = bench_report.markdown(results)
    (out / "results.md").write_text(table)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    try:
        bench_report.plots(results, out)
    except ModuleNotFoundError as missing:   # the figures are in results.md/json already; only the PNGs need it
        print(f"plots not drawn: {missing.name} is not installed (pip install -e '.[bench]'); "
              f"`--resume --out {out}` draws them from results.json afterwards", file=sys.stderr)
    bench_report.show(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
