"""runtime/lazy_identify.py: Thespian's message descriptions are made only when a log line formats them."""
from __future__ import annotations

import logging

import pytest
from thespian.system.transport import ReceiveEnvelope, TransmitIntent
from thespian.system.utilis import thesplog

from runtime import lazy_identify

pytestmark = pytest.mark.timeout(30)


class Counted:
    """A message whose str() is counted: Thespian's description of a message is its str()."""
    made = 0

    def __str__(self) -> str:
        Counted.made += 1
        return "Counted()"


def test_a_debug_line_below_the_threshold_describes_nothing_and_one_that_is_written_reads_as_before():
    before_receive = str(ReceiveEnvelope("sender", Counted()))
    lazy_identify.install()
    lazy_identify.install()   # twice is once
    Counted.made = 0
    envelope, intent = ReceiveEnvelope("sender", Counted()), TransmitIntent("target", Counted())
    thesplog("ACTOR got %s", envelope.identify(), level=logging.DEBUG)   # what Thespian does for every message
    thesplog("Attempting intent %s", intent.identify(), level=logging.DEBUG)
    assert Counted.made == 0, "a line that is not written must not describe the message"
    assert str(envelope) == before_receive, "str() of an envelope still gives the whole description"
    assert "%s" % envelope.identify() == before_receive
    assert "Counted()" in "%s" % intent.identify() and "target" in "%s" % intent.identify()
    assert Counted.made == 4   # one for each description formatted above
