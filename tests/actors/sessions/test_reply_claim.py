"""A reply's claim on its obligation against a real ledger (SQLite file): a consumer that finds a dead owner's claim
takes it over, but never adopts a claim another claimer (the sweeper) won meanwhile; it looks again later."""
from __future__ import annotations

import asyncio
import logging
import sqlite3

import pytest

from actors.adapters.registry import pacing_for
from actors.messages import ConsumerArgs
from actors.sessions.reply_claim import Claim
from actors.sessions.turn import REPLY_SLOT
from storage import Store, Target

pytestmark = pytest.mark.timeout(30)
DEAD_PID = 4_194_000   # above the default pid_max: no process has it
# A group chat: the adapter looks for no lost copy there (Claim.finds_lost), so a lost send is marked.
ARGS = ConsumerArgs("t1", "k", "fake:m1", "fake", "fake", "c1", chat_type="group", reply_to="m1")


class Runner:
    """The cell's storage call, with a hook: what another claimer does just before one of the claim's calls."""

    def __init__(self, loop, before=None):
        self.loop, self.before = loop, before or {}

    def __call__(self, coro):
        hook = self.before.pop(coro.__qualname__, None)
        if hook is not None:
            hook()
        return self.loop.run_until_complete(coro)


def claimer(store, loop, before=None) -> Claim:
    return Claim(ARGS, store, Runner(loop, before), logging.getLogger("test.claim"), "consumer:test")


@pytest.fixture
def ledger(tmp_path):
    loop = asyncio.new_event_loop()
    path = tmp_path / "gateway.db"
    store = loop.run_until_complete(Store.open(path))
    ob = loop.run_until_complete(store.ledger.record_obligation(
        "k", "fake:m1", Target("fake", "c1", None, "m1"), REPLY_SLOT, chunks=["the final text"], claim=True,
        send_intent=0))   # final text recorded: a reply the sweeper could finish (one without, it leaves alone)
    with sqlite3.connect(path) as db:   # the claim of a consumer that died with its process
        db.execute("UPDATE obligations SET owner_pid = ? WHERE obligation_id = ?", (DEAD_PID, ob.obligation_id))
    yield store, loop, ob.obligation_id
    loop.run_until_complete(store.close())
    loop.close()


def test_a_dead_owners_claim_is_taken_over_and_marked_ambiguous(ledger):
    store, loop, oid = ledger
    claim = claimer(store, loop)
    assert claim.claim() == "claimed"
    ob = loop.run_until_complete(store.ledger.get(oid))
    assert ob.state == "attempting" and claim.fence == ob.fence and ob.fence > 1
    assert claim.ambiguous, "the dead owner's send intent: a copy may exist"


def test_a_claim_the_sweeper_wins_meanwhile_is_never_adopted(ledger):
    """The consumer saw the dead owner's claim; before its take-over lands, the sweeper claims the row. The take-over
    is refused (stale fence): the consumer must not go on with the sweeper's fence, or both would send."""
    store, loop, oid = ledger

    def sweeper_claims():
        claimed = loop.run_until_complete(store.ledger.sweep_recoverable(["fake"]))
        assert [o.obligation_id for o in claimed] == [oid]
    claim = claimer(store, loop, before={"Ledger.mark_failed": sweeper_claims})
    assert claim.claim() == "look_again", "it looks again later"
    assert claim.fence is None and claim.oid is None
    ob = loop.run_until_complete(store.ledger.get(oid))
    assert ob.state == "attempting" and ob.fence == 2, "the sweeper's claim stands"


@pytest.mark.parametrize("platform, said", [
    ("telegram", "the reply is marked as re-sent"),
    ("matrix", "the send goes again under the part's key, so the chat keeps one copy")],
    ids=["marker-shown", "keyed-send"])
def test_the_log_says_the_reply_is_marked_only_where_a_mark_is_shown(ledger, caplog, platform, said):
    """Where the platform deduplicates sends by key (Matrix's txnId) no marker goes on the reply: the log must not
    say it does. The ledger records the reply as ambiguous either way (its parts are edited again after a send)."""
    store, loop, oid = ledger
    shows_mark = not pacing_for(platform).idempotent_send
    claim = Claim(ARGS, store, Runner(loop), logging.getLogger("test.claim"), "consumer:test",
                  pacing=pacing_for(platform))
    with caplog.at_level(logging.WARNING, logger="test.claim"):
        assert claim.claim() == "claimed"
    lines = [r.getMessage() for r in caplog.records]
    assert any(said in line for line in lines), lines
    assert shows_mark or not any("marked as re-sent" in line for line in lines), lines
    assert loop.run_until_complete(store.ledger.get(oid)).ambiguous


def test_a_later_claim_numbers_its_operations_apart_from_the_earlier_ones(ledger):
    """Each claim of the reply (each life that resumes it) numbers its operations under its own fence: the second
    operation of the second life is not the second operation of the first (a platform would take it for a retry)."""
    store, loop, oid = ledger
    first = claimer(store, loop)
    assert first.claim() == "claimed"
    loop.run_until_complete(store.ledger.mark_failed(oid, first.fence, "the daemon was killed"))
    second = claimer(store, loop)
    assert second.claim() == "claimed" and second.fence > first.fence
    assert second.op_id("turn", 2) != first.op_id("turn", 2) and first.op_id("turn", 2) == first.op_id("turn", 2)
    unclaimed = claimer(store, loop)
    assert unclaimed.op_id("turn", 2) != claimer(store, loop).op_id("turn", 2), "no fence: this life's token"
