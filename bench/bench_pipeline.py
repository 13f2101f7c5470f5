"""Pipeline figures of the real daemon against the local fake platform, with a zero-latency agent.

    python bench/bench_pipeline.py [--latency 200] [--sessions 1000] [--memory-sessions 100]

* overhead: one message at a time into a warm session; from the fake platform's record of the inbound message to
  the timestamp of the reply's final text on the platform (the agent itself takes ~0 ms: the offline agent with
  chunk_delay_s = 0). p50 / p99.
* throughput: one message into each of N fresh chats at once; turns/s until every reply is final.
* memory: PSS of live Session processes (and of the whole tree) with M sessions live.
* cold start: first-message latency to a session that was passivated (idle_s elapsed), against a warm one.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.actor_system import wait_for  # noqa: E402
from tests.daemon import nodes  # noqa: E402
from tests.fakes.fakeplatform import FakePlatform  # noqa: E402
from tests.pipeline.harness import CURSOR, pipeline_gateway  # noqa: E402


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def final_at(platform, chat, inbound_text):
    """Time the reply quoting ``inbound_text`` reached its final text, or None while it is still streaming."""
    for m in platform.messages(chat):
        if inbound_text in m["text"] and CURSOR not in m["text"]:
            return m["history"][-1]["at"]
    return None


def measure_latency(platform, chat: str, text: str, timeout: float = 30) -> float:
    sent = time.time()
    platform.inject(chat, text)
    done = wait_for(lambda: final_at(platform, chat, text), timeout, 0.002, "reply")
    return done - sent


def bench(args) -> dict:
    out = {}
    with tempfile.TemporaryDirectory() as tmp, FakePlatform() as platform:
        extra = f"[sessions]\nmax_live = {max(args.sessions, args.memory_sessions) + 10}\nidle_s = 600\n"
        gw = pipeline_gateway(Path(tmp), platform, extra=extra, watchdog_interval=10.0, max_restarts=1000,
                              ping_deadline=10.0)
        gw.start()
        try:
            gw.wait_ready()
            measure_latency(platform, "warm", "warm up")
            lat = [measure_latency(platform, "warm", f"latency probe {i}") for i in range(args.latency)]
            out.update(overhead_ms_p50=round(percentile(lat, 50) * 1000, 1),
                       overhead_ms_p99=round(percentile(lat, 99) * 1000, 1), overhead_samples=len(lat))
            print(json.dumps(out), file=sys.stderr, flush=True)  # progress: each phase as it ends

            start = time.time()
            for i in range(args.sessions):
                platform.inject(f"t{i}", f"throughput {i}")
            wait_for(lambda: all(final_at(platform, f"t{i}", f"throughput {i}") for i in range(args.sessions)),
                     1800, 0.5, "every reply")
            took = time.time() - start
            out.update(throughput_sessions=args.sessions, throughput_s=round(took, 1),
                       turns_per_s=round(args.sessions / took, 1))
            print(json.dumps(out), file=sys.stderr, flush=True)

            pss = session_pss(gw)
            out.update(sessions_measured=len(pss), session_pss_mib_mean=round(statistics.mean(pss), 2) if pss else None,
                       tree_pss_mib_total=round(tree_pss(gw), 1))
        finally:
            gw.cli("stop")
            gw.kill_everything()
    out.update(cold_start(args))
    return out


def cold_start(args) -> dict:
    with tempfile.TemporaryDirectory() as tmp, FakePlatform() as platform:
        gw = pipeline_gateway(Path(tmp), platform, extra="[sessions]\nidle_s = 1\n", watchdog_interval=10.0)
        gw.start()
        try:
            gw.wait_ready()
            warm, cold = [], []
            for i in range(args.cold):
                measure_latency(platform, f"c{i}", f"first {i}")
                warm.append(measure_latency(platform, f"c{i}", f"warm {i}"))
                wait_for(lambda: not any(f"c{i}" in n["name"] or n["kind"] == "Session"
                                         for n in nodes(gw.tree())), 60, 0.2, "passivation")
                cold.append(measure_latency(platform, f"c{i}", f"cold {i}"))
        finally:
            gw.cli("stop")
            gw.kill_everything()
    return {"warm_ms_p50": round(statistics.median(warm) * 1000, 1),
            "passivated_first_message_ms_p50": round(statistics.median(cold) * 1000, 1)}


def session_pss(gw) -> list[float]:
    out = []
    for n in nodes(gw.tree()):
        if n["kind"] == "Session":
            try:
                info = psutil.Process(n["pid"]).memory_full_info()
                out.append(getattr(info, "pss", info.uss) / 2**20)
            except psutil.NoSuchProcess:
                pass
    return out


def tree_pss(gw) -> float:
    total = 0.0
    for n in nodes(gw.tree()):
        try:
            info = psutil.Process(n["pid"]).memory_full_info()
            total += getattr(info, "pss", info.uss) / 2**20
        except psutil.NoSuchProcess:
            pass
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--memory-sessions", type=int, default=100)
    parser.add_argument("--cold", type=int, default=5)
    args = parser.parse_args()
    result = bench(args)
    print(json.dumps({"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}, **result}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
