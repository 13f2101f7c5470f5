"""The PostgreSQL backend: the storage modules' SQL, written for SQLite, run on PostgreSQL through psycopg 3.

The seam is the connection. Every storage transaction is a coroutine ``fn(conn, *args)`` that uses three things of
``conn``: ``await conn.execute(sql, params)`` (its ``rowcount`` and ``lastrowid``), ``await
conn.execute_fetchall(sql, params)`` and ``conn.in_transaction`` (db.py). On SQLite ``conn`` is aiosqlite's
connection itself (or inline.py's), untouched: no statement is looked at, nothing is added on that path. On
PostgreSQL it is ``PostgresConnection`` (or its inline twin), which turns each statement text into PostgreSQL's once
and keeps the result (``translate``: a dict look-up per statement after the first):

* ``?`` placeholders become ``%s`` (and a literal ``%`` becomes ``%%``); ``IS ?`` (SQLite's equality that holds for
  two NULLs too) becomes ``IS NOT DISTINCT FROM %s``;
* ``INSERT OR IGNORE`` becomes ``INSERT ... ON CONFLICT DO NOTHING``; ``INSERT OR REPLACE`` an upsert on the
  table's primary key (``PRIMARY_KEYS``; the tables written so have no other unique key and nothing references
  them, so replacing and updating the row are the same);
* an ``INSERT`` into a table whose key SQLite assigns (its rowid: ``ASSIGNED_KEYS``) gets ``RETURNING`` that key,
  which the result gives as ``lastrowid``, as sqlite3's cursor does;
* ``BEGIN IMMEDIATE`` (a write: SQLite lets one writer in at a time) becomes a SERIALIZABLE transaction that takes
  the writers' lock before its snapshot, and ``BEGIN DEFERRED`` (a read) a REPEATABLE READ one, one snapshot for all
  its statements. As on SQLite a second writer waits for the first (on every host sharing the database); should a
  serialization failure still happen, it counts as BUSY (``is_busy``), so the whole transaction is retried exactly
  as a SQLite transaction that met a lock is (db.py): a transaction's outcome is the one it would have had alone.
* SQLite's scalar ``max(a, b)`` and ``instr(haystack, needle)`` exist as functions of the schema (``FUNCTIONS``).

The schema is the same list of migrations (schema.py), each statement translated as it is applied
(``translate_ddl``): BLOB is BYTEA, REAL is DOUBLE PRECISION, INTEGER is BIGINT (SQLite's integers are 64-bit), an
assigned key is an identity column, a trigger becomes a PL/pgSQL function and its trigger, and the FTS5 index is a
table with a ``tsvector`` column and a GIN index (search_index.py has the search for each). The version
that SQLite keeps in ``PRAGMA user_version`` is the row of ``gateway_schema``; migrations run under an advisory
lock, in one transaction with the version bump (a crash mid-migration leaves the old version; two hosts opening a
fresh database at once migrate it once).

Why psycopg 3 (not asyncpg): it has the same connection in a synchronous and an asynchronous form (inline stores
and the migration run without an event loop), it speaks libpq, so every libpq DSN, environment variable, TLS and
service-file option an operator knows works unchanged, and its ``%s`` parameters are a one-to-one rewrite of ``?``.
It is kept by the PostgreSQL community (the psycopg project), with binary wheels for every supported Python.

What survives kill -9 of the gateway: every transaction whose COMMIT returned; the server holds it (with the
server's own synchronous_commit; ``durability='full'`` asks for a flush to disk at each commit).
"""
from __future__ import annotations

import re
from typing import Any, Optional, Sequence
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.adapt import Dumper, Loader
from psycopg.pq import TransactionStatus
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .errors import Driver, StorageError

# Tables whose key SQLite assigns on insert (a rowid alias): table -> key column, an identity column here.
ASSIGNED_KEYS = {"transcript": "event_id", "inbox": "seq", "memory": "memory_id"}
# The primary keys of the tables written with INSERT OR REPLACE.
PRIMARY_KEYS = {"obligation_parts": ("obligation_id", "part_index"), "session_display": ("session_id",),
                "api_sidecar": ("session_id", "turn_id"), "pending_receipts": ("platform", "platform_message_id")}

