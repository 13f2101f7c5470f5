"""Storage tests: async test functions run under asyncio.run (no pytest-asyncio needed).

Every test that takes ``db_path`` runs on both backends (``backend``): SQLite (a file in the test's temp dir) and
PostgreSQL (a real server started once per run: tests/servers/postgresql.py, a throwaway database per test module and
a fresh schema per test, so each test starts from an empty store as it does with a new file). ``db_path`` is then the
libpq URL that ``Store.open`` takes in place of a file. ``sqlite_path``: a test about SQLite's file itself.
"""
from __future__ import annotations

import asyncio
import inspect
import itertools
from urllib.parse import quote

import pytest

from tests.servers.postgresql import PostgreSQL

BACKENDS = ("sqlite", "postgresql")
# Modules whose PostgreSQL run is not there yet, and what it lacks.
NOT_ON_POSTGRESQL: dict[str, str] = {
}
_schemas = itertools.count(1)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        asyncio.run(pyfuncitem.obj(**kwargs))
        return True
    return None


@pytest.fixture(scope="session")
def postgresql_server():
    server = PostgreSQL().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def postgresql_database(postgresql_server):
    name = postgresql_server.create_database()
    yield name
    postgresql_server.drop_database(name)


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def sqlite_path(tmp_path):
    return tmp_path / "gateway.db"


@pytest.fixture
def db_path(request, backend, tmp_path):
    """Where the test's store lives: a SQLite file, or a fresh schema of the module's PostgreSQL database."""
    if backend == "sqlite":
        return tmp_path / "gateway.db"
    missing = NOT_ON_POSTGRESQL.get(request.module.__name__.rsplit(".", 1)[-1])
    if missing:
        pytest.skip(f"PostgreSQL: {missing}")
    server: PostgreSQL = request.getfixturevalue("postgresql_server")
    database = request.getfixturevalue("postgresql_database")
    schema = f"t{next(_schemas)}"
    import psycopg
    with psycopg.connect(server.dsn(database), password=server.password, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return (server.dsn(database).replace("@", f":{quote(server.password)}@", 1)
            + f"?options={quote(f'-csearch_path={schema}')}")
