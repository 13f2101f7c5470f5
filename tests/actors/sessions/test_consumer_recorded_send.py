"""A send whose id reached the ledger although its answer never reached the stream consumer: the adapter recorded
the platform's id (send_records.py) and died before its OpResult left. The consumer, told by a new directory that
its adapter was restarted with the send in hand, edits that message into place: it neither sends the part again
(a second copy, the first one stuck on its preview) nor looks for a lost copy past it (lost_copies.py would skip
an id the ledger already knows, never find it, and send again). The cell runs in a real CellHost on a real SQLite
store; the adapters are addresses the test answers for."""
from __future__ import annotations

import pytest

from actors.messages import OpResult, PlatformOp, StreamBatch
from actors.messages.stream import TextDelta, TurnEnd
from supervision.messages import Directory
from tests.actors.sessions.cell_rig import cell_rig, settle, start_consumer

pytestmark = pytest.mark.timeout(30)
OLD_ADAPTER, NEW_ADAPTER = "the adapter that died", "the adapter started in its place"


@pytest.fixture
def rig(tmp_path):
    with cell_rig(tmp_path) as r:
        yield r.host, r.out, r.store, r.loop


@pytest.mark.parametrize("platform", ["fake", "telegram"])   # marks a re-sent copy / looks for a lost one
def test_a_send_recorded_by_an_adapter_that_died_before_answering_is_edited_not_sent_again(rig, platform):
    host, out, store, loop = rig
    start_consumer(host, platform, OLD_ADAPTER)
    host.deliver("consumer:t1", StreamBatch("t1", 0, (TextDelta("the answer so far"),)))
    settle(host)
    sends = [m for a, m in out if isinstance(m, PlatformOp) and m.action == "send"]
    assert len(sends) == 1 and sends[0].ledger is not None, out
    oid, fence, index = sends[0].ledger

    # What the old adapter did before it died: the intent, the request, the id from the platform's answer.
    loop.run_until_complete(store.ledger.record_send_intent(oid, fence, index))
    loop.run_until_complete(store.ledger.record_part(oid, fence, index, "2", replace=True))
    out.clear()
    host.broadcast(Directory(version=2, adapters=((platform, NEW_ADAPTER),)))
    settle(host)
    answer_edits(host, out)
    host.deliver("consumer:t1", StreamBatch("t1", 1, (TurnEnd("complete", "the answer so far, and the rest"),)))
    settle(host)
    answer_edits(host, out)

    ops = [m for a, m in out if isinstance(m, PlatformOp) and m.action in ("send", "edit", "find_lost")]
    assert ops and {(m.action, m.message_id) for m in ops} == {("edit", "2")}, \
        f"expected edits of the recorded message 2 only; the consumer sent {ops}"
    assert ops[-1].text == "the answer so far, and the rest", ops
    ob = loop.run_until_complete(store.ledger.get(oid))
    assert (ob.state, ob.parts, ob.ambiguous) == ("delivered", {0: "2"}, False), ob


def answer_edits(host, out) -> None:
    """The new adapter's answers: every edit sent so far succeeds (in order; the consumer has one in flight)."""
    answered = set()
    while True:
        edits = [m for a, m in out if isinstance(m, PlatformOp) and m.action == "edit" and m.op_id not in answered]
        if not edits:
            return
        answered.add(edits[0].op_id)
        host.deliver("consumer:t1", OpResult(edits[0].op_id, True, message_id="2"), NEW_ADAPTER)
        settle(host)
