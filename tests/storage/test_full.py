"""A full disk is a transient error for the gateway: storage says so (StorageFull), adapters retry instead of
crashing (their intake would otherwise be judged broken for good and escalate)."""
from __future__ import annotations

import sqlite3

import pytest

from actors.adapters.outbound import classify_error
from storage import StorageError, StorageFull
from storage.db import _translate


def real_full_error(tmp_path) -> sqlite3.Error:
    """SQLITE_FULL from a real database that may not grow (what a full file system gives too)."""
    db = sqlite3.connect(tmp_path / "small.db")
    db.execute("CREATE TABLE t (x BLOB)")
    db.execute("PRAGMA max_page_count = 3")
    with pytest.raises(sqlite3.Error) as caught:
        for _ in range(100):
            db.execute("INSERT INTO t VALUES (?)", (b"\0" * 4096,))
    db.close()
    return caught.value


def test_sqlite_full_becomes_storage_full_and_is_retryable(tmp_path):
    error = _translate(real_full_error(tmp_path), "put")
    assert isinstance(error, StorageFull) and "full" in str(error)
    assert classify_error(error) == ("retryable", 0.0)


def test_postgresql_disk_full_becomes_storage_full_and_a_lost_race_busy():
    """PostgreSQL's disk_full (SQLSTATE 53100) is the same transient StorageFull; a serialization failure (40001,
    a write that lost a race with another) is BUSY: the whole transaction runs again (storage/postgres.py)."""
    psycopg = pytest.importorskip("psycopg")
    from storage import postgres
    error = _translate(psycopg.errors.DiskFull("could not extend file: No space left on device"), "put",
                       driver=postgres.DRIVER)
    assert isinstance(error, StorageFull) and classify_error(error) == ("retryable", 0.0)
    assert postgres.is_busy(psycopg.errors.SerializationFailure("could not serialize access"))
    assert not postgres.is_busy(psycopg.errors.UniqueViolation("duplicate key"))


def test_other_storage_errors_stay_permanent():
    assert classify_error(StorageError("schema mismatch")) == ("permanent", 0.0)
