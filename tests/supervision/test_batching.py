"""supervision/batching.py and Behaviour's side of it: an outbox sends one message per recipient, a Batch is taken
item by item in order, and an asker outside the system takes batched replies one by one."""
from __future__ import annotations

from supervision.batching import Outbox
from supervision.behaviour import Behaviour
from supervision.messages import Batch


def test_one_message_per_recipient_in_the_order_put():
    outbox, sent = Outbox(), []
    for recipient, message in (("a", 1), ("b", 2), ("a", 3), ("a", 4)):
        outbox.put(recipient, message)
    assert len(outbox) == 4
    outbox.flush(lambda to, m: sent.append((to, m)))
    assert sent == [("a", Batch((1, 3, 4))), ("b", 2)] and len(outbox) == 0
    outbox.flush(lambda to, m: sent.append((to, m)))
    assert len(sent) == 2, "a flush sends what was put since the last one only"


class Recorder(Behaviour):
    def __init__(self):
        super().__init__()
        self.seen = []

    def on_Note(self, message, sender):
        self.seen.append((message.text, sender))


class Note:
    def __init__(self, text):
        self.text = text


def test_a_batch_is_handled_item_by_item_as_if_each_came_alone():
    actor = Recorder()
    actor.handle(Batch((Note("one"), Batch((Note("two"),)), Note("three"))), "peer")
    assert actor.seen == [("one", "peer"), ("two", "peer"), ("three", "peer")]


class System:
    """An external actor system handle that answers listens from a script."""

    def __init__(self, *replies):
        self.replies = list(replies)

    def listen(self, timeout):
        return self.replies.pop(0) if self.replies else None


def test_an_outside_asker_takes_batched_replies_one_by_one():
    from daemon.asking import listen_for
    asys = System(Batch(("skip", 7, 8)), 9)
    assert listen_for(asys, int, 1.0) == 7 and listen_for(asys, int, 1.0) == 8 and listen_for(asys, int, 1.0) == 9
