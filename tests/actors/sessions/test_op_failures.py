"""actors/sessions/op_failures.py: what a stream consumer does after a failed, unanswered or unroutable platform
operation."""
from __future__ import annotations

import pytest

from actors.sessions.op_failures import (MAX_EDIT_FAILURES, MAX_OP_RETRIES, OP_TIMEOUT_S, SEND_SILENCE_S, AdapterWait,
                                        Next, after_op_failure, after_silence)

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize("action, index, kind, retry_after, retries, final, edit_failures, expected", [
    ("send", 0, "lost_claim", 0.0, 0, False, 0, Next("step_aside")),
    ("send", 0, "storage", 0.0, 9, True, 0, Next("wait_storage")),
    ("delete", -1, "permanent", 0.0, 0, True, 0, Next("drop_preview")),
    ("delete", 2, "retryable", 0.0, 0, True, 0, Next("drop_part")),     # a delete is never retried here
    ("edit", 1, "not_found", 0.0, 0, True, 0, Next("resend_part")),
    ("send", 0, "ambiguous", 0.0, 0, False, 0, Next("retry_marked", 0.5)),
    ("send", 0, "ambiguous", 0.0, 2, False, 0, Next("retry_marked", 1.5)),
    ("send", 0, "ambiguous", 0.0, MAX_OP_RETRIES, False, 0, Next("give_up")),
    ("edit", 0, "flood", 7.0, 0, True, 0, Next("retry", 7.0)),          # the platform's retry_after when longer
    ("send", 0, "retryable", 0.0, 3, True, 0, Next("retry", 2.0)),
    ("edit", 0, "retryable", 0.0, MAX_OP_RETRIES, False, 0, Next("edit_failed")),   # out of retries: an edit fail
    ("edit", 0, "formatting", 0.0, 0, False, MAX_EDIT_FAILURES - 2, Next("edit_failed")),
    ("edit", 0, "formatting", 0.0, 0, False, MAX_EDIT_FAILURES - 1, Next("edit_failed", fall_back=True)),
    ("edit", 0, "too_long", 0.0, 0, True, 0, Next("fall_back")),
    ("send", 0, "permanent", 0.0, 0, True, 0, Next("give_up")),
    ("send", 0, "flood", 1.0, MAX_OP_RETRIES, True, 0, Next("give_up")),
])
def test_each_failure_has_one_next_step(action, index, kind, retry_after, retries, final, edit_failures, expected):
    assert after_op_failure(action, index, kind, retry_after, retries, final, edit_failures) == expected


@pytest.mark.parametrize("kind, expected", [
    ("permanent", Next("file_as_line")), ("too_long", Next("file_as_line")),   # the platform will not take it
    ("retryable", Next("retry", 0.5)), ("ambiguous", Next("retry_marked", 0.5)),
], ids=["permanent", "too_long", "retryable", "ambiguous"])
def test_a_file_the_platform_refuses_becomes_a_line_and_other_failures_go_as_for_text(kind, expected):
    assert after_op_failure("send", 1, kind, 0.0, 0, True, 0, file=True) == expected


# ---------------------------------------------------------------------------------- silence and missing adapters

@pytest.mark.parametrize("action, waited_s, expected", [
    ("edit", OP_TIMEOUT_S, "resend"),            # an edit or delete may safely go again
    ("delete", OP_TIMEOUT_S, "resend"),
    ("send", OP_TIMEOUT_S, "wait"),              # a send may not: it would show twice
    ("send", SEND_SILENCE_S - OP_TIMEOUT_S, "wait"),
    ("send", SEND_SILENCE_S, "lost"),            # past the silence bound: looked for, or sent again marked
])
def test_an_unanswered_operation_is_sent_again_waited_for_or_taken_for_lost(action, waited_s, expected):
    assert after_silence(action, waited_s) == expected


def test_a_reply_without_its_adapter_waits_then_is_reported_once_then_keeps_asking():
    wait = AdapterWait(bound_s=60.0)
    assert [wait.missing(t) for t in (100.0, 130.0, 159.9)] == ["wait"] * 3
    assert wait.missing(160.0) == "report"
    assert [wait.missing(t) for t in (170.0, 500.0)] == ["ask", "ask"]
    wait.found()   # the adapter is back: a later absence starts its own wait, and is not reported again
    assert [wait.missing(600.0), wait.missing(659.0), wait.missing(661.0)] == ["wait", "wait", "ask"]