FUNCTIONS = [
    # SQLite's scalar max of two values (the aggregate max of one column is PostgreSQL's own).
    "CREATE OR REPLACE FUNCTION max(a DOUBLE PRECISION, b DOUBLE PRECISION) RETURNS DOUBLE PRECISION "
    "LANGUAGE sql IMMUTABLE AS $$ SELECT GREATEST(a, b) $$",
    "CREATE OR REPLACE FUNCTION instr(haystack BYTEA, needle BYTEA) RETURNS INTEGER "
    "LANGUAGE sql IMMUTABLE AS $$ SELECT position(needle IN haystack) $$",
    "CREATE OR REPLACE FUNCTION instr(haystack TEXT, needle TEXT) RETURNS INTEGER "
    "LANGUAGE sql IMMUTABLE AS $$ SELECT position(needle IN haystack) $$",
]

_BUSY_STATES = ("40001", "40P01", "55P03")   # serialization_failure, deadlock_detected, lock_not_available
_FULL_STATES = ("53100",)                     # disk_full
# admin_shutdown, crash_shutdown, cannot_connect_now (starting or stopping), too_many_connections; and class 08.
_UNREACHABLE_STATES = ("57P01", "57P02", "57P03", "53300")
# libpq's own words where no server answered, so no SQLSTATE: refused, gone mid-session, closed, timed out. A wrong
# or missing password, an unknown database or role are not among them: those stay errors an operator must fix.
_UNREACHABLE_WORDS = ("Connection refused", "server closed the connection", "the connection is closed",
                      "timeout expired", "No route to host", "could not translate host name", "Connection reset",
                      "the connection is lost")


def is_busy(exc: BaseException) -> bool:
    """A serialization failure or deadlock: the transaction lost a race with another and may simply run again."""
    return isinstance(exc, psycopg.Error) and getattr(exc, "sqlstate", None) in _BUSY_STATES


def is_full(exc: BaseException) -> bool:
    return isinstance(exc, psycopg.Error) and getattr(exc, "sqlstate", None) in _FULL_STATES


def is_unreachable(exc: BaseException) -> bool:
    """The server refused or lost the connection (down, restarting, no slot free): the same call on a new
    connection succeeds once it is back."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = getattr(exc, "sqlstate", None)
    if state is not None:
        return state.startswith("08") or state in _UNREACHABLE_STATES
    return any(words in str(exc) for words in _UNREACHABLE_WORDS)


DRIVER = Driver((psycopg.Error,), is_busy, is_full, is_unreachable)


def describe(dsn: str) -> str:
    """The DSN without any password in it (user info or parameter), for messages and ``Store.path``."""
    parts = urlsplit(dsn)
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}"
    query = "&".join(p for p in parts.query.split("&") if p and not p.startswith("password="))
    return urlunsplit(parts._replace(netloc=netloc, query=query))


# ------------------------------------------------------------------------------------------------- statements
class Statement:
    __slots__ = ("text", "returning")

    def __init__(self, text: str, returning: bool) -> None:
        self.text, self.returning = text, returning


# A write takes the writers' lock (EXCLUSIVE on gateway_schema: plain reads of it go on, another writer waits) before
# its snapshot is taken (LOCK TABLE takes none; the first query does), so writers run one after the other as on
# SQLite and their SERIALIZABLE transactions never fail for overlapping: a shard's group of handlers, which cannot be
# run again once its handlers ran, would lose every cell of the group to one conflict. Reads take no lock.
_TRANSACTION_STARTS = {"BEGIN IMMEDIATE": "BEGIN ISOLATION LEVEL SERIALIZABLE; "
                                          "LOCK TABLE gateway_schema IN EXCLUSIVE MODE",
                       "BEGIN IMMEDIATE /* apart */": "BEGIN ISOLATION LEVEL SERIALIZABLE",
                       "BEGIN DEFERRED": "BEGIN ISOLATION LEVEL REPEATABLE READ"}
_INSERT = re.compile(r"^\s*INSERT\s+(?:OR\s+(IGNORE|REPLACE)\s+)?INTO\s+(\w+)\s*(\(([^)]*)\))?", re.IGNORECASE)
_IS_PARAM = re.compile(r"\bIS\s+\?", re.IGNORECASE)            # SQLite's IS compares with NULL too
_IS_NOT_PARAM = re.compile(r"\bIS\s+NOT\s+\?", re.IGNORECASE)
_statements: dict[str, Statement] = {}
MAX_STATEMENTS = 4096   # distinct texts kept (the stores write a few hundred; an IN list has one per length)


def translate(sql: str) -> Statement:
    """PostgreSQL's form of a statement written for SQLite, computed once per statement text."""
    found = _statements.get(sql)
    if found is None:
        if len(_statements) >= MAX_STATEMENTS:
            _statements.clear()
        found = _statements[sql] = _translate_statement(sql)
    return found


