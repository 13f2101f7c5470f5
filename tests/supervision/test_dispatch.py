"""One dispatch style (supervision/behaviour.py, docs/design.md §1.7): mail by its type's name to
``on_<MessageType>(message, sender)``, an item back from the loop to ``on_loop_<ItemType>(item)``, and an item no
handler is named for to ``on_bridge``. A type that is both mail and an item reaches each by its own handler."""
from __future__ import annotations

import pytest

from supervision.behaviour import Behaviour

pytestmark = pytest.mark.timeout(30)


class Recorder(Behaviour):
    def __init__(self):
        super().__init__()
        self.seen: list[tuple] = []

    def on_str(self, message, sender) -> None:
        self.seen.append(("mail", message, sender))

    def on_loop_str(self, item) -> None:
        self.seen.append(("loop", item))

    def on_bridge(self, item) -> None:
        self.seen.append(("catch-all", item))


def test_an_item_back_from_the_loop_goes_to_its_loop_handler_and_mail_of_the_same_type_to_the_mail_handler():
    actor = Recorder()
    actor.take_bridge_item("from the loop")
    actor.handle("from a sender", "sender")
    assert actor.seen == [("loop", "from the loop"), ("mail", "from a sender", "sender")]


def test_an_item_without_a_loop_handler_goes_to_on_bridge():
    actor = Recorder()
    actor.take_bridge_item(7)
    assert actor.seen == [("catch-all", 7)]
