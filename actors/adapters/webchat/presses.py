"""The web chat's buttons (protocol.py, ``press`` and ``settled``): a press of a question's button taken as the
visitor's answer, every tab told once the question is settled, and the history's questions shown with their buttons
or with what became of them. A mixin of the adapter (adapter.py); the shared part is actors/adapters/presses.py.
"""
from __future__ import annotations

import time

from actors.adapters.presses import SETTLE_WAIT_S, SETTLED, ButtonPresses, press_outcome
from actors.adapters.webchat import formatting, protocol
from actors.adapters.webchat.protocol import error_frame
from actors.approvals.answers import Answerer, buttons_for, pressable_code, settled_line, settled_question

ANSWER_FIELD = "approval_answer"   # put on a press by the adapter: the press's answer, as words


class WebChatPresses(ButtonPresses):
    """Mixin for WebChatAdapter (uses its ``_store``, ``_push``, ``reject_frame``, ``store``, ``name``)."""

    async def _take_press(self, visitor: str, frame: dict) -> dict:
        """A press of a question's button: one that may answer is stored as the visitor's answer (``approve
        CODE``) under the page's id, as a message is, so a press the page sends again after a lost answer is one
        row; the tab is told whether it was kept and why not. Once the question is settled every tab of the
        visitor is told (``settled``)."""
        press_id, data = protocol.press_of(frame)
        if press_id is None:
            self.reject_frame(visitor, "a press without a usable id")
            return error_frame("a press needs an id of 1-64 of A-Z a-z 0-9 _ -")
        answerer = Answerer(self.name, visitor, visitor)
        judged = await self.judge_press({"visitor": visitor, "id": press_id, "text": ""}, answerer, data,
                                        ANSWER_FIELD)
        if judged.kept:
            stored = await self._store(visitor, judged.raw, press_id)
            if isinstance(stored, dict):
                return stored
            if judged.approval is not None:   # (a /model button's press: the session's reply says what it did)
                self._tell_settled(visitor, judged.approval.approval_id, SETTLE_WAIT_S)
        elif press_outcome(judged, answerer, "", time.time())[0] == SETTLED:
            self._tell_settled(visitor, judged.approval.approval_id, 0.0)
        return {"type": "press", "id": press_id, "kept": judged.kept, "notice": judged.notice}

    def _tell_settled(self, visitor: str, approval_id: str, wait_s: float) -> None:
        """Once the session has decided (at once for a question already settled), every tab of the visitor
        loses the question's buttons and shows what became of it."""
        async def show(line: str) -> None:
            await self._push(visitor, {"type": "settled", "approval": approval_id, "line": line})
        self.when_settled(approval_id, lambda approval: settled_line(approval, time.time(), _you(visitor)), show,
                          wait_s)

    async def _with_buttons(self, visitor: str, messages: list) -> list:
        """The history's questions: one still waiting carries its buttons; one settled reads as settled (its
        last sentence replaced by what became of it). Read from storage at each history request."""
        now = time.time()
        for message in messages:
            code = pressable_code(message["text"]) if message["role"] == "assistant" else None
            approval = await self.store.approvals.for_question(self.name, visitor, code) if code else None
            if approval is None:
                continue
            settled = settled_question(message["text"], approval, now, _you(visitor))
            if settled is None:
                message["buttons"] = protocol.button_views(buttons_for(approval.approval_id))
            else:
                message.update(text=settled, **formatting.view(settled, True))
        return messages


def _you(visitor: str):
    """How the web chat names who answered: the visitor is "you" (no one else is in the chat)."""
    return lambda user_id: "you" if user_id == visitor else user_id
