"""A stream consumer cell whose adapter the directory does not name yet (a shard restarted after a kill -9 starts
its sessions before the root's directory reaches it): the reply goes as soon as a directory names the adapter, not
at the consumer's next retry. The cell runs in a real CellHost on a real SQLite store; nothing else runs."""
from __future__ import annotations

import pytest

from actors.messages import ConsumerArgs, PlatformOp, StreamBatch
from actors.messages.stream import TextDelta, TurnEnd
from supervision.messages import Directory
from supervision.spec import ChildSpec, Restart
from tests.actors.sessions.cell_rig import cell_rig, settle

pytestmark = pytest.mark.timeout(30)
ADAPTER_ADDRESS = "the adapter's address"


@pytest.fixture
def rig(tmp_path):
    with cell_rig(tmp_path) as r:
        yield r.host, r.out


def test_a_reply_waiting_for_its_adapter_goes_when_a_directory_names_it_without_a_timer(rig):
    host, out = rig
    args = ConsumerArgs("t1", "fake:dm:c1", "fake:1", "fake", "fake", "c1", profile="default", reply_to="1")
    state = host.start(ChildSpec("consumer:t1", "actors.sessions.stream_consumer.StreamConsumer", kind="StreamConsumer",
                                 args=args, restart=Restart.TEMPORARY))
    host.deliver("consumer:t1", StreamBatch("t1", 0, (TextDelta("the answer"), TurnEnd("complete", "the answer"))))
    settle(host)
    assert state.cell.adapter_wait.since is not None, "the consumer should be waiting for its adapter"
    assert not [m for _, m in out if isinstance(m, PlatformOp) and m.action == "send"], out

    host.broadcast(Directory(version=2, adapters=(("fake", ADAPTER_ADDRESS),)))
    settle(host)   # no timer fired: only the directory's own delivery
    sends = [(a, m) for a, m in out if isinstance(m, PlatformOp) and m.action == "send"]
    assert [(a, m.text) for a, m in sends] == [(ADAPTER_ADDRESS, "the answer")], out
