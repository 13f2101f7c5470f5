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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.benchlib import bench_kills, bench_starts


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
