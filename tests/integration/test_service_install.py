"""``service install``: the unit it writes runs this very program as a good systemd service (the settings of
deploy/agent-gateway.service), in the right place, only over an existing file with --force; --dry-run writes
nothing. A temporary HOME: the real CLI, never the machine's systemd directories."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.gateway import PYTHON, ROOT
from tests.integration.test_operations import UNIT, _unit_settings

pytestmark = pytest.mark.timeout(60)
SHARED = ("Type", "KillMode", "KillSignal", "Restart", "RestartSec", "RestartPreventExitStatus", "TimeoutStopSec",
          "TimeoutStartSec", "StartLimitIntervalSec", "StartLimitBurst")


@pytest.fixture
def short_tmp():
    """A short directory: the admin output's redaction takes a long run of path characters with digits after a
    ``NAME=`` (pytest's tmp_path, in ``Environment=GATEWAY_STATE_DIR=...``) for a credential and hides it."""
    path = Path(tempfile.mkdtemp(prefix="gw", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def cli(tmp_path, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(tmp_path / "home"), GATEWAY_STATE_DIR=str(tmp_path / "state"),
               PYTHONPATH=str(ROOT))
    for name in ("GATEWAY_CONFIG", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        env.pop(name, None)
    return subprocess.run([PYTHON, str(ROOT / "run_gateway.py"), *args], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=30)


def test_a_user_unit_runs_this_program_on_this_configuration_and_is_written_only_when_asked(short_tmp):
    tmp_path = short_tmp
    (tmp_path / "gw.toml").write_text("[sessions]\nbusy_mode = \"steer\"\n")
    path = tmp_path / "home" / ".config" / "systemd" / "user" / "agent-gateway.service"
    dry = cli(tmp_path, "service", "install", "--user", "--dry-run", "--config", "gw.toml")
    assert dry.returncode == 0 and f"would be written to {path}" in dry.stdout and not path.exists()
    planned = json.loads(cli(tmp_path, "--config", "gw.toml", "service", "install", "--user", "--dry-run",
                             "--json").stdout)
    assert planned["path"] == str(path) and planned["written"] is False and not path.exists()

    written = cli(tmp_path, "service", "install", "--user", "--config", "gw.toml")
    assert written.returncode == 0 and f"wrote {path}" in written.stdout, written.stderr
    assert "systemctl --user enable --now agent-gateway" in written.stdout
    assert path.read_text() == planned["unit"] and path.stat().st_mode & 0o777 == 0o644
    unit = _unit_settings(path.read_text())
    program = f"{PYTHON} {ROOT / 'run_gateway.py'} --config {tmp_path / 'gw.toml'}"
    assert unit["ExecStart"] == f"{program} run" and unit["ExecStop"] == f"-{program} drain --timeout 30"
    assert unit["ExecReload"] == f"{program} reload"
    assert f"GATEWAY_STATE_DIR={tmp_path / 'state'}" in unit["Environment"], "the state the admin commands use"
    assert "User" not in unit and unit["WantedBy"] == "default.target"
    reference = _unit_settings(UNIT.read_text())
    assert {k: unit.get(k) for k in SHARED} == {k: reference[k] for k in SHARED}

    path.write_text("# the operator's own unit\n")
    refused = cli(tmp_path, "service", "install", "--user")
    assert refused.returncode == 1 and "--force" in refused.stderr and path.read_text() == "# the operator's own unit\n"
    assert cli(tmp_path, "service", "install", "--user", "--force").returncode == 0
    assert "ExecStart=" in path.read_text()


def test_a_system_unit_dry_run_names_its_place_its_user_and_the_hardening_and_writes_nothing(tmp_path):
    target = Path("/etc/systemd/system/agent-gateway.service")
    existed = target.exists()
    dry = cli(tmp_path, "service", "install", "--dry-run", "--run-as", "gw-test-nobody", "--json")
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert planned["path"] == str(target) and planned["written"] is False and target.exists() == existed
    unit = _unit_settings(planned["unit"])
    reference = _unit_settings(UNIT.read_text())
    assert unit["User"] == unit["Group"] == "gw-test-nobody" and unit["WantedBy"] == "multi-user.target"
    assert unit["StateDirectory"] == reference["StateDirectory"] and unit["ProtectSystem"] == "strict"
    assert "GATEWAY_STATE_DIR=/var/lib/agent-gateway" in unit["Environment"]
    assert any("useradd" in step and "gw-test-nobody" in step for step in planned["next"]), "a user to create"
    if shutil.which("systemd-analyze"):
        copy = tmp_path / "agent-gateway.service"
        copy.write_text(planned["unit"])
        verify = subprocess.run(["systemd-analyze", "verify", "--man=no", str(copy)], capture_output=True,
                                text=True, timeout=30)
        assert verify.returncode == 0 and "agent-gateway.service" not in verify.stdout + verify.stderr, \
            verify.stdout + verify.stderr


def test_the_model_key_has_an_environment_file_and_every_kind_of_unit_warns_of_what_would_fail(short_tmp):
    tmp_path = short_tmp
    (tmp_path / "gw.toml").write_text('[agent]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
                                      'api_key_env = "GW_TEST_KEY"\n')
    env_file = tmp_path / "home" / ".config" / "agent-gateway" / "gateway.env"
    written = cli(tmp_path, "--config", "gw.toml", "service", "install", "--user")
    assert written.returncode == 0, written.stderr
    unit = _unit_settings((tmp_path / "home" / ".config" / "systemd" / "user" / "agent-gateway.service").read_text())
    assert unit["EnvironmentFile"] == str(env_file)
    assert env_file.stat().st_mode & 0o777 == 0o600 and f"created {env_file} (0600)" in written.stdout
    assert "# GW_TEST_KEY=" in env_file.read_text().splitlines(), "a comment saying what goes there"
    assert "`systemctl --user restart agent-gateway` after a change" in env_file.read_text(), "a user unit's restart"
    assert f"$GW_TEST_KEY, which the service does not get from your shell: add the line GW_TEST_KEY=<your key> to " \
           f"{env_file}" in written.stdout, written.stdout
    assert f"the configuration {tmp_path / 'gw.toml'} is under /tmp" in written.stdout, written.stdout

    env_file.write_text(env_file.read_text() + "GW_TEST_KEY=sk-the-operators-own\n")
    again = cli(tmp_path, "--config", "gw.toml", "service", "install", "--user", "--force")
    assert again.returncode == 0 and "GW_TEST_KEY" not in again.stdout, again.stdout
    assert "GW_TEST_KEY=sk-the-operators-own" in env_file.read_text(), "the operator's file is never replaced"

    # A venv under /tmp: ExecStart itself would be gone (a system unit's private /tmp; any /tmp after a reboot).
    venv_python = tmp_path / "venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(PYTHON)
    env = dict(os.environ, HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    env.pop("GATEWAY_CONFIG", None)
    for kind in (["--user"], ["--run-as", "gw-test-nobody"]):
        dry = subprocess.run([str(venv_python), str(ROOT / "run_gateway.py"), "service", "install", *kind,
                              "--dry-run", "--json"], env=env, cwd=tmp_path, capture_output=True, text=True,
                             timeout=30)
        warnings = json.loads(dry.stdout)["warnings"]
        assert any(w.startswith(f"ExecStart runs {venv_python}, under /tmp") for w in warnings), (kind, warnings)
