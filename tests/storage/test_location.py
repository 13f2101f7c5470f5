"""Where the Store lives ([storage] backend, storage/location.py): the SQLite file by default; a PostgreSQL URL
whose password comes from a private file or the environment, never from the configuration file."""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest

from common.config import ConfigError, validate
from storage import Store
from storage.location import NoDatabasePassword, store_location

pytestmark = pytest.mark.timeout(60)


def postgresql(dsn: str, **more) -> dict:
    return {"backend": "postgresql", "dsn": dsn, "password_env": "GATEWAY_TEST_DB_PASSWORD", "password_file": "",
            **more}


def test_sqlite_is_the_default_and_names_the_state_dir_file(tmp_path):
    storage = validate({}, "gateway.toml")["storage"]
    assert storage["backend"] == "sqlite"
    assert store_location(storage, tmp_path / "gateway.db") == tmp_path / "gateway.db"


def test_a_postgresql_dsn_is_required_and_may_not_hold_the_password():
    with pytest.raises(ConfigError, match=r"\[storage\] dsn.*needs the database's URL"):
        validate({"storage": {"backend": "postgresql"}}, "gateway.toml")
    for dsn in ("postgresql://gw:secret@db/gw", "postgresql://gw@db/gw?password=secret"):
        with pytest.raises(ConfigError, match="must not hold the password"):
            validate({"storage": {"backend": "postgresql", "dsn": dsn}}, "gateway.toml")
    assert validate({"storage": {"backend": "postgresql", "dsn": "postgresql://gw@db/gw"}},
                    "gateway.toml")["storage"]["dsn"] == "postgresql://gw@db/gw"


def test_the_password_comes_from_a_private_file_before_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GATEWAY_TEST_DB_PASSWORD", "from env")
    assert store_location(postgresql("postgresql://gw@db/gw"), Path("unused")) == \
        "postgresql://gw@db/gw?password=from%20env"
    file = tmp_path / "db-password"
    file.write_text("p@ss&word\n")
    file.chmod(0o600)
    assert store_location(postgresql("postgresql://gw@db/gw?sslmode=require", password_file=str(file)),
                          Path("unused")) == "postgresql://gw@db/gw?sslmode=require&password=p%40ss%26word"
    file.chmod(0o644)
    with pytest.raises(NoDatabasePassword, match="readable by other users"):
        store_location(postgresql("postgresql://gw@db/gw", password_file=str(file)), Path("unused"))
    monkeypatch.delenv("GATEWAY_TEST_DB_PASSWORD")
    assert store_location(postgresql("postgresql://gw@db/gw"), Path("unused")) == "postgresql://gw@db/gw"


async def test_a_store_opens_on_postgresql_with_the_password_from_the_environment(postgresql_server,
                                                                                 postgresql_database, monkeypatch):
    dsn = f"{postgresql_server.dsn(postgresql_database)}?options={quote('-csearch_path=public')}"
    monkeypatch.delenv("GATEWAY_TEST_DB_PASSWORD", raising=False)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with pytest.raises(Exception, match="password"):   # the server asks for one: without it, no store
        await Store.open(store_location(postgresql(dsn), Path("unused")))
    monkeypatch.setenv("GATEWAY_TEST_DB_PASSWORD", postgresql_server.password)
    store = await Store.open(store_location(postgresql(dsn), Path("unused")))
    try:
        assert postgresql_server.password not in store.path and "password" not in store.path
        await store.access.grant("telegram", "42")
        assert await store.access.granted_among("telegram", ["42", "43"]) == {"42"}
    finally:
        await store.close()
    assert os.environ["GATEWAY_TEST_DB_PASSWORD"] == postgresql_server.password
