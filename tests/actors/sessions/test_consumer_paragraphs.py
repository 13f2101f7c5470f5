"""The stream consumer of a reply sent in paragraph-sized parts (actors/sessions/paragraph_parts.py) started again
for a turn whose earlier life left parts on the platform: the ledger holds them as a consumer killed mid-answer
leaves them (the parts' record, their ids, maybe an unresolved send), and the resumed turn's answer either begins
with them (only the rest is sent) or differs (sent whole after them, marked once; where sends are keyed, under keys
that name the new content). The cell runs in a real CellHost on a real SQLite store; the adapter is an address the
test answers for."""
from __future__ import annotations

import pytest

from actors.adapters.pacing import DEFAULT_RESENT_MARKER as MARK
from actors.messages import ConsumerArgs, OpResult, PlatformOp, StreamBatch
from actors.messages.stream import TextDelta, TurnEnd
from actors.sessions.paragraph_parts import part_key
from actors.sessions.turn import REPLY_SLOT
from storage import Target
from supervision.messages import Directory
from supervision.spec import ChildSpec, Restart
from tests.actors.sessions.cell_rig import cell_rig, settle

pytestmark = pytest.mark.timeout(30)
ADAPTER = "the adapter"


def para(tag: str) -> str:
    return (tag + " " + "word " * 60)[:250].rstrip() + "."


A0, A1, A2 = para("first"), para("second"), para("third")
B0, B1, B2 = para("other"), para("another"), para("last")


@pytest.fixture
def rig(tmp_path):
    with cell_rig(tmp_path) as r:
        r.answered = set()   # the sends answered so far
        yield r


def earlier_life(rig, platform: str, texts: list, placed: int, unresolved: bool = False, marked: bool = False) -> str:
    """What a consumer killed mid-answer left: the parts' record, the ids of the first ``placed``, with
    ``unresolved`` the intent of the next one's send (its outcome unknown), with ``marked`` the reply marked as
    re-sent (an earlier life's unresolved send)."""
    run = rig.loop.run_until_complete
    ob = run(rig.store.ledger.record_obligation(f"{platform}:dm:7", f"{platform}:1",
                                                Target(platform, "7", reply_to="1"), REPLY_SLOT, chunks=[],
                                                claim=True))
    run(rig.store.ledger.set_streamed(ob.obligation_id, ob.fence, {"from": 0, "parts": texts}))
    for index in range(placed):
        run(rig.store.ledger.record_part(ob.obligation_id, ob.fence, index, f"m{index}"))
    if unresolved:
        run(rig.store.ledger.record_send_intent(ob.obligation_id, ob.fence, placed))
    if marked:
        run(rig.store.ledger.mark_ambiguous(ob.obligation_id, ob.fence))
    run(rig.store.ledger.mark_failed(ob.obligation_id, ob.fence, "killed"))
    return ob.obligation_id


def resumed_answer(rig, platform: str, answer: str) -> list[PlatformOp]:
    """The consumer started again, the resumed turn's answer streamed to it; every send answered ok. Its sends."""
    args = ConsumerArgs("t1", f"{platform}:dm:7", f"{platform}:1", platform, platform, "7", profile="default",
                        reply_to="1", stream_without_edits="paragraphs")
    rig.host.start(ChildSpec("consumer:t1", "actors.sessions.stream_consumer.StreamConsumer", kind="StreamConsumer",
                             args=args, restart=Restart.TEMPORARY))
    rig.host.broadcast(Directory(version=1, adapters=((platform, ADAPTER),)))
    for seq, at in enumerate(range(0, len(answer), 40)):
        rig.host.deliver("consumer:t1", StreamBatch("t1", seq, (TextDelta(answer[at:at + 40]),)))
        answer_sends(rig)
    rig.host.deliver("consumer:t1", StreamBatch("t1", seq + 1, (TurnEnd("complete", answer),)))
    answer_sends(rig)
    return [m for _, m in rig.out if isinstance(m, PlatformOp) and m.action in ("send", "edit", "find_lost")]


