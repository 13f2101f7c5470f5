"""Thespian's transmit, waiting for its acknowledgement, is not stepped for nothing.

Every message Thespian sends waits for the receiver's ACK on its socket. After each pass of its select loop
Thespian also steps every transmit from its timeout pass (``_processIntentTimeouts`` ->
``_nextTransmitStepCheck(intent, -1)``), and one waiting for its ACK is stepped whenever another socket to the same
peer is open (``timeToRetry(socketAvail=True)``), which is always the case between two actors that talk both ways
(an adapter and its shard). Stepped that way, the wait-for-ACK stage reads a socket with nothing in it, gets EAGAIN
and pauses the transmit for its first backoff (20 ms x 1.7 = 34 ms): the ACK that arrives a moment later is not
read for 34 ms, and every later message to that peer queues behind it. Measured on the warm-turn benchmark: 1-2 %
of turns took 34 ms longer (an adapter's OpResult to its shard, the next doorbell behind it), the whole p99.

``install()`` wraps that check: a transmit waiting for its ACK that has not expired is left to its socket, which
Thespian's select watches and steps when the ACK (or the peer's end) arrives; every other case is Thespian's own.
Like the other transport adjustments (loopback.py, peer_check.py) it must run in the launcher before the
actor system starts; actor processes are forked from it and inherit the wrapped class.

Thespian internals relied on (checked against Thespian 4.0.1: runtime/versions.py): ``TCPTransport.
_nextTransmitStepCheck(self, intent, fileno, closed=False)`` (wrapped), the stage constant
``TCPTransport._XMITStepWaitForAck``, and a transmit intent's ``stage`` and ``expired()``.
"""
from __future__ import annotations

import functools

from runtime.shapes import module, need, tcp_transport


def install() -> None:
    # Thespian's internals load when the patch is installed, not when this module is imported
    from thespian.system.transport.TCPTransport import TCPTransport
    if getattr(TCPTransport._nextTransmitStepCheck, "_leaves_acks_to_select", False):
        return
    original = TCPTransport._nextTransmitStepCheck

    @functools.wraps(original)
    def _nextTransmitStepCheck(self, intent, fileno, closed=False):
        if fileno == -1 and not closed and intent.stage == self._XMITStepWaitForAck and not intent.expired():
            return True     # still valid: its socket's select steps it when the ACK comes
        return original(self, intent, fileno, closed)

    _nextTransmitStepCheck._leaves_acks_to_select = True
    TCPTransport._nextTransmitStepCheck = _nextTransmitStepCheck


def missing() -> list[str]:
    problems: list[str] = []
    _tcp, transport = tcp_transport(problems)
    need(transport, "TCPTransport", "_nextTransmitStepCheck", problems,
         params=("self", "intent", "fileno", "closed"), uses=("stage",))
    need(transport, "TCPTransport", "_XMITStepWaitForAck", problems, kind=int)
    intents = module("thespian.system.transport", problems)
    intent = need(intents, "thespian.system.transport", "TransmitIntent", problems, kind=type)
    need(intent, "TransmitIntent", "expired", problems, params=("self",))
    return problems