def _placeholders(sql: str) -> str:
    """``?`` -> ``%s`` outside quoted literals and names; ``%`` -> ``%%`` everywhere (psycopg reads every ``%``)."""
    out, quote = [], None
    for ch in sql:
        if quote:
            if ch == quote:
                quote = None
            out.append("%%" if ch == "%" else ch)
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        else:
            out.append("%s" if ch == "?" else "%%" if ch == "%" else ch)
    return "".join(out)


def _translate_statement(sql: str) -> Statement:
    start = _TRANSACTION_STARTS.get(sql.strip())
    if start is not None:
        return Statement(start, False)
    text = _placeholders(_IS_NOT_PARAM.sub("IS DISTINCT FROM ?", _IS_PARAM.sub("IS NOT DISTINCT FROM ?", sql)))
    insert = _INSERT.match(text)
    if insert is None:
        return Statement(text, False)
    conflict, table, columns = insert.group(1), insert.group(2), insert.group(4)
    text = re.sub(r"^\s*INSERT\s+OR\s+(IGNORE|REPLACE)\s+INTO", "INSERT INTO", text, flags=re.IGNORECASE)
    if conflict and conflict.upper() == "IGNORE":
        text += " ON CONFLICT DO NOTHING"
    elif conflict:
        keys = PRIMARY_KEYS[table]
        names = [c.strip() for c in columns.split(",")]
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in names if c not in keys)
        text += f" ON CONFLICT ({', '.join(keys)}) " + (f"DO UPDATE SET {updates}" if updates else "DO NOTHING")
    key = ASSIGNED_KEYS.get(table)
    if key is not None and "RETURNING" not in text.upper():
        return Statement(f"{text} RETURNING {key}", True)
    return Statement(text, False)


# ------------------------------------------------------------------------------------------------- schema
_TRIGGER = re.compile(r"CREATE TRIGGER (\w+) (BEFORE|AFTER) (INSERT|UPDATE|DELETE) ON (\w+)\s+BEGIN (.*?);\s*END",
                      re.DOTALL | re.IGNORECASE)
_FTS_TABLE = re.compile(r"CREATE VIRTUAL TABLE (\w+) USING fts5", re.IGNORECASE)
_CREATE_TABLE = re.compile(r"^\s*CREATE TABLE (\w+)", re.IGNORECASE)


def translate_ddl(statement: str) -> list[str]:
    """PostgreSQL's statements for one schema statement of schema.py."""
    if statement.strip().upper().startswith("PRAGMA"):
        return []   # application_id: gateway_schema's row says what the database is
    trigger = _TRIGGER.search(statement)
    if trigger:
        name, when, event, table, body = trigger.groups()
        body = re.sub(r"SELECT RAISE\(ABORT, ('[^']*')\)", r"RAISE EXCEPTION \1", body)
        body = re.sub(r"\bnew\.", "NEW.", re.sub(r"\bold\.", "OLD.", body))
        return [f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body}; RETURN NULL; END $$",
                f"CREATE TRIGGER {name} {when} {event} ON {table} FOR EACH ROW EXECUTE FUNCTION {name}()"]
    fts = _FTS_TABLE.search(statement)
    if fts:
        # The full-text index: rowid is the transcript event's id, as in FTS5; doc its words (search_index.py).
        name = fts.group(1)
        return [f"CREATE TABLE {name} (rowid BIGINT PRIMARY KEY, body TEXT NOT NULL, doc TSVECTOR NOT NULL)",
                f"CREATE INDEX {name}_doc ON {name} USING gin (doc)"]
    text = statement
    table = _CREATE_TABLE.match(text)
    if table and table.group(1) in ASSIGNED_KEYS:
        key = ASSIGNED_KEYS[table.group(1)]
        text = re.sub(rf"\b{key}\s+INTEGER PRIMARY KEY( AUTOINCREMENT)?",
                      f"{key} BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", text)
    text = re.sub(r"\)\s*WITHOUT ROWID\s*$", ")", text)
    text = re.sub(r"\bBLOB\b", "BYTEA", text)
    text = re.sub(r"\bREAL\b", "DOUBLE PRECISION", text)
    text = re.sub(r"\bINTEGER\b", "BIGINT", text)
    return [text]


