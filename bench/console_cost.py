"""What the console costs an idle gateway: memory (PSS) and CPU with no browser open.

    python bench/console_cost.py [--rounds 3] [--idle 30]

Each round starts the same gateway twice, with [console] enabled (the default) and disabled, alternating which
goes first, waits until every actor is up and the gateway has settled, then reads:

* PSS of the launcher and every process under it (/proc/PID/smaps_rollup through psutil: a page shared after
  fork counts once across the processes, so the sum is what the gateway costs the machine), and the console
  process's own PSS (the console is one more forked process; nothing else of the gateway changes with it);
* CPU seconds (user + system) over ``--idle`` seconds with nobody connected: of the console process, and of the
  whole daemon with and without it. The gateway runs with the default watchdog interval (5 s): every actor,
  the console too, answers its pings, and that is all an idle console does (its live pages' timers run only
  while a page is open).

For scale, the PSS of the smallest actor process (the ticker): what any forked actor process costs at least.

Prints JSON: per round and the medians. Nothing here opens a page: "idle" means no browser at all.
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

import psutil

from bench.benchlib import pss_mib, process_tree_cpu_s, process_tree_pss
from tests.gateway import Gateway, nodes

SETTLE_S = 5.0


def measure(enabled: bool, idle_s: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="console-cost-") as tmp:
        gw = Gateway(Path(tmp), extra_toml=f"[console]\nenabled = {str(enabled).lower()}\nport = 0\n"
                                            '[adapters.web]\ntype = "webchat"\nport = 0\n', test_hooks=False,
                     watchdog_interval=5.0, ping_deadline=10.0)   # the defaults: an idle gateway as it runs
        try:
            gw.start()
            gw.wait_ready(60)
            time.sleep(SETTLE_S)   # the start's own work (imports, first walks) is not what idle costs
            pids = {n["name"]: n["pid"] for n in nodes(gw.tree()) if n["pid"]}
            console, ticker = pids.get("console"), pids["ticker"]
            time.sleep(1.0)        # the `tree` command's walk is over too
            pss = process_tree_pss(gw.launcher_pid)
            cpu_before = process_tree_cpu_s(gw.launcher_pid)
            console_cpu_before = _cpu(console)
            time.sleep(idle_s)
            return {"console": enabled, "processes": len(pss), "pss_mib": round(sum(pss.values()), 2),
                    "console_pss_mib": round(pss_mib(console), 2) if console else None,
                    "smallest_actor_pss_mib": round(pss_mib(ticker), 2),   # the ticker: a forked process's floor
                    "cpu_s_idle": round(process_tree_cpu_s(gw.launcher_pid) - cpu_before, 3),
                    "console_cpu_s_idle": round(_cpu(console) - console_cpu_before, 3) if console else None,
                    "idle_s": idle_s}
        finally:
            gw.cli("stop")
            gw.kill_everything()


def _cpu(pid) -> float:
    if not pid:
        return 0.0
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of idle measured per gateway")
    args = parser.parse_args()
    rounds = []
    for i in range(args.rounds):
        order = (True, False) if i % 2 == 0 else (False, True)
        runs = {enabled: measure(enabled, args.idle) for enabled in order}
        rounds.append({"with": runs[True], "without": runs[False],
                       "pss_delta_mib": round(runs[True]["pss_mib"] - runs[False]["pss_mib"], 2)})

    def median(values):
        return round(statistics.median(values), 3)
    print(json.dumps({
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                    "load_1m": round(os.getloadavg()[0], 2)},
        "rounds": rounds,
        "median": {"pss_with_mib": median([r["with"]["pss_mib"] for r in rounds]),
                   "pss_without_mib": median([r["without"]["pss_mib"] for r in rounds]),
                   "pss_delta_mib": median([r["pss_delta_mib"] for r in rounds]),
                   "console_process_pss_mib": median([r["with"]["console_pss_mib"] for r in rounds]),
                   "smallest_actor_pss_mib": median([r["with"]["smallest_actor_pss_mib"] for r in rounds]),
                   "console_cpu_s_per_idle": median([r["with"]["console_cpu_s_idle"] for r in rounds]),
                   "daemon_cpu_s_with": median([r["with"]["cpu_s_idle"] for r in rounds]),
                   "daemon_cpu_s_without": median([r["without"]["cpu_s_idle"] for r in rounds])},
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
