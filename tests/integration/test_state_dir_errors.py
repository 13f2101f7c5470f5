"""A state directory the gateway cannot write: `start`, `run` and `sessions list` say which and why in one line
and exit 73 (EX_CANTCREAT, docs/operations.md), never a traceback.

The tests run as root, which writes through any permission bit, so unwritability is made of things root honours
too: a state dir under a regular file (ENOTDIR for everyone), and, where a private mount namespace can be made
(`unshare -m`, or `unshare -rm` as a user), a real read-only bind mount of the state dir (EROFS for everyone).
"""
from __future__ import annotations

import asyncio
import shlex
import shutil
import subprocess

import pytest

from storage import Store
from tests.gateway import PYTHON, ROOT, Gateway

pytestmark = pytest.mark.timeout(90)

EX_CANTCREAT = 73


def _one_clear_line(result: subprocess.CompletedProcess, *fragments: str) -> None:
    said = (result.stderr + result.stdout).strip()
    assert result.returncode == EX_CANTCREAT, f"exit {result.returncode}: {said}"
    assert "Traceback" not in said and len(said.splitlines()) == 1, said
    for fragment in fragments:
        assert fragment in said, said


@pytest.mark.parametrize("command", [("start",), ("run",)])
def test_a_state_dir_under_a_regular_file_is_named_with_its_reason(tmp_path, command):
    gw = Gateway(tmp_path)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    gw.env["GATEWAY_STATE_DIR"] = str(blocker / "state")
    result = gw.cli(*command, timeout=30)
    _one_clear_line(result, f"cannot use the state directory {blocker / 'state'}", f"{blocker} is a file")


def _read_only_mount_prefix(tmp_path) -> list[str]:
    """A command prefix that runs its command with the state dir mounted read-only, or skip when this machine
    gives no mount namespace."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare(1) here: no read-only mount to test with")
    for flags in ("-m", "-rm"):
        probe = tmp_path / "probe"
        probe.mkdir(exist_ok=True)
        tried = subprocess.run([unshare, flags, "sh", "-c", f"mount --bind -o ro {probe} {probe} && touch {probe}/x"],
                               capture_output=True, text=True, timeout=20)
        if "Read-only file system" in tried.stderr:
            return [unshare, flags]
    pytest.skip("no mount namespace for a read-only bind mount on this machine")


def _read_only(prefix: list[str], gw: Gateway, *args: str) -> subprocess.CompletedProcess:
    command = " ".join(shlex.quote(a) for a in [PYTHON, str(ROOT / "run_gateway.py"), "--config", str(gw.config),
                                                 *args])
    return subprocess.run([*prefix, "sh", "-c", f"mount --bind -o ro {gw.state} {gw.state} && exec {command}"],
                          env=gw.env, capture_output=True, text=True, timeout=60)


def test_a_read_only_state_dir_is_named_by_start_run_and_sessions_list(tmp_path):
    prefix = _read_only_mount_prefix(tmp_path)
    gw = Gateway(tmp_path)
    gw.state.mkdir(mode=0o700)

    async def a_database():
        store = await Store.open(gw.state / "gateway.db", "normal")
        await store.close()
    asyncio.run(a_database())
    for args in (("start",), ("run",), ("sessions", "list")):
        result = _read_only(prefix, gw, *args)
        _one_clear_line(result, f"cannot use the state directory {gw.state}", "read-only file system")
    result = _read_only(prefix, gw, "start", "--json")
    assert result.returncode == EX_CANTCREAT and '"ok": false' in result.stdout and "read-only" in result.stdout


def test_doctor_names_the_state_dir_under_a_file_and_runs_every_other_check(tmp_path):
    gw = Gateway(tmp_path)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    gw.env["GATEWAY_STATE_DIR"] = str(blocker / "state")
    result = gw.cli("doctor", timeout=60)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1, result.stdout + result.stderr
    # the check's name is the line's second column (another check's detail may mention a state dir: port web's
    # "in use by another gateway, pid N, state dir ...")
    state_line = next(line for line in result.stdout.splitlines() if line.split()[1:3] == ["state", "dir"])
    assert state_line.startswith("fail") and f"{blocker} is a file" in state_line, result.stdout
    assert "port admin" in result.stdout and "disk" in result.stdout
