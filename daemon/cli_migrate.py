"""``run_gateway.py storage migrate``: the state dir's SQLite state copied into an empty PostgreSQL database, or back.

The copy and its verification are storage/migrate.py's; here: which side is which, the password, and the refusals
an operator must hear before anything is read (a gateway running on this state dir, a DSN that is no PostgreSQL
URL). The SQLite side is always this state dir's ``gateway.db``; the PostgreSQL side the ``--dsn`` given, else the
configuration's ``[storage] dsn``.
"""
from __future__ import annotations

import asyncio

from common.runfiles import RunFiles
from daemon.cli_output import EX_USAGE, fail, out
from daemon.cli_parsing import add_json, command
from storage import SchemaTooNew, Store, StorageError
from storage.location import database_password, is_postgresql, store_location
from storage.migrate import migrate_store
from supervision.storage_access import store_path

NO_PASSWORD_HINT = ("the server asks for a password and none was given: --password-env NAME (a variable holding it) "
                    "or --password-file FILE (readable by you only), or [storage] password_env / password_file")


def add_parsers(sub) -> None:
    storage = command(sub, "storage", "the database itself: migrate between SQLite and PostgreSQL",
                      "The gateway's database as a whole. `storage migrate` copies this state dir's whole state\n"
                      "between its SQLite file and a PostgreSQL database, with the gateway stopped.",
                      "storage migrate --to postgresql --dsn postgresql://gateway@db.internal/gateway")
    ssub = storage.add_subparsers(dest="action", metavar="ACTION", required=True)
    migrate = command(
        ssub, "migrate", "copy the whole state to PostgreSQL (or back to SQLite), verified row by row",
        "Copy every row of this state dir's state, table by table, from one backend into an EMPTY database of the\n"
        "other, in one transaction on the target: a copy that fails, is interrupted or does not verify leaves the\n"
        "target as it was. Before committing, every table is read back and its row count and digest compared with\n"
        "the source's; the figures are printed. Refused while a gateway runs with this state dir (stop it first;\n"
        "from PostgreSQL, stop every other host that uses that database too: only this state dir is checked),\n"
        "and when the target holds any row or has another schema version.\n"
        "  --to postgresql: from <state_dir>/gateway.db into the database of --dsn (empty; its tables are made here);\n"
        "  --to sqlite:     from the database of --dsn into <state_dir>/gateway.db (absent or empty).\n"
        "Then set [storage] backend (and dsn) to the target's and start the gateway. The search index is rebuilt\n"
        "on the target from the transcript. The source is only read: it stays as it was.",
        "storage migrate --to postgresql --dsn postgresql://gateway@db.internal/gateway --password-env PGPASS\n"
        "storage migrate --to sqlite --dsn postgresql://gateway@127.0.0.1/gateway --password-file ~/.gw-db")
    migrate.add_argument("--to", required=True, choices=("postgresql", "sqlite"),
                         help="the backend the state is copied into")
    migrate.add_argument("--dsn", metavar="URL",
                         help="the PostgreSQL database, a libpq URL without its password (default: [storage] dsn)")
    password = migrate.add_mutually_exclusive_group()
    password.add_argument("--password-env", metavar="NAME",
                          help="the environment variable holding the database password (default: [storage] "
                               "password_env / password_file, else libpq's own: PGPASSWORD, ~/.pgpass)")
    password.add_argument("--password-file", metavar="FILE", help="a file holding the password, readable by you only")
    add_json(storage, migrate)


def _database(config: dict, args) -> dict:
    """The [storage] settings of the PostgreSQL side: the configuration's, with what the command line gives."""
    configured = dict(config.get("storage") or {})
    given = {"backend": "postgresql", "dsn": args.dsn or configured.get("dsn") or ""}
    if args.password_env or args.password_file:
        given.update(password_env=args.password_env or "", password_file=args.password_file or "")
    else:
        given.update(password_env=configured.get("password_env") or "",
                     password_file=configured.get("password_file") or "")
    return given


def cmd_storage(config: dict, args) -> int:
    state_dir = config["gateway"]["state_dir"]
    running = RunFiles(state_dir).running_pid()
    if running:
        return fail(args, f"error: a gateway is running with state dir {state_dir} (pid {running}): stop it first "
                          "(`run_gateway.py stop`), so that the copy is the whole state")
    database = _database(config, args)
    if not is_postgresql(database["dsn"]):
        return fail(args, "error: --dsn (or [storage] dsn) must be a PostgreSQL URL, postgresql://USER@HOST/DATABASE"
                          + (f"; got {database['dsn']!r}" if database["dsn"] else ""), EX_USAGE)
    try:
        password_given = database_password(database) is not None
        dsn = store_location(database, store_path(config))
    except StorageError as exc:
        return fail(args, f"error: {exc}")
    sqlite_file = store_path(config)
    if args.to == "postgresql" and not sqlite_file.exists():
        return fail(args, f"error: no SQLite database at {sqlite_file}: nothing to migrate")
    source, target = (sqlite_file, dsn) if args.to == "postgresql" else (dsn, sqlite_file)
    if args.to == "sqlite":
        sqlite_file.parent.mkdir(parents=True, exist_ok=True)
    durability = config["storage"]["durability"]

    async def go():
        source_store = await Store.open(source, durability)
        try:
            target_store = await Store.open(target, durability)
            try:
                return await migrate_store(source_store, target_store)
            finally:
                await target_store.close()
        finally:
            await source_store.close()
    try:
        figures = asyncio.run(go())
    except SchemaTooNew as exc:
        return fail(args, f"error: schema versions differ: {exc}")
    except StorageError as exc:
        hint = f" ({NO_PASSWORD_HINT})" if "no password supplied" in str(exc) and not password_given else ""
        return fail(args, f"error: {exc}{hint}; no row was written")
    names = {"source": describe(source), "target": describe(target)}
    rows = sum(f.rows for f in figures)
    lines = [f"copied {names['source']} -> {names['target']}"]
    lines += [f"  {f.table:<18} {f.rows:>9} rows  sha256 {f.digest[:16]}" for f in figures]
    lines.append(f"verified: {rows} rows in {len(figures)} tables; each table's row count and digest are the same "
                 "in the source and the target")
    lines.append(f"now set [storage] backend = \"{args.to}\"" + (" and its dsn" if args.to == "postgresql" else "")
                 + " before starting the gateway")
    return out(args, {"ok": True, **names, "rows": rows, "verified": True,
                      "tables": [{"table": f.table, "rows": f.rows, "sha256": f.digest} for f in figures]},
               0, "\n".join(lines))


def describe(location) -> str:
    """A database named for the output: a PostgreSQL URL without its password, a SQLite file's path."""
    if not is_postgresql(location):
        return str(location)
    from storage.postgres import describe as without_password   # loads psycopg: PostgreSQL's side only
    return without_password(location)
