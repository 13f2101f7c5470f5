"""Asking for a tool call's approval and reading the answer, as pure functions (docs/approvals.md): the question's
text, a typed answer (``approve 7KQ2``), a button's data, whether an answerer may answer, what they are told, what
the model is told, and what a session does next with each stored approval (also after a restart).

Buttons carry the approval's id, not a MAC: the id is 96 random bits looked up in storage (storage/approvals.py),
so it cannot be forged into another approval's, and it needs no secret to keep across restarts and hosts. The
button's verdict is no secret: whoever may press one button of a question may press the other.

A typed answer's code only tells apart the pending questions of one session: a typed answer is read only in the
session that asked (whoever can write there may answer, under ``approvers = "chat"``), so the code needs no
strength against guessing; a button's id does, since a click is routed by it alone.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from actors.approvals.rules import policy_name
from common.redact import redact
from storage.access import CODE_ALPHABET
from storage.approvals import CODE_LENGTH, Answered, Approval, ApprovalState

BUTTON_PREFIX = "ap"
MAX_BUTTON_DATA_BYTES = 64            # Telegram's callback_data; the other platforms allow more
APPROVAL_ID = r"[A-Za-z0-9_-]{16}"    # storage/approvals.py new_approval_id: token_urlsafe(12)
BUTTON_DATA = re.compile(rf"{BUTTON_PREFIX}:({APPROVAL_ID}):([yn])")
BUTTON_VERDICTS = {"y": "approve", "n": "deny"}
ANSWER_WORDS = ("approve", "deny")
MAX_ANSWER_CHARS = 64                 # longer than any well-formed answer: read no further
# "/approve@my_bot 7KQ2": a leading '/' and Telegram's @bot suffix are allowed around the word.
FIRST_WORD = re.compile(r"/?([A-Za-z]+)(?:@\w+)?(?=\s|$)")
CODE = re.compile(rf"[{CODE_ALPHABET}]{{{CODE_LENGTH}}}")
MAX_SHOWN_ARGUMENTS = 300             # characters of the arguments a question shows
OPERATOR = "operator"                 # answered_by of the operator's answers

HOW_TO_ANSWER = "To answer, write \u201capprove CODE\u201d or \u201cdeny CODE\u201d with the code the question gave."
NOT_YOURS = "This question is not yours to answer."
OPERATOR_ONLY = "Only the operator can answer this question."
UNKNOWN_BUTTON = "This button is no longer valid."
BUTTON_LABELS = (("Approve", "approve"), ("Deny", "deny"))
# The last sentence of a question on a platform with buttons (question_text): what tells a send or an edit of a
# reply's text that it is a question, and which (its code), so the buttons go with it (``pressable_code``).
PRESSABLE = re.compile(rf"Press Approve or Deny, or reply \u201capprove ({CODE.pattern})\u201d or "
                       rf"\u201cdeny \1\u201d \(within [^)]*\)\.\s*$")


@dataclass(frozen=True)
class TextAnswer:
    """A message read as an answer: ``verdict`` and ``code``, or ``refusal`` (what the chat is told) for a
    message that tried to answer and cannot be read. The message is not given to the model in either case."""
    verdict: str = ""                 # approve | deny ("" when refused)
    code: str = ""                    # upper case
    refusal: str = ""


@dataclass(frozen=True)
class ButtonPress:
    approval_id: str
    verdict: str                      # approve | deny


@dataclass(frozen=True)
class Answerer:
    """Who answers: a user of a chat (``platform`` is the adapter's name, as in ``Source``) or the operator."""
    platform: str = ""
    chat_id: str = ""
    user_id: str = ""
    operator: bool = False

    @property
    def name(self) -> str:
        """What ``answered_by`` records."""
        return OPERATOR if self.operator else f"{self.platform}:{self.user_id}"


@dataclass(frozen=True)
class NextStep:
    """What a session does with one of its stored approvals: ``wait`` (``wait_s``, for the answer or the
    deadline), ``expire`` (the deadline passed: expire_due), ``run`` (approved: start_execution, then the tool),
    or tell the model ``denied`` / ``expired`` / ``cut`` (finish with that outcome); ``none`` once done."""
    action: str
    wait_s: float = 0.0


def parse_text_answer(text: str) -> Optional[TextAnswer]:
    """A chat message read as an answer; None when it does not try to be one (its first word is neither approve
    nor deny), so it goes to the model as any message. Case does not matter."""
    stripped = text.strip()
    first = FIRST_WORD.match(stripped[:MAX_ANSWER_CHARS])
    if first is None or first.group(1).lower() not in ANSWER_WORDS:
        return None
    rest = stripped[first.end():].split()
    if len(stripped) > MAX_ANSWER_CHARS or len(rest) != 1 or not CODE.fullmatch(rest[0].upper()):
        return TextAnswer(refusal=HOW_TO_ANSWER)
    return TextAnswer(first.group(1).lower(), rest[0].upper())


def button_data(approval_id: str, verdict: str) -> str:
    """What an Approve / Deny button carries (Telegram callback_data, a Discord custom_id, a Slack value)."""
    if not re.fullmatch(APPROVAL_ID, approval_id) or verdict not in ANSWER_WORDS:
        raise ValueError(f"no button for approval {approval_id!r} and verdict {verdict!r}")
    return f"{BUTTON_PREFIX}:{approval_id}:{'y' if verdict == 'approve' else 'n'}"


def buttons_for(approval_id: str) -> tuple:
    """The question's buttons, one row: ((label, data), ...), Approve then Deny."""
    return tuple((label, button_data(approval_id, verdict)) for label, verdict in BUTTON_LABELS)


def pressable_code(text: str) -> Optional[str]:
    """The code of the question ``text`` ends with, when it is one asked with buttons (None otherwise). The text is
    what the delivery ledger keeps of a reply (its chunks), so a send of it after a crash finds the code again, and
    with it the stored approval whose buttons it carries (the question is the last sentence: its last chunk)."""
    found = PRESSABLE.search(text[-400:]) if isinstance(text, str) else None
    return found.group(1) if found else None


def click_notice(approval: Optional[Approval], answerer: Answerer, verdict: str, now: float) -> tuple[str, bool]:
    """What a click is told at once (Telegram's answerCallbackQuery), and whether it is kept as an answer: the
    verdict taken (``Approved`` / ``Denied``), or why not, from what storage says at that moment: unknown, not
    the clicker's, already answered, expired."""
    if approval is None:
        return UNKNOWN_BUTTON, False
    if why := refusal_for(approval, answerer):
        return why, False
    if approval.state != ApprovalState.PENDING or approval.deadline <= now:
        return answer_notice(Answered(False, approval)), False
    return ("Approved" if verdict == "approve" else "Denied"), True


def parse_button_data(data: str) -> Optional[ButtonPress]:
    """A button's data read back; None for data that is not an approval's (another button, or a forgery's
    shape): the click is then answered ``UNKNOWN_BUTTON``."""
    found = BUTTON_DATA.fullmatch(data) if isinstance(data, str) and len(data) <= MAX_BUTTON_DATA_BYTES else None
    return ButtonPress(found.group(1), BUTTON_VERDICTS[found.group(2)]) if found else None


def refusal_for(approval: Approval, answerer: Answerer) -> str:
    """Why ``answerer`` may not answer ``approval`` ("" when they may): the operator always may; under
    ``approvers = "chat"`` a user of the chat that asked, on the platform that asked, may."""
    if answerer.operator:
        return ""
    if approval.approvers == OPERATOR:
        return OPERATOR_ONLY
    if not answerer.user_id or (answerer.platform, answerer.chat_id) != (approval.platform, approval.chat_id):
        return NOT_YOURS
    return ""


def clock(at: float) -> str:
    return time.strftime("%H:%M UTC", time.gmtime(at))


def duration(seconds: float) -> str:
    """``90 seconds``, ``10 minutes``, ``24 hours``: how long a question waits, in words."""
    seconds = round(seconds)
    if seconds < 120:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    if seconds < 120 * 60:
        return f"{round(seconds / 60)} minutes"
    return f"{round(seconds / 3600)} hours"


def _answered_by(approval: Approval) -> str:
    return "the operator" if approval.answered_by == OPERATOR else str(approval.answered_by)


def answer_notice(answered: Answered) -> str:
    """What the person who answered is told (a Telegram answerCallbackQuery's text, else a short reply): their
    answer counted, or what came first (a double click, a second person, the deadline)."""
    approval = answered.approval
    if approval is None:
        return UNKNOWN_BUTTON
    name = policy_name(approval.tool_name)
    if answered.won:
        return f"Approved: {name} runs now." if approval.answer == "approve" else f"Denied: {name} will not run."
    if approval.outcome == "withdrawn":
        return f"This question was withdrawn when the conversation was reset; {name} was not run."
    if approval.answer is None:   # expired, before any answer
        return f"This question expired at {clock(approval.deadline)}; {name} was not run."
    verdict = "approved" if approval.answer == "approve" else "denied"
    return f"Already answered: {verdict} by {_answered_by(approval)}."


def shown_arguments(arguments: str, secrets: Iterable[str] = ()) -> str:
    """The call's arguments as a question shows them: secrets redacted (G6) before anything is cut, so no
    fragment of one is left; one line; at most ``MAX_SHOWN_ARGUMENTS`` characters."""
    line = " ".join(redact(arguments, list(secrets)).split())
    return line if len(line) <= MAX_SHOWN_ARGUMENTS else line[:MAX_SHOWN_ARGUMENTS - 1] + "\u2026"


def question_text(approval: Approval, buttons: bool, secrets: Iterable[str] = ()) -> str:
    """The question the chat is sent. ``buttons``: the message carries Approve / Deny buttons too."""
    waits = duration(approval.deadline - approval.asked_at)
    asked = (f"The assistant wants to run {policy_name(approval.tool_name)} with "
             f"{shown_arguments(approval.arguments, secrets) or '{}'}.")
    if approval.approvers == OPERATOR:
        return f"{asked} It waits for the operator's approval (within {waits})."
    reply = f"reply \u201capprove {approval.code}\u201d or \u201cdeny {approval.code}\u201d"
    how = f"Press Approve or Deny, or {reply}" if buttons else reply[0].upper() + reply[1:]
    return f"{asked} {how} (within {waits})."


def settled_line(approval: Optional[Approval], now: float, mention: Callable[[str], str] = str) -> Optional[str]:
    """What became of a question, in one line: "Approved by WHO." / "Denied by WHO." (WHO: ``mention(user id)``,
    how the platform names a user, or "the operator"), "Expired: ...", "Withdrawn: ...". None while it still waits
    (pending, within its deadline), or for an unknown approval."""
    if approval is None:
        return None
    name = policy_name(approval.tool_name)
    if approval.answer is not None:
        user = answerer_id(approval)
        who = mention(user) if user else _answered_by(approval)
        return f"{'Approved' if approval.answer == 'approve' else 'Denied'} by {who}."
    if approval.outcome == "withdrawn":
        return f"Withdrawn when the conversation was reset: {name} was not run."
    if approval.state != ApprovalState.PENDING or approval.deadline <= now:
        return f"Expired: no one answered, {name} was not run."
    return None


def settled_question(text: str, approval: Optional[Approval], now: float,
                     mention: Callable[[str], str] = str) -> Optional[str]:
    """The question ``text`` as it reads once settled: its last sentence (how to answer) replaced by
    ``settled_line``. None while it still waits, or for an unknown approval: the message is left as it is."""
    line = settled_line(approval, now, mention)
    return None if line is None else f"{PRESSABLE.sub('', text).rstrip()}\n\n{line}"


def answerer_id(approval: Approval) -> str:
    """The platform's user id of who answered (``answered_by`` is ``platform:user``); "" for the operator or none."""
    answered_by = str(approval.answered_by or "")
    return "" if answered_by == OPERATOR or ":" not in answered_by else answered_by.split(":", 1)[1]


def model_result(tool_name: str, outcome: str, timeout_s: float = 0.0, reason: str = "") -> str:
    """The tool result the model reads for a call that did not run as asked: ``denied``, ``expired`` (after
    ``timeout_s``), ``cut`` (started, then the gateway restarted: outcome unknown, never run again), ``refused``
    (not asked about at all, for ``reason``)."""
    name = policy_name(tool_name)
    texts = {
        "denied": f"Approval was denied for this call of {name}; it was not run.",
        "expired": f"No one answered the request to run {name} within {duration(timeout_s)}; it was not run.",
        "cut": f"{name} was started, but the gateway restarted while it ran: whether it completed is unknown. "
               "Check before calling it again.",
        "refused": f"{name} needs approval, but {reason}; it was not run.",
    }
    if outcome not in texts:
        raise ValueError(f"no text for the outcome {outcome!r}")
    return texts[outcome]


def next_step(approval: Approval, now: float) -> NextStep:
    """What the session does with ``approval`` now: the same answer whether it has just been asked or the session
    has just been restarted, since it reads only what storage holds (the deadline is the stored one)."""
    state = approval.state
    if state == ApprovalState.PENDING:
        left = approval.deadline - now
        return NextStep("wait", left) if left > 0 else NextStep("expire")
    if state == ApprovalState.APPROVED:
        return NextStep("run")
    if state == ApprovalState.EXECUTING:   # started before a crash: never run again; the model hears so once
        return NextStep("cut")
    if state in (ApprovalState.DENIED, ApprovalState.EXPIRED):
        return NextStep(str(state))
    return NextStep("none")
