"""runtime/ack_wait.py: a Thespian transmit waiting for its ACK is left to its socket's select instead of being
stepped by the timeout pass (which read nothing, and paused it for 34 ms)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from thespian.system.transport.TCPTransport import TCPTransport

from runtime import ack_wait


class ThespiansOwnCheck(Exception):
    """Raised where Thespian's own check begins: the wrapper passed the intent on."""


class Intent:
    def __init__(self, stage: int, expired: bool = False):
        self.stage, self._expired = stage, expired

    def expired(self) -> bool:
        return self._expired

    def timeToRetry(self, socketAvail=False):   # the first thing Thespian's own check asks
        raise ThespiansOwnCheck()


def check(intent, fileno=-1):
    ack_wait.install()
    transport = SimpleNamespace(_XMITStepWaitForAck=TCPTransport._XMITStepWaitForAck, _socketFile=lambda i: None)
    return TCPTransport._nextTransmitStepCheck(transport, intent, fileno)


def test_a_transmit_waiting_for_its_ack_is_not_stepped_by_the_timeout_pass():
    assert check(Intent(TCPTransport._XMITStepWaitForAck)) is True


@pytest.mark.parametrize("intent", [Intent(TCPTransport._XMITStepSendData),
                                    Intent(TCPTransport._XMITStepWaitForAck, expired=True)],
                         ids=["another stage", "a wait past its deadline"])
def test_other_stages_and_expired_waits_are_thespians_own(intent):
    with pytest.raises(ThespiansOwnCheck):
        check(intent)


def test_installing_twice_wraps_once():
    ack_wait.install()
    wrapped = TCPTransport._nextTransmitStepCheck
    ack_wait.install()
    assert TCPTransport._nextTransmitStepCheck is wrapped
