"""python -m tests.chaos [--mode short|long] [--seed N]: one chaos run; prints the table; exits 1 on any violation."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.chaos import run
from tests.chaos.world import LONG, SHORT


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.chaos", description="Drive the real daemon through the fake Telegram server and web "
        "chat visitors while injecting faults (kill -9 of actors and of the daemon, 429 storms, dropped "
        "connections, failing and slow model turns, a full disk, a held SQLite lock), then check the guarantees "
        "from the platforms' side. Prints a table of faults injected and violations found; exits 1 on any "
        "violation. The disk-full fault needs root (it mounts a small tmpfs).")
    parser.add_argument("--mode", choices=("short", "long"), default="short",
                        help="short: what CI runs (a few minutes); long: hundreds of chats, many more faults")
    parser.add_argument("--seed", type=int, default=1, help="the run's random seed (default 1)")
    parser.add_argument("--artifacts", type=Path, metavar="DIR",
                        help="write the gateway's log and the report (table, fault log, violations) there")
    args = parser.parse_args()
    report = run.run(SHORT if args.mode == "short" else LONG, args.seed, artifacts=args.artifacts)
    print(f"\nchaos run, mode {args.mode}, seed {args.seed}, {report.elapsed_s:.0f}s\n")
    print(report.table())
    for guarantee, lines in sorted(report.violations.items()):
        for line in lines[:20]:
            print(f"VIOLATION {guarantee}: {line}")
    if args.artifacts is not None:
        (args.artifacts / "report.md").write_text(
            f"chaos run, mode {args.mode}, seed {args.seed}, {report.elapsed_s:.0f}s\n\n{report.table()}\n\n"
            + "\n".join(report.log) + "\n\n"
            + "\n".join(f"VIOLATION {g}: {line}" for g, lines in sorted(report.violations.items()) for line in lines)
            + "\n")
    return 1 if report.total_violations else 0


if __name__ == "__main__":
    sys.exit(main())
