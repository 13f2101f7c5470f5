"""A crash-looping deploy over many seeds: 20 chats streaming, three kill -9 of the daemon within 15 s, each
restart 0.2 to 1.5 s later (tests/pipeline/kill_storm.py says what is judged; the suite runs seed 1).

    python bench/kill_storm.py [--seeds 10] [--first 1] [--chats 20] [--platform fake|telegram]

Prints one line per seed (kills, when every message was answered, marked answers, lost sends resolved, violations)
and exits non-zero on any violation.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.pipeline.kill_storm import storm


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10, help="how many seeds to run (10)")
    parser.add_argument("--first", type=int, default=1, help="the first seed (1)")
    parser.add_argument("--chats", type=int, default=20, help="chats, five messages each (20)")
    parser.add_argument("--platform", choices=("fake", "telegram"), default="fake",
                        help="the generic fake, or private chats of the fake Bot API (default fake)")
    args = parser.parse_args()
    print("| seed | kills at (s) | all answered at (s) | marked | lost copies found / never landed | violations |\n"
          "|---:|---|---:|---:|---:|---:|")
    failed = 0
    for seed in range(args.first, args.first + args.seeds):
        with tempfile.TemporaryDirectory() as tmp:
            report = storm(Path(tmp), seed, chats=args.chats, platform_kind=args.platform)
        failed += bool(report.violations)
        print(f"| {seed} | {report.kills} | {report.answered_s} | {report.marked} | "
              f"{report.lost_found} / {report.lost_absent} | {len(report.violations)} |", flush=True)
        for line in report.violations:
            print(f"    {line}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