def answer_sends(rig) -> None:
    """The adapter's answers: every send so far succeeds, in order (the consumer has one in flight)."""
    settle(rig.host)
    while sends := [m for _, m in rig.out if isinstance(m, PlatformOp) and m.action == "send"
                    and m.op_id not in rig.answered]:
        rig.answered.add(sends[0].op_id)
        rig.host.deliver("consumer:t1", OpResult(sends[0].op_id, True, message_id=f"new-{sends[0].op_id}"), ADAPTER)
        settle(rig.host)


def test_a_resumed_answer_that_begins_with_the_parts_sent_sends_only_the_rest(rig):
    oid = earlier_life(rig, "whatsapp", [A0, A1], placed=2)
    ops = resumed_answer(rig, "whatsapp", f"{A0}\n\n{A1}\n\n{A2}")
    assert [(m.action, m.text) for m in ops] == [("send", A2)], ops
    ob = rig.loop.run_until_complete(rig.store.ledger.get(oid))
    assert (ob.state, ob.chunks, ob.ambiguous) == ("delivered", [A0, A1, A2], False), ob


def test_a_resumed_answer_that_differs_is_sent_whole_after_the_parts_there_marked_once(rig):
    oid = earlier_life(rig, "whatsapp", [A0, A1, A2], placed=2, unresolved=True)   # part 2: outcome unknown
    ops = resumed_answer(rig, "whatsapp", f"{B0}\n\n{B1}\n\n{B2}")
    assert [m.text for m in ops] == [f"{MARK}\n{B0}", B1, B2], ops
    assert [m.ledger[2] for m in ops] == [2, 3, 4], "the new answer's parts follow the parts on the platform"
    ob = rig.loop.run_until_complete(rig.store.ledger.get(oid))
    assert ob.state == "delivered" and ob.chunks == [A0, A1, f"{MARK}\n{B0}", B1, B2], ob
    assert ob.streamed == {"from": 2, "parts": ob.chunks}, "a third life compares with this answer"


def test_where_sends_are_keyed_a_new_answers_part_never_takes_the_key_of_a_lost_send_at_its_index(rig):
    oid = earlier_life(rig, "line", [A0, A1, A2], placed=2, unresolved=True)
    ops = resumed_answer(rig, "line", f"{B0}\n\n{B1}\n\n{B2}")
    assert [m.text for m in ops] == [f"{MARK}\n{B0}", B1, B2], ops
    assert ops[0].idempotency_key == part_key(oid, 2, f"{MARK}\n{B0}") != part_key(oid, 2, A2)


def test_where_sends_are_keyed_a_lost_part_the_answer_goes_on_from_goes_again_under_its_own_key(rig):
    oid = earlier_life(rig, "line", [A0, A1], placed=1, unresolved=True)   # part 1: sent or not, unknown
    ops = resumed_answer(rig, "line", f"{A0}\n\n{A1}\n\n{A2}")
    assert [(m.text, m.idempotency_key) for m in ops] == [(A1, part_key(oid, 1, A1)), (A2, part_key(oid, 2, A2))], \
        "the same part with the same content: the platform shows it once"


def test_a_reply_marked_in_an_earlier_life_is_not_marked_again_on_a_later_part(rig):
    oid = earlier_life(rig, "whatsapp", [A0, f"{MARK}\n{A1}"], placed=2, marked=True)   # part 1 went again, marked
    ops = resumed_answer(rig, "whatsapp", f"{A0}\n\n{A1}\n\n{A2}")
    assert [m.text for m in ops] == [A2], ops
    ob = rig.loop.run_until_complete(rig.store.ledger.get(oid))
    assert ob.state == "delivered" and ob.chunks == [A0, f"{MARK}\n{A1}", A2] and ob.ambiguous, ob
