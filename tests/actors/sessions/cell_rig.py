"""A CellHost on a real SQLite store, with nothing else running: what the consumer-cell tests drive. What the cells
send out of the host is collected in ``out`` as (address, message); the timers they arm in ``timers`` (seconds)."""
from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace

from actors.messages import ConsumerArgs
from common.config import defaults
from storage import Store
from storage.inline import run_inline
from supervision.cell_host import CellHost
from supervision.messages import Directory
from supervision.spec import ChildSpec, Restart, SupervisorFlags


@contextlib.contextmanager
def cell_rig(tmp_path):
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
    try:
        yield SimpleNamespace(host=host, out=out, timers=timers, store=store, loop=loop)
    finally:
        host.stop_all()
        loop.run_until_complete(store.close())
        loop.close()


def settle(host: CellHost) -> None:
    """Run the cells until no mail is left (timers are not fired)."""
    while host.run():
        pass


def start_consumer(host: CellHost, platform: str, adapter) -> None:
    """Consumer cell ``consumer:t1`` of turn t1 in direct chat 7 of ``platform``, whose adapter is at ``adapter``."""
    args = ConsumerArgs("t1", f"{platform}:dm:7", f"{platform}:1", platform, platform, "7", profile="default",
                        reply_to="1")
    host.start(ChildSpec("consumer:t1", "actors.sessions.stream_consumer.StreamConsumer", kind="StreamConsumer",
                         args=args, restart=Restart.TEMPORARY))
    host.broadcast(Directory(version=1, adapters=((platform, adapter),)))
