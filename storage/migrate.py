"""``storage migrate``: a whole state copied from one backend to the other (SQLite -> PostgreSQL, and back), verified.

The copy reads the source in one read transaction (one snapshot: a write the source takes meanwhile is either all in
the copy or not at all) and writes the target in one write transaction, table by table in ``TABLES`` order (a
table's parents before it: the schema's own order, so every foreign key finds its row). Before that transaction
commits, every table of the target is read back inside it and its row count and digest compared with the source's;
a difference raises ``MigrationRefused`` and rolls the whole copy back. So the target ends either empty, as it was,
or holding exactly the source's rows: kill -9 of the migrating process at any line leaves the target's transaction
uncommitted (nothing of it survives) and the source's rows untouched (they are only read; opening a source of an
older schema brings it up to this version first, as the gateway's own open does).

The target must be empty (every copied table without a row: ``Store.open`` has just made its schema); the source
and target schemas at the same version (both stores are opened by this code, which brings an older one up to its
version and refuses a newer one: ``SchemaTooNew``).

Not copied: the search index (``transcript_fts``) and its marks (``search_pending``), derived from the transcript
on each backend in its own form: every copied transcript event is marked pending by the schema's trigger and the
index is rebuilt from them (storage/search_index.py; a search catches up before it looks).

A digest is order-free: the SHA-256 of the sorted SHA-256 of each row's values (the two databases need not sort
text alike); values are compared as Python gives them back (integers, floats, text, bytes, NULL), so a value the
target stored differently (a float rounded, text changed by a trigger) is a difference.

Keys assigned by the database (``inbox.seq``, ``memory.memory_id``, ``transcript.event_id``) are copied as they are;
on PostgreSQL their identity sequences are then moved past the highest copied key, so a new row never takes one.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

from .errors import StorageError

# Every table of the schema that holds state, parents before children (foreign keys).
TABLES = ("sessions", "transcript", "session_display", "api_sidecar", "runtime_state", "inbox", "adapter_offsets",
          "obligations", "obligation_parts", "pacing_bans", "access_grants", "pairing_codes", "feedback", "cron_jobs",
          "cron_runs", "memory", "approvals", "pending_receipts", "tasks", "watch_state", "watch_changes",
          "agent_watches")
DERIVED = ("transcript_fts", "search_pending")   # rebuilt on the target from the transcript
# Who holds what now (storage/leases.py): a copy would hand the source's leases on.
RUNTIME = ("leases", "lease_fences")
SEQUENCED = {"transcript": "event_id", "inbox": "seq", "memory": "memory_id"}   # keys the database assigns


class MigrationRefused(StorageError):
    """The migration was refused or failed its verification: the target was left as it was."""


@dataclass(frozen=True)
class TableFigures:
    table: str
    rows: int
    digest: str


async def _columns(conn, dialect: str, table: str) -> list[str]:
    if dialect == "postgresql":
        rows = await conn.execute_fetchall(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = ? ORDER BY ordinal_position", (table,))
    else:
        rows = await conn.execute_fetchall("SELECT name FROM pragma_table_info(?) ORDER BY cid", (table,))
    return [row[0] for row in rows]


async def _tables(conn, dialect: str) -> set[str]:
    if dialect == "postgresql":
        rows = await conn.execute_fetchall(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "AND table_type = 'BASE TABLE'")
        return {row[0] for row in rows} - {"gateway_schema"}
    rows = await conn.execute_fetchall("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                       "'sqlite_%' AND name NOT LIKE 'transcript_fts_%'")
    return {row[0] for row in rows}


async def _version(conn, dialect: str) -> int:
    if dialect == "postgresql":
        return (await conn.execute_fetchall("SELECT version FROM gateway_schema"))[0][0]
    return (await conn.execute_fetchall("PRAGMA user_version"))[0][0]


def _value(value):
    return bytes(value) if isinstance(value, memoryview) else value


def digest(rows: Sequence[Sequence]) -> str:
    """The order-free digest of a table's rows (see the module's docstring)."""
    each = sorted(hashlib.sha256(repr(tuple(_value(v) for v in row)).encode()).digest() for row in rows)
    return hashlib.sha256(b"".join(each)).hexdigest()


async def _read_table(conn, table: str, columns: list[str]) -> list:
    return await conn.execute_fetchall(f"SELECT {', '.join(columns)} FROM {table}")


async def _figures(conn, tables: dict[str, list[str]]) -> list[TableFigures]:
    figures = []
    for table, columns in tables.items():
        rows = await _read_table(conn, table, columns)
        figures.append(TableFigures(table, len(rows), digest(rows)))
    return figures


def _differences(expected: list[TableFigures], found: list[TableFigures]) -> list[str]:
    return [f"{want.table}: {want.rows} rows (digest {want.digest[:12]}) in the source, {got.rows} rows "
            f"(digest {got.digest[:12]}) in the target" for want, got in zip(expected, found) if want != got]


async def _check_schemas(source_conn, source_dialect: str, target_conn, target_dialect: str) -> None:
    versions = (await _version(source_conn, source_dialect), await _version(target_conn, target_dialect))
    if versions[0] != versions[1]:
        raise MigrationRefused(f"schema versions differ: the source is at version {versions[0]}, the target at "
                               f"{versions[1]}; run this version of the gateway on both first")
    for conn, dialect, side in ((source_conn, source_dialect, "source"), (target_conn, target_dialect, "target")):
        unknown = await _tables(conn, dialect) - set(TABLES) - set(DERIVED) - set(RUNTIME)
        if unknown:
            raise MigrationRefused(f"the {side} has tables this version does not copy: {', '.join(sorted(unknown))}")


async def migrate_store(source, target) -> list[TableFigures]:
    """Copy every row of the Store ``source`` into the empty Store ``target`` (both open, schemas made), verified
    before and after the target's commit; returns each table's figures. Raises ``MigrationRefused`` (nothing
    written) for a non-empty target, a schema difference or a failed verification."""
    source_db, target_db = source._db, target._db

    async def copy(target_conn, source_conn) -> list[TableFigures]:
        await _check_schemas(source_conn, source_db.dialect, target_conn, target_db.dialect)
        columns = {table: await _columns(source_conn, source_db.dialect, table) for table in TABLES}
        for table in TABLES:
            if await target_conn.execute_fetchall(f"SELECT 1 FROM {table} LIMIT 1"):
                raise MigrationRefused(f"the target is not empty (table {table} has rows): storage migrate only "
                                       "fills an empty database")
        expected = []
        for table, names in columns.items():
            missing = set(names) - set(await _columns(target_conn, target_db.dialect, table))
            if missing:
                raise MigrationRefused(f"the target's table {table} lacks columns {', '.join(sorted(missing))}")
            rows = await _read_table(source_conn, table, names)
            insert = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
            for row in rows:
                await target_conn.execute(insert, tuple(_value(v) for v in row))
            expected.append(TableFigures(table, len(rows), digest(rows)))
            if target_db.dialect == "postgresql" and table in SEQUENCED and rows:
                key = SEQUENCED[table]
                await target_conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{key}'), "
                                          f"(SELECT max({key}) FROM {table}))")
        wrong = _differences(expected, await _figures(target_conn, columns))
        if wrong:
            raise MigrationRefused("verification failed, nothing was written to the target: " + "; ".join(wrong))
        return expected

    async def within_source_snapshot(source_conn):
        return await target_db.write(copy, source_conn), \
            {t: await _columns(source_conn, source_db.dialect, t) for t in TABLES}

    expected, columns = await source_db.read(within_source_snapshot)
    # Read back once more in a fresh transaction: what the target holds now that it committed.
    wrong = _differences(expected, await target_db.read(_figures, columns))
    if wrong:
        raise MigrationRefused("the committed target differs from the source: " + "; ".join(wrong))
    return expected
