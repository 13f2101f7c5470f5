"""Runtime figures of the daemon: start-to-ready, restart latency after SIGKILL, memory per actor process.

    python bench/bench_runtime.py [--starts 10] [--kills 60]

* start-to-ready: ``run_gateway.py start`` until every actor of the tree is up (the launcher's own measure, from
  the runtime file, and the wall time of the ``start`` command).
* restart latency: SIGKILL of a random non-supervisor child of the root, until its replacement has taken its
  Started message and answered its supervisor (ChildReady; the supervisor's clock, read back from the tree).
* memory: USS and PSS of every actor process (psutil, from /proc/PID/smaps_rollup).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from supervision import config as config_mod  # noqa: E402
from supervision import tree as tree_mod  # noqa: E402
from supervision.admin import AdminClient  # noqa: E402
from tests.daemon import Gateway  # noqa: E402

KILLABLE = ("watchdog", "sweeper", "ticker")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def bench_starts(n: int) -> dict:
    launcher, wall = [], []
    for _ in range(n):
        with tempfile.TemporaryDirectory() as tmp:
            gw = Gateway(Path(tmp), watchdog_interval=5.0)
            t = time.monotonic()
            info = gw.start()
            wall.append(time.monotonic() - t)
            launcher.append(info["ready_after_s"])
            gw.cli("stop")
            gw.kill_everything()
    return {"launcher_ready_s_p50": statistics.median(launcher), "start_command_s_p50": statistics.median(wall),
            "start_command_s_max": max(wall)}


def bench_kills(n: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        # period_s 0.5: each kill starts a fresh restart window, so the figure is the restart itself and not the
        # exponential backoff a child that keeps dying earns (base 10 ms, cap 200 ms in this configuration).
        gw = Gateway(Path(tmp), watchdog_interval=30.0, max_restarts=10_000, period_s=0.5)
        gw.start()
        os.environ["GATEWAY_STATE_DIR"] = str(gw.state)
        client = AdminClient(config_mod.load(str(gw.config)))
        latencies = []
        try:
            for _ in range(n):
                name = random.choice(KILLABLE)
                old = _node(client, name)
                killed_at = time.time()
                os.kill(old.pid, signal.SIGKILL)
                time.sleep(0.1)  # a walk that starts before the exit is noticed waits out a describe deadline
                while True:
                    node = _node(client, name)
                    if node is not None and node.pid and node.pid != old.pid and node.state == "running":
                        break
                    time.sleep(0.005)
                # started_at is when the supervisor got the new child's ChildReady: killed -> answering.
                latencies.append(node.started_at - killed_at)
                time.sleep(0.5)  # let the restart intensity window slide: we measure latency, not give-up
            memory = _memory(client)
        finally:
            gw.cli("stop")
            gw.kill_everything()
    return {"kills": n, "restart_ms_p50": round(percentile(latencies, 50) * 1000, 1),
            "restart_ms_p99": round(percentile(latencies, 99) * 1000, 1),
            "restart_ms_max": round(max(latencies) * 1000, 1), **memory}


def _node(client, name):
    for node, _, _ in tree_mod.walk(client.tree()):
        if node.name == name:
            return node
    return None


def _memory(client) -> dict:
    uss, pss = [], []
    for node, _, _ in tree_mod.walk(client.tree()):
        info = psutil.Process(node.pid).memory_full_info()
        uss.append(info.uss / 2**20)
        pss.append(getattr(info, "pss", info.uss) / 2**20)
    return {"actors": len(pss), "pss_mib_mean": round(statistics.mean(pss), 2),
            "uss_mib_mean": round(statistics.mean(uss), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--kills", type=int, default=60)
    args = parser.parse_args()
    settings = {"supervision": "max_restarts=10000 period_s=0.5 (restart latency without accumulated backoff)"}
    starts = bench_starts(args.starts)
    kills = bench_kills(args.kills)
    print(json.dumps({"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}, **settings, **starts,
                      **kills}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
