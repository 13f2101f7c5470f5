"""The short chaos run, in CI: zero violations of the guarantees it checks (the table is printed either way)."""
from __future__ import annotations

import pytest

from tests.chaos import run
from tests.chaos.world import SHORT

pytestmark = pytest.mark.timeout(600)


def test_short_chaos_run_finds_no_violation():
    report = run.run(SHORT, seed=1)
    print("\n" + report.table())
    problems = [f"{g}: {line}" for g, lines in sorted(report.violations.items()) for line in lines]
    assert sum(report.faults.values()) > 0, "the run was meant to inject faults"
    assert not problems, "\n".join(problems[:40])
