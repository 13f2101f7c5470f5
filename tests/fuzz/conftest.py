"""Prints, at the end of a run that included fuzz tests, how many cases each adapter saw and how many it rejected."""
from __future__ import annotations

import json
import os

from tests.fuzz.strategies import EXAMPLES, LONG_EXAMPLES, TALLY


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not TALLY:
        return
    mode = f"long, {LONG_EXAMPLES} examples per property" if LONG_EXAMPLES else f"CI, {EXAMPLES} per property"
    terminalreporter.section(f"fuzz cases per adapter ({mode})")
    for adapter in sorted(TALLY):
        counts = TALLY[adapter]
        terminalreporter.write_line(f"{adapter:<22} cases {counts['cases']:>7}  rejected {counts['rejected']:>7}  "
                                    f"accepted {counts['accepted']:>7}")
    report = os.environ.get("GATEWAY_FUZZ_REPORT")
    if report:
        with open(report, "w") as out:
            json.dump({adapter: dict(counts) for adapter, counts in TALLY.items()}, out, indent=1)
