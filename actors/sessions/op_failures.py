"""What a reply's stream consumer does after one of its platform operations failed, went unanswered, or could not
leave for want of an adapter: pure decisions, no actor.

The adapter has already retried what it may retry on its own (actors/adapters/outbound.after_failure); what reaches
the consumer is an operation that failed for good in the adapter's eyes. The consumer's own choices:

  step          when                                                        then the consumer
  step_aside    the ledger refused the send's intent (lost_claim)           stops: another owner has the reply
  wait_storage  the intent could not be recorded (storage unavailable)      waits for storage, pumps again
  drop_preview  a delete of a superseded preview failed                     forgets it (a preview may stay)
  drop_part     a delete of a part failed                                   forgets the part
  resend_part   an edit found its message gone (the user deleted it)        sends that part again
  retry_marked  a send may have gone through (ambiguous), retries left      marks the reply re-sent, retries
  retry         retryable or flood, retries left                            retries after ``delay``
  edit_failed   an edit of a preview failed                                 counts it; past MAX_EDIT_FAILURES the
                                                                            answer goes out once, complete
  fall_back     an edit of the final text failed                            sends the final text as new messages
  give_up       anything else                                               marks the obligation failed, ends
"""
from __future__ import annotations

from dataclasses import dataclass

OP_TIMEOUT_S = 30.0     # the adapter answers every operation; silence this long means it died with it
SEND_SILENCE_S = 600.0  # ... and a send unanswered this long is taken for lost (past any wait for 429s it may do)
MAX_EDIT_FAILURES = 3
MAX_OP_RETRIES = 5
RETRY_STEP_S = 0.5     # the consumer's own retries wait 0.5 s, 1 s, 1.5 s... (or the platform's retry_after)


@dataclass(frozen=True)
class Next:
    step: str
    delay: float = 0.0
    fall_back: bool = False   # edit_failed: this failure is the one past MAX_EDIT_FAILURES


def after_op_failure(action: str, index: int, error_kind: str | None, retry_after: float, retries: int,
                     final: bool, edit_failures: int, file: bool = False) -> Next:
    """``retries``: the consumer's retries of this reply so far; ``final``: the final text is known;
    ``edit_failures``: failed preview edits so far; ``file``: the part is a file. ``index`` < 0 is a superseded
    preview."""
    if error_kind == "lost_claim":
        return Next("step_aside")
    if error_kind == "storage":
        return Next("wait_storage")
    if action == "delete":
        return Next("drop_preview" if index < 0 else "drop_part")
    if action == "edit" and error_kind == "not_found":
        return Next("resend_part")
    if action == "send" and error_kind == "ambiguous" and retries < MAX_OP_RETRIES:
        return Next("retry_marked", RETRY_STEP_S * (retries + 1))
    if error_kind in ("retryable", "flood") and retries < MAX_OP_RETRIES:
        # Before any fallback: a 429 storm outlasting the adapter's own waits passes, and a final edit that falls
        # back to a new message would leave its preview behind.
        return Next("retry", max(retry_after, RETRY_STEP_S * (retries + 1)))
    if file and action == "send" and error_kind in ("permanent", "too_long", "formatting", "not_found"):
        return Next("file_as_line")    # the platform will not take this file: the reply says so in its place
    if action == "edit" and not final:
        return Next("edit_failed", fall_back=edit_failures + 1 >= MAX_EDIT_FAILURES)
    if action == "edit":
        return Next("fall_back")
    return Next("give_up")


def after_silence(action: str, waited_s: float) -> str:
    """An operation unanswered for ``waited_s`` (a multiple of OP_TIMEOUT_S). A slow answer is not a lost one: an
    edit or delete may safely go again (``resend``); a send may not (it would show twice), so it is waited for
    (``wait``) until SEND_SILENCE_S, then taken for lost (``lost``: looked for, or sent again marked)."""
    if action != "send":
        return "resend"
    return "wait" if waited_s < SEND_SILENCE_S else "lost"


class AdapterWait:
    """How long a reply has waited for the directory to name its adapter, and what that calls for at each look:
    ``wait`` (it is restarting: that takes well under the liveness bound, [sessions] answer_bound_s), then past
    ``bound_s`` ``report`` once (stalled: logged, counted) and ``ask`` after that (the directory asked for again,
    rate-limited by the asker)."""

    def __init__(self, bound_s: float):
        self.bound_s = bound_s
        self.since: float | None = None
        self.reported = False

    def found(self) -> None:
        self.since = None

    def missing(self, now: float) -> str:
        if self.since is None:
            self.since = now
        if now - self.since < self.bound_s:
            return "wait"
        if not self.reported:
            self.reported = True
            return "report"
        return "ask"
