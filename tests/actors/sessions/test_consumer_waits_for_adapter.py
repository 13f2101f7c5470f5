"""A stream consumer cell whose adapter the directory does not name yet (a shard restarted after a kill -9 starts
its sessions before the root's directory reaches it): the reply goes as soon as a directory names the adapter, not
at the consumer's next retry. The cell runs in a real CellHost on a real SQLite store; nothing else runs."""
from __future__ import annotations

import asyncio

import pytest

from actors.messages import PlatformOp, StreamBatch
from actors.messages.stream import TextDelta, TurnEnd
from common.config import defaults
from storage import Store
from storage.inline import run_inline
from supervision.cell_host import CellHost
from supervision.messages import Directory
from supervision.spec import ChildSpec, Restart, SupervisorFlags

pytestmark = pytest.mark.timeout(30)
ADAPTER_ADDRESS = "the adapter's address"


@pytest.fixture
def rig(tmp_path):
    loop = asyncio.new_event_loop()
    store = loop.run_until_complete(Store.open(tmp_path / "gateway.db", "normal", inline=True))
    config = defaults()
    config["gateway"]["state_dir"] = str(tmp_path)
    out, timers = [], []
    host = CellHost("shard-test", send_out=lambda address, message, cell: out.append((address, message)),
                    arm=lambda seconds, token: timers.append(seconds), on_parent=lambda message, sender: None,
                    on_exit=lambda state, abnormal, restarting: None, config=config, atomic=store.atomic,
                    flags=SupervisorFlags(max_restarts=3, period_s=60.0, backoff_base_s=0.0, backoff_max_s=0.0))
    host.store, host.run_store = store, run_inline   # as a shard gives its cells its one inline store
    yield host, out
    host.stop_all()
    loop.run_until_complete(store.close())
    loop.close()


def test_a_reply_waiting_for_its_adapter_goes_when_a_directory_names_it_without_a_timer(rig):
    host, out = rig
    args = {"turn_id": "t1", "session_key": "fake:dm:c1", "inbound_ref": "fake:1", "adapter": "fake",
            "platform": "fake", "chat_id": "c1", "thread_id": None, "chat_type": "dm", "profile": "default",
            "stream": True, "status_reactions": [], "reply_to": "1"}
    state = host.start(ChildSpec("consumer:t1", "actors.sessions.stream_consumer.StreamConsumer", kind="StreamConsumer",
                                 args=args, restart=Restart.TEMPORARY))
    host.deliver("consumer:t1", StreamBatch("t1", 0, (TextDelta("the answer"), TurnEnd("complete", "the answer"))))
    while host.run():
        pass
    assert state.cell.adapter_wait.since is not None, "the consumer should be waiting for its adapter"
    assert not [m for _, m in out if isinstance(m, PlatformOp) and m.action == "send"], out

    host.broadcast(Directory(version=2, adapters=(("fake", ADAPTER_ADDRESS),)))
    while host.run():
        pass   # no timer fired: only the directory's own delivery
    sends = [(a, m) for a, m in out if isinstance(m, PlatformOp) and m.action == "send"]
    assert [(a, m.text) for a, m in sends] == [(ADAPTER_ADDRESS, "the answer")], out
