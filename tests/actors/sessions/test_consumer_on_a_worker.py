"""A stream consumer whose shard runs on a worker host (docs/distribution.md): its ledger is the worker's, which the
leader's adapter does not see. So its sends carry no ``ledger`` for the adapter to record; the consumer commits the
send's intent itself before the op leaves the shard, records the id the answer brings, and clears the intent when
the platform refuses the send. It never asks the adapter to look for a lost copy (that search reads the adapter's
own ledger). The cell runs in a real CellHost on a real SQLite store; the adapter is an address the test answers."""
from __future__ import annotations

import pytest

from actors.messages import OpResult, PlatformOp, StreamBatch
from actors.messages.stream import TextDelta, TurnEnd
from common.cluster import WORKER_NAME_ENV
from tests.actors.sessions.cell_rig import cell_rig, settle, start_consumer

pytestmark = pytest.mark.timeout(30)
ADAPTER = "the leader's adapter"


@pytest.fixture
def rig(tmp_path, monkeypatch):
    monkeypatch.setenv(WORKER_NAME_ENV, "w1")   # what `join` sets in every process of a worker
    with cell_rig(tmp_path) as r:
        yield r.host, r.out, r.store, r.loop


def start(host):
    start_consumer(host, "telegram", ADAPTER)


def sends(out) -> list:
    return [m for _a, m in out if isinstance(m, PlatformOp) and m.action == "send"]


def the_obligation(store, loop):
    [ob] = loop.run_until_complete(store.ledger.list())
    return loop.run_until_complete(store.ledger.get(ob.obligation_id))


def test_the_send_intent_is_committed_here_before_the_op_leaves_and_the_id_recorded_with_its_answer(rig):
    host, out, store, loop = rig
    start(host)
    host.deliver("consumer:t1", StreamBatch("t1", 0, (TextDelta("the answer"), TurnEnd("complete", "the answer"))))
    settle(host)
    [send] = sends(out)
    assert send.ledger is None, "the adapter's ledger is not this host's: it must not record the send"
    ob = the_obligation(store, loop)
    assert ob.send_intent == 0, f"the intent must be durable here before the op left: {ob}"
    host.deliver("consumer:t1", OpResult(send.op_id, True, message_id="55"), ADAPTER)
    settle(host)
    ob = loop.run_until_complete(store.ledger.get(ob.obligation_id))
    assert (ob.parts, ob.send_intent) == ({0: "55"}, None), ob
    assert not [m for _a, m in out if isinstance(m, PlatformOp) and m.action == "find_lost"]


def test_a_refused_send_leaves_no_intent_behind(rig):
    host, out, store, loop = rig
    start(host)
    host.deliver("consumer:t1", StreamBatch("t1", 0, (TextDelta("the answer"),)))
    settle(host)
    [send] = sends(out)
    host.deliver("consumer:t1", OpResult(send.op_id, False, error_kind="permanent", error="chat not found"), ADAPTER)
    settle(host)
    ob = the_obligation(store, loop)
    assert ob.send_intent is None and not ob.ambiguous, \
        f"nothing was sent: a later owner must not mark its copy as re-sent on this account: {ob}"
