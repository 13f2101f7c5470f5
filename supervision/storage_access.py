"""How actors reach storage (one narrow way in: ``storage.Store``; no SQL outside ``storage/``).

* Actors with an async bridge (adapters, the sweeper, the metrics actor) open one Store on their bridge loop and make
  short calls synchronously from their own thread with ``StoreUser.db(coro)``: a commit is ~1 ms, far below what
  would hold up a mailbox, and it keeps the state machines readable. An adapter's store is inline on that loop
  (storage/inline.py): its intake writes there, and a write costs what SQLite does instead of two thread hops.
* Cells (sessions, stream consumers) share their shard's one inline Store (``CellStoreUser``), the handlers of one
  run of the cells one transaction, each handler a part of it (supervision/cell_host.py).
* Supervisors fork children and must not run threads (aiosqlite runs one per connection), so they use
  ``transient_call``: open, query, close — no thread outlives the call.
"""
from __future__ import annotations

import asyncio
import os
import concurrent.futures
from pathlib import Path

from storage import Store, StorageBusy
from storage.location import is_postgresql, store_location as configured_location
from storage.inline import run_inline
from common.cluster import WORKER_STATE_ENV
from common.config import setting

STORE_CALL_TIMEOUT_S = 30.0


def store_path(config: dict) -> Path:
    """The database of this host: an actor placed on a worker host opens the worker's own (its state dir is in the
    environment the worker's actor processes inherit: daemon/worker.py), never a path of the leader's disk."""
    return Path(os.environ.get(WORKER_STATE_ENV) or config["gateway"]["state_dir"]) / "gateway.db"


def store_location(config: dict) -> Path | str:
    """What ``Store.open`` is given: this host's SQLite file (``store_path``), or the PostgreSQL database of
    [storage] backend = "postgresql", its password added (storage/location.py)."""
    return configured_location(config.get("storage") or {}, store_path(config))


def store_exists(location: Path | str) -> bool:
    """Whether a store was ever made there: a PostgreSQL database is the operator's, there from the start."""
    return is_postgresql(location) or Path(location).exists()


def durability(config: dict) -> str:
    return setting(config, "storage", "durability")


def transient_call(config: dict, fn):
    """Run ``await fn(store)`` on a fresh connection and close it; returns fn's result."""
    async def run():
        store = await Store.open(store_location(config), durability(config))
        try:
            return await fn(store)
        finally:
            await store.close()
    return asyncio.run(run())


class StoreUser:
    """Mixin for bridge actors: ``open_store()`` in on_start, then ``self.db(store_coroutine)``."""
    store: Store | None = None

    def open_store(self) -> None:
        self.store = self.db(Store.open(store_location(self.config), durability(self.config)))

    def db(self, coro, timeout: float = STORE_CALL_TIMEOUT_S):
        future = asyncio.run_coroutine_threadsafe(coro, self.bridge.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            # Storage that cannot answer in this long is held up from outside (a lock, a stalled disk). The call may
            # still commit later; callers either repeat it (the writes they repeat are idempotent) or crash, and a
            # restart reads back what did commit.
            raise StorageBusy(f"a storage call did not finish within {timeout:g}s") from None

    def close_store(self) -> None:
        if self.store is not None and self.bridge is not None:
            try:
                self.db(self.store.close(), timeout=5)
            except Exception:  # noqa: BLE001 - closing on the way out; the WAL keeps what was committed
                pass
            self.store = None


class InlineStoreUser(StoreUser):
    """For a process actor whose storage calls all come from its own thread (a session shard, for all its cells):
    one inline connection (storage/inline.py), each call run to completion on that thread (``run_inline``). No
    thread hop and no event loop: a small transaction costs tens of microseconds instead of ~0.35 ms. Opening and
    closing run on a loop private to the thread (they are rare, and closing waits for what is pending)."""
    store_loop: asyncio.AbstractEventLoop | None = None

    def open_store(self) -> None:
        self.store_loop = asyncio.new_event_loop()
        self.store = self.store_loop.run_until_complete(
            Store.open(store_location(self.config), durability(self.config), inline=True))

    def db(self, coro, timeout: float = STORE_CALL_TIMEOUT_S):
        return run_inline(coro)

    def close_store(self) -> None:
        if self.store is not None:
            try:
                self.store_loop.run_until_complete(self.store.close())
            except Exception:  # noqa: BLE001 - closing on the way out; the WAL keeps what was committed
                pass
            self.store = None
        if self.store_loop is not None:
            self.store_loop.close()
            self.store_loop = None


class CellStoreUser(StoreUser):
    """For cells (sessions, stream consumers): the store is their shard's one connection, shared by every cell of
    the shard and called through the shard (``host.run_store``); its calls are serialised because every cell's
    handler runs on the shard's one thread. A cell never opens or closes it."""

    def open_store(self) -> None:
        self.store = self.host.store

    def db(self, coro, timeout: float = STORE_CALL_TIMEOUT_S):
        return self.host.run_store(coro)

    def close_store(self) -> None:
        self.store = None
