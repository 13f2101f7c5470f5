"""A reply's send held between the platform and the ledger: the conformance suite's delivery case, fault injection.

Where the platform answers from outside the daemon, its fake holds the answer to a send (tests/fakes/harness.py)
and the suite kills the daemon meanwhile. Where the adapter is the platform (the web chat serves the page, the
terminal chat hands its CliShow to the actor system) there is no outside answer to hold, so the kit holds the send
itself: once ``send_message`` has returned (the message is shown) and before its id is recorded in the ledger
(base.py ``_perform``). A kill -9 in that window leaves the send's intent in the ledger without its id: the
ambiguous send the stream consumer and the sweeper recover from (docs/design.md G3).

Armed only through hooks that [debug] fault_injection gates (HoldNextSend, the web chat's ``debug.hold_send``
frame): unarmed, ``after_send`` is one attribute test. One hold at a time, for the next recorded send to one chat;
a held send goes on when released, or after ``HOLD_BOUND_S`` whatever happens (a test that never releases it
delays one reply, it does not stop the chat). Loop thread only. Nothing of it survives the process, on purpose.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Optional

HOLD_BOUND_S = 60.0


class SendHold:
    def __init__(self, on_held: Callable[[Any, str, str], None]):
        self._on_held = on_held            # (armer, chat id, message id): the send is done and held now
        self._chat: Optional[str] = None   # armed for this chat's next recorded send
        self._armer: Any = None
        self._released: Optional[asyncio.Event] = None
        self.held: Optional[tuple[str, str]] = None   # (chat id, message id) of the send held now

    def arm(self, chat_id: str, armer: Any = None) -> None:
        self._chat, self._armer = chat_id, armer

    def release(self) -> None:
        """The held send goes on, and a hold not used yet is dropped."""
        self._chat = self._armer = None
        if self._released is not None:
            self._released.set()

    async def after_send(self, chat_id: str, message_id: str) -> None:
        """Called once a recorded send is done on the platform, before its id goes to the ledger."""
        if self._chat is None or self._chat != chat_id:
            return
        armer, self._chat, self._armer = self._armer, None, None
        self._released = released = asyncio.Event()
        self.held = (chat_id, message_id)
        self._on_held(armer, chat_id, message_id)
        try:
            await asyncio.wait_for(released.wait(), HOLD_BOUND_S)
        except asyncio.TimeoutError:
            pass
        finally:
            self.held = None
            if self._released is released:
                self._released = None
