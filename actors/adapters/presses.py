"""Approve / Deny buttons on a tool approval's question, shared by the adapters whose platform has buttons
(docs/approvals.md): which buttons a send or an edit carries, how a press is judged before it is stored, and the
platform's acknowledgement of each press, sent once per press in a life and never awaited by the intake.

Nothing here is stored apart from what the rest of the gateway stores: the buttons are found again from the
question's text (the reply's chunk in the delivery ledger) and the approval row committed with it; a press that
may answer becomes an inbound row of the adapter's round, deduplicated on the press's platform id, so a press
delivered twice (before and after a kill -9) is one row. A press's acknowledgement is best effort: a lost one costs
the presser a spinner or an unchanged message, never an answer.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

from actors.profiles.model_buttons import model_buttons, model_of_button
from actors.approvals.answers import (NOT_YOURS, Answerer, buttons_for, click_notice, parse_button_data,
                                      pressable_code, refusal_for, settled_question)
from actors.messages import PlatformOp
from storage.approvals import Approval

MAX_ACKS_IN_FLIGHT = 64        # acknowledgements at once; past it a press's spinner stops by itself
REMEMBERED_PRESSES = 4096      # the presses acknowledged in this life: each is acknowledged once
SETTLE_WAIT_S = 120.0          # how long a stored press waits for the session's decision before the edit is left
MAX_SETTLE_WATCHES = 64        # questions watched at once for their edit; past it the edit waits for a later press
STORED, SETTLED, REFUSED = "stored", "settled", "refused"


@dataclass(frozen=True)
class JudgedPress:
    """A press read against storage: ``raw`` (with the answer's words under the answer field when ``kept``), what
    the presser is told, and the approval its button names (None: unknown, or a /model button's press)."""
    raw: Any
    notice: str
    approval: Optional[Approval]
    kept: bool


def press_outcome(judged: JudgedPress, answerer: Answerer, question: str, now: float,
                  mention: Callable[[str], str] = str) -> tuple[str, str]:
    """What a press's platform answer is: (``stored``, "") for a press kept as an answer (the question is edited
    once the session has decided); (``settled``, the question's new text) for a press on a question already
    answered, expired or withdrawn, by someone who may answer it (the message then shows what became of it, its
    buttons gone); (``refused``, why) for any other press, told to the presser alone where the platform can."""
    if judged.kept:
        return STORED, ""
    approval = judged.approval
    if approval is not None and judged.notice != NOT_YOURS and not refusal_for(approval, answerer):
        settled = settled_question(question, approval, now, mention)
        if settled is not None:
            return SETTLED, settled
    return REFUSED, judged.notice


class ButtonPresses:
    """Mixin for a chat adapter (uses ``store``, ``name``, ``normalise``, ``event_profile``, ``intake``, ``say``,
    ``clean_error``); ``init_presses()`` from its ``__init__``."""

    def init_presses(self) -> None:
        self._answered_presses: OrderedDict[str, None] = OrderedDict()
        self._acks_in_flight: set[asyncio.Task] = set()
        self._settle_watches: dict[str, asyncio.Task] = {}   # approval id -> the task that edits it once settled

    async def question_buttons(self, op: PlatformOp) -> tuple:
        """Approve / Deny for a text that ends with a tool approval's question (answers.py ``pressable_code``), ()
        for any other. Read from what survives a kill -9: the text is the reply's chunk in the delivery ledger, and
        the approval row (its id: the buttons' data) was committed with it, so a question sent again after a crash,
        by the session or the sweeper, carries the same buttons."""
        code = pressable_code(op.text)
        if code is None:
            return model_buttons(op.text)   # /model's listing: a button per model to switch to
        approval = await self.store.approvals.for_question(self.name, str(op.chat_id), code)
        return buttons_for(approval.approval_id) if approval is not None else ()

    async def judge_press(self, raw: Any, answerer: Answerer, data: str, answer_field: str) -> JudgedPress:
        """A press that may answer its question (a user of the asking chat, the question pending and within its
        deadline) gets the answer's words (``approve CODE``) under ``answer_field``, so the intake stores it as the
        presser's typed answer would be; any other is only told why (unknown button, not theirs, answered,
        expired)."""
        model = model_of_button(data)
        if model is not None:   # the presser's /model NAME, in the button's chat (as typed, anyone there may)
            return JudgedPress(dict(raw, **{answer_field: f"/model {model}"}), f"Switching to {model}", None, True)
        press = parse_button_data(data)
        approval = await self.store.approvals.get(press.approval_id) if press is not None else None
        notice, kept = click_notice(approval, answerer, press.verdict if press is not None else "", time.time())
        if not kept:
            return JudgedPress(raw, notice, approval, False)
        answered = dict(raw, **{answer_field: f"{press.verdict} {approval.code}"})
        if self.conversation_of(answered) != approval.session_key:
            # The presser's row would go to a conversation of their own (one per user in groups), where the code
            # names nothing: refused, as a typed answer there finds nothing to answer.
            return JudgedPress(raw, NOT_YOURS, approval, False)
        return JudgedPress(answered, notice, approval, True)

    def conversation_of(self, raw: Any) -> Optional[str]:
        """The session key the intake would store ``raw`` under (None: none can be made of it)."""
        try:
            event = self.normalise(raw)
            source = dataclasses.replace(event.source, platform=self.name)
            return self.intake.addressing.keyed(source, self.event_profile(event))[1]
        except ValueError:   # MalformedPayload too
            return None

    def acknowledge_press(self, press_id: str, call: Callable[[], Awaitable[Any]]) -> None:
        """Run ``call`` (the platform's answer to press ``press_id``) once in this life, in a task the intake never
        waits for, at most ``MAX_ACKS_IN_FLIGHT`` at once. A press delivered again after a restart is answered
        again; the platform refuses the second answer, harmlessly."""
        if press_id in self._answered_presses:
            return
        self._answered_presses[press_id] = None
        while len(self._answered_presses) > REMEMBERED_PRESSES:
            self._answered_presses.popitem(last=False)
        if len(self._acks_in_flight) >= MAX_ACKS_IN_FLIGHT:
            return
        task = asyncio.get_running_loop().create_task(self._acknowledge(call))
        self._acks_in_flight.add(task)
        task.add_done_callback(self._acks_in_flight.discard)

    async def _acknowledge(self, call: Callable[[], Awaitable[Any]]) -> None:
        try:
            await call()
        except Exception as exc:  # noqa: BLE001 - a lost notice costs the presser a spinner, nothing stored
            self.say(logging.INFO, "%s: a button press was not answered (%s)", self.name, self.clean_error(exc))

    def edit_when_settled(self, approval_id: str, question: str, edit: Callable[[str], Awaitable[Any]],
                          mention: Callable[[str], str] = str) -> None:
        """After a press was stored: once the session has decided (first answer wins, so the text says whose
        answer counted, not whose press this was), ``edit(the settled question)``, which removes the buttons.
        One watch per question (a double press shares it), at most ``MAX_SETTLE_WATCHES`` at once, apart from the
        presses' acknowledgements so that a wait never delays one. A kill -9 before the edit leaves the buttons
        on: a later press on them is answered with the settled text then."""
        async def settle(settled: str) -> None:
            await edit(settled)
        self.when_settled(approval_id, lambda approval: settled_question(question, approval, time.time(), mention),
                          settle)

    def when_settled(self, approval_id: str, render: Callable[[Optional[Approval]], Optional[str]],
                     show: Callable[[str], Awaitable[Any]], wait_s: float = SETTLE_WAIT_S) -> None:
        """``show(render(the approval))`` once it is settled (``render`` None: nothing to show), in a task of its
        own: the shared part of ``edit_when_settled`` and the web chat's ``settled`` frame."""
        if approval_id in self._settle_watches or len(self._settle_watches) >= MAX_SETTLE_WATCHES:
            return

        async def watch() -> None:
            try:
                shown = render(await self.settled(approval_id, wait_s))
                if shown is not None:
                    await show(shown)
            except Exception as exc:  # noqa: BLE001 - the question keeps its buttons; a later press settles it
                self.say(logging.INFO, "%s: a settled question was not edited (%s)", self.name,
                         self.clean_error(exc))
            finally:
                self._settle_watches.pop(approval_id, None)
        self._settle_watches[approval_id] = asyncio.get_running_loop().create_task(watch())

    async def settled(self, approval_id: str, wait_s: float, every_s: float = 0.5) -> Optional[Approval]:
        """The approval once it is no longer pending (answered, expired, withdrawn), read from storage every
        ``every_s`` for at most ``wait_s``; None if it is still pending then, or gone. What a press that was kept
        waits for before the question is edited to say who answered: the session decides (first answer wins), not
        the press."""
        deadline = time.monotonic() + wait_s
        while True:
            approval = await self.store.approvals.get(approval_id)
            if approval is None or approval.state != "pending":
                return approval
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(every_s)
