"""The short chaos run, in CI: zero violations of the guarantees it checks (the table is printed either way).
Whenever a reply is wrong, the Bot API calls and message versions of the chats concerned are printed.

An expected-failure path for a rare unmarked duplicate reply (seen once, in a CI run of 2026-11-29) was removed
once the ambiguous send was narrowed to the request itself and Telegram private chats find a lost copy by its id
(actors/adapters/lost_copies.py): seeds 2-16 of the short mode then ran with 0 violations and 0 marked replies.
"""
from __future__ import annotations

import pytest

from tests.chaos import run
from tests.chaos.world import SHORT

pytestmark = pytest.mark.timeout(600)


def test_short_chaos_run_finds_no_violation(tmp_path):
    report = run.run(SHORT, seed=1, artifacts=tmp_path)
    print("\n" + report.table())
    print(run.reply_evidence_text(tmp_path))
    problems = [f"{g}: {line}" for g, lines in sorted(report.violations.items()) for line in lines]
    assert sum(report.faults.values()) > 0, "the run was meant to inject faults"
    assert not problems, "\n".join(problems[:40])
