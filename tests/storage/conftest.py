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


class Schemas:
    """``databases / "a.db"``: as ``tmp_path / "a.db"`` names a file, a fresh schema of the module's PostgreSQL
    database (the same one for the same name within a test), as the libpq URL ``Store.open`` takes."""

    def __init__(self, server: PostgreSQL, database: str) -> None:
        self.server, self.database = server, database
        self._made: dict[str, str] = {}

    def __truediv__(self, name: str) -> str:
        if name not in self._made:
            schema = f"t{next(_schemas)}"
            import psycopg
            with psycopg.connect(self.server.dsn(self.database), password=self.server.password,
                                 autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
            self._made[name] = (self.server.dsn(self.database).replace("@", f":{quote(self.server.password)}@", 1)
                                + f"?options={quote(f'-csearch_path={schema}')}")
        return self._made[name]


@pytest.fixture
def databases(request, backend, tmp_path):
    """Where a test's stores live (``databases / "a.db"``): files in its temp dir, or fresh PostgreSQL schemas."""
    if backend == "sqlite":
        return tmp_path
    return Schemas(request.getfixturevalue("postgresql_server"), request.getfixturevalue("postgresql_database"))


@pytest.fixture
def postgresql_path(postgresql_server, postgresql_database) -> str:
    """A fresh PostgreSQL schema, for a test about PostgreSQL itself (the one of ``sqlite_path``)."""
    return Schemas(postgresql_server, postgresql_database) / "gateway.db"


@pytest.fixture
def db_path(databases):
    """Where the test's store lives: a SQLite file, or a fresh schema of the module's PostgreSQL database."""
    return databases / "gateway.db"
