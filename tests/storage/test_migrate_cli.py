"""``run_gateway.py storage migrate`` (daemon/cli_migrate.py) with a real PostgreSQL: a state dir's state there and
back, said verified; a missing password, a wrong DSN, a running gateway and a schema version this code does not
know each get one clear error, with nothing written."""
from __future__ import annotations

import asyncio
import json
from urllib.parse import quote

import pytest

import run_gateway
from common import config as config_mod
from common.runfiles import RunFiles
from daemon.cli_migrate import cmd_storage

from .helpers import execute
from .test_migrate import counts, fill

pytestmark = pytest.mark.timeout(120)

PASSWORD_VAR = "GATEWAY_TEST_MIGRATE_PASSWORD"


@pytest.fixture
def gateway(tmp_path, monkeypatch):
    """A configuration whose state dir holds a filled SQLite state."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("GATEWAY_STATE_DIR", str(state))
    path = tmp_path / "gateway.toml"
    path.write_text('[adapters.fake]\ntype = "fake"\nbase_url = "http://127.0.0.1:9"\n')
    asyncio.run(fill(state / "gateway.db"))
    return config_mod.load(str(path)), state


@pytest.fixture
def target(postgresql_server, postgresql_path, monkeypatch):
    """(the DSN without its password, the DSN with it) of an empty schema; the password in PASSWORD_VAR."""
    monkeypatch.setenv(PASSWORD_VAR, postgresql_server.password)
    return postgresql_path.replace(f":{quote(postgresql_server.password)}@", "@", 1), postgresql_path


def run(config, capsys, *argv) -> tuple[int, str]:
    code = cmd_storage(config, run_gateway.build_parser().parse_args(["storage", "migrate", *argv]))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_state_dir_goes_to_postgresql_and_back_said_verified(gateway, target, capsys, tmp_path, monkeypatch):
    config, state = gateway
    dsn, with_password = target
    code, said = run(config, capsys, "--to", "postgresql", "--dsn", dsn, "--password-env", PASSWORD_VAR)
    assert code == 0, said
    assert "verified:" in said and "memory" in said and postgresql_password_absent(said, target)
    assert counts(with_password) == counts(state / "gateway.db")

    monkeypatch.setenv("GATEWAY_STATE_DIR", str(tmp_path / "elsewhere"))   # another gateway's state dir, no file yet
    elsewhere = config_mod.load(str(tmp_path / "gateway.toml"))
    code, said = run(elsewhere, capsys, "--to", "sqlite", "--dsn", dsn, "--password-env", PASSWORD_VAR, "--json")
    assert code == 0, said
    result = json.loads(said)
    assert result["verified"] and result["rows"] == sum(counts(state / "gateway.db").values())
    assert counts(tmp_path / "elsewhere" / "gateway.db") == counts(state / "gateway.db")


def postgresql_password_absent(said: str, target) -> bool:
    return target[1].split("@")[0].split(":")[-1] not in said


def test_a_missing_password_and_a_wrong_dsn_are_said_and_write_nothing(gateway, target, capsys,
                                                                      postgresql_server, monkeypatch):
    config, _state = gateway
    dsn, with_password = target
    monkeypatch.delenv("PGPASSWORD", raising=False)
    code, said = run(config, capsys, "--to", "postgresql", "--dsn", dsn)
    assert code == 1 and "no password supplied" in said and "--password-env" in said, said
    code, said = run(config, capsys, "--to", "postgresql", "--dsn", f"postgresql://gateway@127.0.0.1:"
                     f"{postgresql_server.port}/no_such_database", "--password-env", PASSWORD_VAR)
    assert code == 1 and "no_such_database" in said and "does not exist" in said, said
    code, said = run(config, capsys, "--to", "postgresql", "--dsn", "mysql://gateway@127.0.0.1/gateway")
    assert code == 2 and "must be a PostgreSQL URL" in said, said
    assert execute(with_password, "SELECT count(*) FROM information_schema.tables WHERE table_schema = "
                                  "current_schema()") == [(0,)], "nothing was made in the target"


def test_a_running_gateway_and_a_newer_schema_are_refused(gateway, target, capsys):
    config, state = gateway
    dsn, with_password = target
    files = RunFiles(state)
    files.acquire()   # this process holds the gateway's pid lock, as a running launcher does
    try:
        code, said = run(config, capsys, "--to", "postgresql", "--dsn", dsn, "--password-env", PASSWORD_VAR)
    finally:
        files.release()
    assert code == 1 and "a gateway is running with state dir" in said, said
    execute(state / "gateway.db", "PRAGMA user_version = 999")   # written by a newer gateway
    code, said = run(config, capsys, "--to", "postgresql", "--dsn", dsn, "--password-env", PASSWORD_VAR)
    assert code == 1 and "schema versions differ" in said, said
    assert execute(with_password, "SELECT count(*) FROM information_schema.tables WHERE table_schema = "
                                  "current_schema()") == [(0,)], "nothing was made in the target"
