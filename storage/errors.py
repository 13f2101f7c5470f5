"""The exceptions storage raises. Callers catch ``StorageError`` to catch them all (see ``ledger.best_effort``)."""
from __future__ import annotations

from typing import Callable, NamedTuple


def _never(exc: BaseException) -> bool:
    return False


class Driver(NamedTuple):
    """What the transaction code needs to know of a database driver's errors: which are the driver's, which a
    retry of the whole transaction cures (BUSY), which mean a full disk, which a database server that cannot be
    reached now (db.py's SQLITE, postgres.py's DRIVER)."""
    errors: tuple
    is_busy: Callable[[BaseException], bool]
    is_full: Callable[[BaseException], bool]
    is_unreachable: Callable[[BaseException], bool] = _never


class StorageError(Exception):
    """Base class: anything the storage layer refuses or fails to do."""


class StorageUnavailable(StorageError):
    """Storage cannot be used right now for a cause outside the gateway (a full disk, a lock some other process
    holds): nothing was written, and the same call succeeds once the cause is gone. Supervisors wait such a crash
    out instead of counting it toward their restart intensity (supervision/spec.py)."""


class DatabaseUnreachable(StorageUnavailable):
    """A database server (PostgreSQL) refused or lost the connection: down, restarting, out of connection slots.
    Transient like a full disk: the actor that met it crashes with an outside cause, which its supervisor waits out
    (supervision/spec.py). Nothing of the failed transaction was committed (the server rolls back a transaction
    whose COMMIT did not return)."""


class StorageBusy(StorageUnavailable):
    """The database stayed locked by other processes for longer than the whole retry budget.

    Raised instead of sqlite3's 'database is locked' so that callers never see a raw driver error; reaching it means
    a writer held the lock for a minute, which is a bug or a hung process, not contention."""


class StorageFull(StorageUnavailable):
    """The disk (or the file system of the state dir) is full: nothing was written. Transient from the gateway's
    point of view: the same write succeeds once the operator frees space, so callers retry with backoff."""


class SchemaTooNew(StorageError):
    """The database file was written by a newer version of the code; opening it could corrupt it."""


class RecordError(StorageError, ValueError):
    """A value cannot be encoded as a record, or stored bytes are not a record this code can read."""


class IllegalTransition(StorageError):
    """A state change that the state machine does not allow (e.g. delivered -> attempting)."""


class StaleFence(StorageError):
    """A mutation presented a fence (claim generation) that is no longer current: someone claimed the row since."""


class NotFound(StorageError, KeyError):
    """The session, inbox row or obligation does not exist."""

    def __str__(self) -> str:  # KeyError's repr-quoting makes messages hard to read
        return str(self.args[0]) if self.args else "not found"


class AmbiguousId(NotFound):
    """A session id prefix that more than one session's id starts with; the message lists them."""


class ImportRefused(StorageError):
    """An import file is corrupted, truncated, not in canonical form, or conflicts with what is stored.

    Raised before anything is written, or from inside the import transaction (which is then rolled back)."""


class TurnRunning(StorageError):
    """A session to be exported with its live state has a turn in flight (running, or cut by a crash): moved as it
    is, the destination would have to resume it, which only an explicit ``interrupted=True`` asks for."""
