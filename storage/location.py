"""Where a Store lives, from the ``[storage]`` section: the SQLite file (the default), or a PostgreSQL database.

``backend = "postgresql"`` with ``dsn``, a libpq URL without its password (``postgresql://gateway@db.internal/
gateway?sslmode=verify-full``): the password is read from ``password_file`` (which must be readable by this user
only), else from the environment variable named by ``password_env``, else it is none (a ``.pgpass`` file, a
certificate or peer authentication may do without). It never sits in the configuration file, which ``config show``
prints and operators share. libpq's own environment (PGPASSWORD, PGSSLMODE...) applies as usual.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Union
from urllib.parse import quote

from common.private_file import read_private_file

from .errors import StorageError

POSTGRESQL_SCHEMES = ("postgresql://", "postgres://")


class NoDatabasePassword(StorageError):
    """The configured PostgreSQL password could not be read (a missing or too open password_file)."""


def is_postgresql(location: Union[str, Path]) -> bool:
    return isinstance(location, str) and location.startswith(POSTGRESQL_SCHEMES)


def database_password(storage: dict) -> str | None:
    """The PostgreSQL password ([storage] password_file, else the variable named by password_env), or None."""
    file = storage.get("password_file") or ""
    if file:
        return read_private_file(file, "[storage] password_file", NoDatabasePassword)
    name = storage.get("password_env") or ""
    return (os.environ.get(name) or None) if name else None


def store_location(storage: dict, sqlite_file: Path) -> Union[Path, str]:
    """What ``Store.open`` is given: ``sqlite_file``, or the [storage] dsn with its password added."""
    if storage.get("backend", "sqlite") != "postgresql":
        return sqlite_file
    dsn = storage["dsn"]
    password = database_password(storage)
    if password is None:
        return dsn
    return f"{dsn}{'&' if '?' in dsn else '?'}password={quote(password, safe='')}"