# ------------------------------------------------------------------------------------------------- values
class _BoolAsInteger(Dumper):
    """SQLite stores True as 1: so here (the columns are integers, never booleans)."""
    oid = psycopg.postgres.types["int8"].oid

    def dump(self, obj: bool) -> bytes:
        return b"1" if obj else b"0"


class _NumericAsNumber(Loader):
    """A SUM of integers is NUMERIC in PostgreSQL: an int (or a float) as SQLite gives, never a Decimal."""

    def load(self, data) -> Any:
        text = bytes(data).decode()
        try:
            return int(text)
        except ValueError:
            return float(text)


def _adapt(conn) -> None:
    conn.adapters.register_dumper(bool, _BoolAsInteger)
    conn.adapters.register_loader("numeric", _NumericAsNumber)


# ------------------------------------------------------------------------------------------------- connections
class Result:
    """What ``execute`` gives back: ``rowcount`` and ``lastrowid`` as sqlite3's cursor has them."""
    __slots__ = ("rowcount", "lastrowid", "rows")

    def __init__(self, rowcount: int, lastrowid: Optional[int], rows: list) -> None:
        self.rowcount, self.lastrowid, self.rows = rowcount, lastrowid, rows

    def fetchall(self) -> list:
        return self.rows

    def fetchone(self) -> Optional[tuple]:
        return self.rows[0] if self.rows else None


def _result(cursor, statement: Statement) -> Result:
    rows = cursor.fetchall() if cursor.description is not None else []
    lastrowid = rows[0][0] if statement.returning and rows else None
    return Result(cursor.rowcount, lastrowid, rows)


class PostgresConnection:
    """The part of aiosqlite's Connection the storage code uses, on a psycopg ``AsyncConnection``. ``reopen``: a
    new connection for one the server or the network closed, taken at the next transaction's BEGIN (between
    transactions nothing is lost by it: what the old one had not committed was rolled back with it)."""
    dialect = "postgresql"

    def __init__(self, conn: psycopg.AsyncConnection, reopen=None) -> None:
        self._conn = conn
        self._reopen = reopen

    async def execute(self, sql: str, params: Sequence = ()) -> Result:
        statement = translate(sql)
        if self._reopen is not None and self._conn.closed and statement.text.startswith("BEGIN"):
            self._conn = await self._reopen()
        cursor = self._conn.cursor()
        await cursor.execute(statement.text, params)
        rows = await cursor.fetchall() if cursor.description is not None else []
        return Result(cursor.rowcount, rows[0][0] if statement.returning and rows else None, rows)

    async def execute_fetchall(self, sql: str, params: Sequence = ()) -> list:
        return (await self.execute(sql, params)).rows

    @property
    def in_transaction(self) -> bool:
        return self._conn.info.transaction_status != TransactionStatus.IDLE

    async def close(self) -> None:
        await self._conn.close()

    def stop(self) -> None:
        self._conn.pgconn.finish()


class PostgresInlineConnection:
    """inline.py's InlineConnection on a synchronous psycopg ``Connection``: nothing here ever suspends."""
    dialect = "postgresql"
    driver = DRIVER

    def __init__(self, conn: psycopg.Connection, reopen=None) -> None:
        self._conn = conn
        self._reopen = reopen    # as PostgresConnection's, synchronous

    async def execute(self, sql: str, params: Sequence = ()) -> Result:
        return self.run(sql, params)

    def run(self, sql: str, params: Sequence = ()) -> Result:
        statement = translate(sql)
        if self._reopen is not None and self._conn.closed and statement.text.startswith("BEGIN"):
            self._conn = self._reopen()
        return _result(self._conn.execute(statement.text, params), statement)

    async def execute_fetchall(self, sql: str, params: Sequence = ()) -> list:
        return self.run(sql, params).rows

    @property
    def in_transaction(self) -> bool:
        return self._conn.info.transaction_status != TransactionStatus.IDLE

    def execute_now(self, sql: str) -> None:
        self.run(sql)

    async def close(self) -> None:
        self._conn.close()

    def stop(self) -> None:
        self._conn.close()


# ------------------------------------------------------------------------------------------------- opening
class _MigrationConnection:
    """What a data migration step (a function of the connection, schema.py) is given: ``execute`` returning rows'
    cursor-like result, synchronously, as sqlite3's connection does."""

    def __init__(self, conn: PostgresInlineConnection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence = ()) -> Result:
        return self._conn.run(sql, params)


