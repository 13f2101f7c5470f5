"""Root never acts on a file another user can write (docs/security.md, root).

The shipped unit runs the gateway as a service user, and an operator runs admin commands with sudo. The service user
owns the state directory, so it can write ``run/runtime.json`` (naming a fake admin, whose answer root would
unpickle) and ``run/gateway.pid`` (naming any process, which root's ``stop`` would signal). Root refuses both, with
the user to run as. And ``stop``, whoever runs it, signals only the process that holds the pid lock.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common import processes
from tests.actor_system import wait_for
from tests.gateway import PYTHON, ROOT
from tests.security.strangers import OTHER_USER, DROP_SNIPPET, file_writing_pickle, other_user, thespian_frame

pytestmark = pytest.mark.timeout(120)

FAKE_ADMIN = DROP_SNIPPET + """
payload = bytes.fromhex(sys.argv[2])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(8)
print(listener.getsockname()[1], flush=True)
held = []
while True:
    conn, _ = listener.accept()
    conn.sendall(payload)
    held.append(conn)
"""

LOCK_HOLDER = """
import fcntl
""" + DROP_SNIPPET + """
fd = int(sys.argv[2])      # the pid file, opened for us (the test's directories are out of the other user's reach)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.write(fd, (sys.argv[3] + "\\n").encode())
print("locked", flush=True)
time.sleep(600)
"""


@pytest.fixture(scope="module")
def stranger():
    return other_user()


@pytest.fixture
def started():
    procs = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


def cli(config: Path, state: Path, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ, GATEWAY_STATE_DIR=str(state), PYTHONPATH=str(ROOT))
    env.pop("GATEWAY_CONFIG", None)
    return subprocess.run([PYTHON, str(ROOT / "run_gateway.py"), "--config", str(config), *args], env=env,
                          capture_output=True, text=True, timeout=60)


def service_state(tmp_path: Path, uid: int) -> tuple[Path, Path]:
    """A state directory (with its run/) as a service user's: owned by ``uid``, 0700."""
    state = tmp_path / "srv" / "state"
    (state / "run").mkdir(parents=True, mode=0o700)
    for path in (state.parent, state, state / "run"):
        os.chown(path, uid, uid)
        path.chmod(0o700 if path != state.parent else 0o755)
    config = tmp_path / "gateway.toml"
    config.write_text("[gateway]\nadmin_port = 0\n")
    return config, state


def spawn(started: list, script: str, *args: str, pass_fds=()) -> subprocess.Popen:
    proc = subprocess.Popen([PYTHON, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, pass_fds=pass_fds)
    started.append(proc)
    return proc


def hold_lock(started: list, uid: int, pid_file: Path, named: int) -> subprocess.Popen:
    """A process of ``uid`` that takes the pid lock and writes ``named`` into the pid file."""
    fd = os.open(pid_file, os.O_RDWR)
    try:
        return spawn(started, LOCK_HOLDER, str(uid), str(fd), str(named), pass_fds=(fd,))
    finally:
        os.close(fd)


def test_root_does_not_attach_to_an_admin_a_service_user_names(tmp_path, stranger, started):
    markers = tmp_path / "markers"
    markers.mkdir(mode=0o700)
    marker = markers / "attached"
    config, state = service_state(tmp_path, stranger)
    fake = spawn(started, FAKE_ADMIN, str(stranger), thespian_frame(file_writing_pickle(marker)).hex())
    port = int(fake.stdout.readline())
    # What the service user writes in its own run/: its fake admin, as a live launcher would be recorded.
    runtime = state / "run" / "runtime.json"
    runtime.write_text(json.dumps({"launcher_pid": fake.pid, "launcher_started": processes.start_time(fake.pid),
                                   "bind_host": "127.0.0.1", "admin_port": port}))
    os.chown(runtime, stranger, stranger)
    for command in ("status", "tree", "drain"):
        result = cli(config, state, command)
        assert not marker.exists(), f"root unpickled the service user's answer to `{command}`: {marker.read_text()}"
        said = result.stdout + result.stderr
        assert result.returncode == 77 and "root does not act on files another user can write" in said, said
        assert f"sudo -u {OTHER_USER}" in said, said


def test_root_does_not_signal_a_process_a_service_user_names(tmp_path, stranger, started):
    config, state = service_state(tmp_path, stranger)
    victim = spawn(started, "import time; time.sleep(600)")             # root's own process, not the gateway
    pid_file = state / "run" / "gateway.pid"
    pid_file.touch()
    os.chown(pid_file, stranger, stranger)
    holder = hold_lock(started, stranger, pid_file, victim.pid)
    assert holder.stdout.readline().strip() == "locked"
    result = cli(config, state, "stop", "--timeout", "5")   # had it signalled, it would wait for the exit
    assert victim.poll() is None, f"root's stop killed pid {victim.pid}, named by the service user: {result}"
    said = result.stdout + result.stderr
    assert result.returncode == 77 and "root does not act on files another user can write" in said, said


def test_stop_signals_only_the_process_that_holds_the_pid_lock(tmp_path, started):
    """The same user's state: the pid file names a process that does not hold the lock (rewritten, or a pid that
    was reused); nothing is signalled and stop says why."""
    state = tmp_path / "state"
    (state / "run").mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    config = tmp_path / "gateway.toml"
    config.write_text("[gateway]\nadmin_port = 0\n")
    victim = spawn(started, "import time; time.sleep(600)")
    pid_file = state / "run" / "gateway.pid"
    pid_file.touch(mode=0o600)
    holder = hold_lock(started, os.geteuid(), pid_file, victim.pid)
    assert holder.stdout.readline().strip() == "locked"
    result = cli(config, state, "stop", "--timeout", "5")
    assert victim.poll() is None, f"stop killed pid {victim.pid}, which never held the lock: {result}"
    assert holder.poll() is None, "stop signalled the lock's holder though the pid file does not name it"
    assert result.returncode == 1, result
    assert f"names pid {victim.pid}, but the pid lock is held by pid {holder.pid}" in result.stdout + result.stderr


def test_stop_still_stops_the_gateway_that_holds_the_lock(tmp_path):
    from tests.gateway import Gateway
    gw = Gateway(tmp_path)
    try:
        gw.start()
        gw.wait_ready(timeout=60)
        result = gw.cli("stop", "--timeout", "20", "--json")
        assert result.returncode == 0, result
        assert json.loads(result.stdout)["pid"] == gw.launcher_pid
        wait_for(lambda: not processes.is_running(gw.launcher_pid), 30, 0.05, "the launcher to exit")
    finally:
        gw.kill_everything()


if __name__ == "__main__":   # pragma: no cover
    sys.exit(pytest.main([__file__, "-n", "0", "-q"]))
