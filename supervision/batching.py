"""Many small messages to one actor as one Thespian message: the outbox of one handler run, grouped by recipient.

Each Thespian send costs the sender's transport a scan of every transmit it still has queued
(``asyncTransportBase._complete_expired_intents``), so a thousand messages sent one by one while the peer is busy
cost a thousand scans of a queue up to a thousand long: the adapter of a 1,000-chat burst spent two thirds of its
CPU there. Collected during one handler run and sent per recipient, they cost one send each run.

``Outbox`` is used on the actor's own thread only: ``put`` as the handler runs, ``flush(send)`` when it returns. A
recipient with a single message gets it as it is; with several, one ``Batch`` keeping their order, which every
actor unpacks (Behaviour.handle). Thespian does not order messages between two actors anyway, so a batch changes
no guarantee: whoever needs order numbers its messages (StreamBatch.seq).
"""
from __future__ import annotations

from typing import Any, Callable

from supervision.messages import Batch


class Outbox:
    def __init__(self):
        self._by_recipient: list[tuple[Any, list]] = []   # in order of each recipient's first message

    def put(self, recipient, message) -> None:
        for known, messages in self._by_recipient:
            if known == recipient:
                messages.append(message)
                return
        self._by_recipient.append((recipient, [message]))

    def flush(self, send: Callable[[Any, Any], None]) -> None:
        """Hand what was put to ``send(recipient, message)`` (the actor's own send), one message per recipient."""
        waiting, self._by_recipient = self._by_recipient, []
        for recipient, messages in waiting:
            send(recipient, messages[0] if len(messages) == 1 else Batch(tuple(messages)))

    def __len__(self) -> int:
        return sum(len(messages) for _recipient, messages in self._by_recipient)
