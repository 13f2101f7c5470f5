"""Pipeline figures of the real daemon against the local fake platform, with a zero-latency agent.

    python bench/bench_pipeline.py [--latency 200] [--sessions 1000] [--memory-sessions 100] [--backend sqlite]

``--backend postgresql`` runs the same daemon on a PostgreSQL server on loopback started here
(tests/servers/postgresql.py; Debian's ``postgresql`` package), ``both`` runs each in turn and prints both.

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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.benchlib import (BENCH_FAKE_ADAPTER, final_at, measure_latency, percentile, session_pss,
                            tree_pss)
from tests.actor_system import wait_for
from tests.gateway import nodes
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import pipeline_gateway


def bench(args, storage: tuple[str, dict] = ("", {})) -> dict:
    """``storage``: the [storage] table's TOML and the environment the daemon needs for it ("": SQLite)."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp, FakePlatform() as platform:
        extra = f"[sessions]\nmax_live = {max(args.sessions, args.memory_sessions) + 10}\nidle_s = 600\n"
        gw = pipeline_gateway(Path(tmp), platform, extra=extra + storage[0], watchdog_interval=10.0,
                              max_restarts=1000, ping_deadline=10.0, adapter_extra=BENCH_FAKE_ADAPTER)
        gw.env.update(storage[1])
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
    if not storage[0]:
        out.update(cold_start(args))
    return out


def cold_start(args) -> dict:
    with tempfile.TemporaryDirectory() as tmp, FakePlatform() as platform:
        gw = pipeline_gateway(Path(tmp), platform, extra="[sessions]\nidle_s = 1\n", watchdog_interval=10.0,
                              adapter_extra=BENCH_FAKE_ADAPTER)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--memory-sessions", type=int, default=100)
    parser.add_argument("--cold", type=int, default=5)
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="sqlite")
    args = parser.parse_args()
    machine = {"cpus": os.cpu_count(), "python": sys.version.split()[0], "load": os.getloadavg()[0]}
    results = {}
    if args.backend in ("sqlite", "both"):
        results["sqlite"] = bench(args)
    if args.backend in ("postgresql", "both"):
        from tests.servers.postgresql import PASSWORD_ENV, PostgreSQL
        server = PostgreSQL().start()
        try:
            table = (f'[storage]\nbackend = "postgresql"\ndsn = "{server.dsn(server.create_database())}"\n'
                     f'password_env = "{PASSWORD_ENV}"\n')
            results["postgresql"] = bench(args, (table, {PASSWORD_ENV: server.password}))
        finally:
            server.stop()
    print(json.dumps({"machine": machine, **(results if len(results) > 1 else next(iter(results.values())))},
                     indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