def _version(conn: PostgresInlineConnection) -> Optional[int]:
    """gateway_schema's version, None where this database has none yet; refuses a database of something else."""
    exists = conn.run("SELECT to_regclass('gateway_schema') IS NOT NULL").rows[0][0]
    if not exists:
        return None
    rows = conn.run("SELECT application_id, version FROM gateway_schema").rows
    return rows[0][1] if rows else None


def migrate(conn: PostgresInlineConnection, migrations: Sequence, where: str, application_id: int,
            refuse_if_newer) -> int:
    """db.migrate for PostgreSQL: every pending step, translated, in one transaction with the version bump, under
    a transaction-scoped advisory lock (two openers of a fresh database: the second finds the work done)."""
    latest = len(migrations)
    found = _version(conn)
    if found is not None:
        refuse_if_newer(found, latest, where)
        if found == latest:
            return latest
    conn.run("BEGIN")
    try:
        conn.run(f"SELECT pg_advisory_xact_lock({int(application_id)})")
        conn.run("CREATE TABLE IF NOT EXISTS gateway_schema (application_id BIGINT NOT NULL, version BIGINT NOT NULL)")
        rows = conn.run("SELECT application_id, version FROM gateway_schema").rows
        if rows and rows[0][0] != application_id:
            raise StorageError(f"{where}: not an agent-gateway database (application_id {rows[0][0]:#x})")
        found = rows[0][1] if rows else 0
        refuse_if_newer(found, latest, where)
        if not rows:
            conn.run("INSERT INTO gateway_schema (application_id, version) VALUES (?, 0)", (application_id,))
            for statement in FUNCTIONS:
                conn.run(statement)
        for version in range(found + 1, latest + 1):
            step = migrations[version - 1]
            if callable(step):
                step(_MigrationConnection(conn))   # a data migration: its statements translated like any other
            else:
                for statement in step:
                    for translated in translate_ddl(statement):
                        conn._conn.execute(translated)
            conn.run("UPDATE gateway_schema SET version = ?", (version,))
        conn.run("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.run("ROLLBACK")
        raise
    return latest


# A host cut off from the network in the middle of a transaction must not hold its locks for the hours TCP takes to
# notice: the server ends a session idle in a transaction after 5 s (its locks, the writers' lock first, go with it,
# so the other hosts go on and one takes its leases over: storage/leases.py). A lock is waited for 2 s at most, then
# the transaction is retried as on a busy SQLite file (is_busy): so the lock requests a cut host left queued give up
# instead of being granted, one after the other, to a host that will never use them (each would hold the writers'
# lock until the idle timeout). Keepalives and the user timeout make this side's calls fail within seconds instead
# of hanging on a dead peer, and a connection attempt to an unreachable server gives up after 5 s (a store reopens
# its connection at its next transaction: an inline store's attempt holds its thread that long). What the
# operator's DSN sets itself is kept.
IDLE_IN_TRANSACTION = "-c idle_in_transaction_session_timeout=5000 -c lock_timeout=2000"
KEEPALIVES = {"keepalives": "1", "keepalives_idle": "5", "keepalives_interval": "2", "keepalives_count": "3",
              "tcp_user_timeout": "10000", "connect_timeout": "5"}


def with_timeouts(dsn: str) -> str:
    """``dsn`` with the settings above added where it does not set them (its ``options`` kept, ours after them)."""
    given = conninfo_to_dict(dsn)
    added = {**KEEPALIVES, **given}
    if "idle_in_transaction_session_timeout" not in str(given.get("options", "")):
        added["options"] = f"{given.get('options', '')} {IDLE_IN_TRANSACTION}".strip()
    return make_conninfo(**added)


def connect(dsn: str, durability: str) -> psycopg.Connection:
    conn = psycopg.connect(with_timeouts(dsn), autocommit=True)
    _configure(conn, durability)
    return conn


async def connect_async(dsn: str, durability: str) -> psycopg.AsyncConnection:
    conn = await psycopg.AsyncConnection.connect(with_timeouts(dsn), autocommit=True)
    _adapt(conn)
    if durability == "full":
        await conn.execute("SET synchronous_commit = on")
    return conn


def _configure(conn, durability: str) -> None:
    _adapt(conn)
    if durability == "full":
        conn.execute("SET synchronous_commit = on")   # each commit flushed to the server's disk before it returns
