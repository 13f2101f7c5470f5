"""A PostgreSQL server that cannot be reached (down, or the connection cut under a live store) is
``DatabaseUnreachable``, a ``StorageUnavailable``: supervisors wait it out and restart the actor on a new connection
(supervision/spec.py) instead of counting it toward their restart intensity. A wrong password stays a plain
``StorageError``: waiting does not fix it."""
from __future__ import annotations

import psycopg
import pytest

from storage import Store, StorageError, StorageUnavailable
from storage.errors import DatabaseUnreachable
from tests.servers.postgresql import ROLE, free_port

pytestmark = pytest.mark.timeout(60)


async def test_a_server_that_is_not_there_is_unreachable_not_a_plain_error():
    with pytest.raises(DatabaseUnreachable, match="cannot be reached") as caught:
        await Store.open(f"postgresql://{ROLE}:x@127.0.0.1:{free_port()}/gateway?connect_timeout=10")
    assert isinstance(caught.value, StorageUnavailable)


async def test_a_connection_cut_under_a_live_store_is_unreachable(postgresql_server, postgresql_path):
    async with await Store.open(postgresql_path) as store:
        await store.memory.add("default", "chat:x", "before the cut", 10, now=1.0)
        with psycopg.connect(postgresql_path, autocommit=True) as admin:   # the server ends every other session
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                          "current_database() AND pid <> pg_backend_pid()")
        with pytest.raises(StorageUnavailable, match="cannot be reached"):
            await store.memory.add("default", "chat:x", "after the cut", 10, now=2.0)
    async with await Store.open(postgresql_path) as store:   # a new connection works, and nothing was half-written
        assert [e.text for e in await store.memory.entries("default", "chat:x")] == ["before the cut"]


@pytest.mark.parametrize("inline", [False, True], ids=["async", "inline"])
async def test_a_store_whose_connection_was_cut_opens_a_new_one_at_its_next_transaction(postgresql_server,
                                                                                        postgresql_path, inline):
    """A host cut off long enough for the server to end its sessions, then back: each store reconnects at its next
    transaction's BEGIN, so no component is left on a dead connection (the one that was cut fails, once)."""
    async with await Store.open(postgresql_path, inline=inline) as store:
        await store.memory.add("default", "chat:y", "before the cut", 10, now=1.0)
        with psycopg.connect(postgresql_path, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                          "current_database() AND pid <> pg_backend_pid()")
        with pytest.raises(StorageUnavailable):
            await store.memory.add("default", "chat:y", "during the cut", 10, now=2.0)
        await store.memory.add("default", "chat:y", "after the cut", 10, now=3.0)
        assert [e.text for e in await store.memory.entries("default", "chat:y")] == ["before the cut",
                                                                                    "after the cut"]


async def test_a_wrong_password_is_a_plain_storage_error(postgresql_server, postgresql_database):
    wrong = postgresql_server.dsn(postgresql_database).replace("@", ":not-the-password@", 1)
    with pytest.raises(StorageError, match="password authentication failed") as caught:
        await Store.open(wrong)
    assert not isinstance(caught.value, StorageUnavailable)
