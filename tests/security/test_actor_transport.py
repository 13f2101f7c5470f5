"""No bytes from a peer that has not proven it is this gateway are ever unpickled (docs/security.md, local users).

Each test sends a pickle whose loading writes a marker file in a directory only root can write (the gateway runs as
root here): the marker's absence afterwards says nothing was unpickled. The other user is real
(tests/security/strangers.py).

* a frame without the run's MAC, or with a wrong one, sent by the gateway's own user (who passes the kernel's uid
  check), is refused; a frame signed with the run's key is read (so the refusal is the MAC's, not a broken path);
* another uid listening on the admin port at many points of the start-up window never gets a frame of its own
  unpickled: the gateway either starts on its own socket or refuses clearly (exploit 1 of issue 38);
* a local user connecting from one of the host's non-loopback addresses is refused by the kernel's uid check before
  a byte is read, with ``bind_host = "localhost"`` (exploit 2) and with a LAN ``bind_host`` alone or in cluster
  mode (exploit 3), in a network namespace of its own.
"""
from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
import time

import pytest

from runtime import frame_mac
from daemon.ports import any_free_admin_port
from tests.cluster import netns
from tests.cluster.hosts import LeaderGateway, NamespacedGateway
from tests.gateway import PYTHON, Gateway
from tests.security.strangers import DROP_SNIPPET, file_writing_pickle, other_user, thespian_frame

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def stranger():
    return other_user()


@pytest.fixture
def markers(tmp_path):
    """A directory only root may write in: what a payload writes there was written by the gateway's process."""
    where = tmp_path / "markers"
    where.mkdir(mode=0o700)
    return where


def send_and_listen(port: int, frame: bytes, host: str = "127.0.0.1") -> bytes:
    """Send one frame and return what came back until the other end closed (or 5 s of silence)."""
    with socket.create_connection((host, port), timeout=10) as conn:
        conn.sendall(frame)
        conn.settimeout(5)
        got = b""
        try:
            while chunk := conn.recv(4096):
                got += chunk
        except socket.timeout:
            pass
        except ConnectionResetError:
            pass
        return got


# --------------------------------------------------------------------------------------------- the frame MAC
@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    gw = Gateway(tmp_path_factory.mktemp("transport"))
    gw.start()
    gw.wait_ready()
    yield gw
    gw.cli("stop", "--timeout", "20")
    gw.kill_everything()


def test_a_frame_without_the_runs_mac_is_never_unpickled(gateway, markers):
    runtime = json.loads((gateway.state / "run" / "runtime.json").read_text())
    port = runtime["admin_port"]
    bare, wrong = markers / "bare", markers / "wrong-mac"
    # The gateway's own uid (root here) passes the kernel's check: only the MAC stands between these and pickle.
    answers = [send_and_listen(port, thespian_frame(file_writing_pickle(bare))),
               send_and_listen(port, thespian_frame(frame_mac.seal(os.urandom(32), file_writing_pickle(wrong)))),
               send_and_listen(port, thespian_frame(b"\x00" * 7))]
    assert not bare.exists(), f"a frame without a MAC was unpickled: {bare.read_text()}"
    assert not wrong.exists(), f"a frame with a wrong MAC was unpickled: {wrong.read_text()}"

    key_file = gateway.state / "run" / "transport.key"
    assert key_file.stat().st_mode & 0o777 == 0o600, oct(key_file.stat().st_mode)
    key = bytes.fromhex(key_file.read_text())
    # Refused as a corrupt frame: Thespian's error acknowledgement, signed, then the connection closed.
    refusal = frame_mac._framed(frame_mac.seal(key, pickle.dumps("ACK+DATAERR")))
    assert answers == [refusal] * 3, answers
    # The same payload signed with the run's key does reach pickle.loads: the refusals above are the MAC's.
    signed = markers / "signed"
    send_and_listen(port, thespian_frame(frame_mac.seal(key, file_writing_pickle(signed))))
    assert signed.exists(), "a frame signed with the run's key was not read: the test proves nothing"
    status = json.loads(gateway.cli("status", "--json", check=True).stdout)
    assert status["running"] and status["actors_failed"] == 0, status
    assert "MAC is wrong" in (gateway.state / "thespian.log").read_text()


# ------------------------------------------------------------------------------------ admin port squatting
SQUATTER = DROP_SNIPPET + """
port, start_at, payload = int(sys.argv[2]), float(sys.argv[3]), bytes.fromhex(sys.argv[4])
while time.monotonic() < start_at:
    time.sleep(0.001)
listener = None
while listener is None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        s.bind(("127.0.0.1", port))
        s.listen(16)
        listener = s
    except OSError:
        s.close()
        time.sleep(0.002)
print("bound %.3f" % (time.monotonic() - start_at), flush=True)
held = []
while True:
    conn, _ = listener.accept()
    conn.sendall(payload)
    held.append(conn)
    print("served", flush=True)
"""


def _start_once(gw: Gateway, stranger: int, port: int, offset: float, payload: bytes) -> dict:
    """Start the gateway in the foreground with a squatter that tries to take the admin port from ``offset``
    seconds after the launcher is spawned, and on and on until the start is over."""
    start_at = time.monotonic() + 0.3 + offset       # the squatter's own interpreter start comes first
    squatter = subprocess.Popen([PYTHON, "-c", SQUATTER, str(stranger), str(port), str(start_at), payload.hex()],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(max(0.0, start_at - offset - time.monotonic()))
    proc = gw.run_foreground()
    runtime_path = gw.state / "run" / "runtime.json"
    outcome, deadline = None, time.monotonic() + 90
    while outcome is None and time.monotonic() < deadline:
        if proc.poll() is not None:
            outcome = "exited"
        elif runtime_path.exists() and json.loads(runtime_path.read_text() or "{}").get("launcher_pid") == proc.pid:
            outcome = "ready"
        else:
            time.sleep(0.02)
    status = gw.cli("status", "--json") if outcome == "ready" else None
    squatter.kill()                                   # before the gateway lets the port go
    said = squatter.communicate()[0]
    if proc.poll() is None:
        gw.cli("stop", "--timeout", "20")
    try:
        out = proc.communicate(timeout=60)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0]
    gw.kill_everything()
    return {"offset": offset, "outcome": outcome, "code": proc.returncode, "out": out[-1500:],
            "status": status.stdout if status else None, "squatter": said.strip()}


def test_another_user_squatting_the_admin_port_during_start_up_gets_nothing_unpickled(tmp_path, stranger, markers):
    marker = markers / "squatted"
    payload = thespian_frame(file_writing_pickle(marker))
    port = any_free_admin_port("127.0.0.1")
    (tmp_path / "gw").mkdir()
    gw = Gateway(tmp_path / "gw", admin_port=port)
    # How long a start takes here, undisturbed (spawn to runtime.json, written once every actor is up): the window
    # the squatter's offsets are spread over. From each offset on it keeps trying, so a run covers the rest of it.
    runtime_path = gw.state / "run" / "runtime.json"
    started = time.monotonic()
    proc = gw.run_foreground()
    while not runtime_path.exists() and proc.poll() is None and time.monotonic() - started < 90:
        time.sleep(0.01)
    window = time.monotonic() - started
    assert runtime_path.exists(), proc.communicate(timeout=30)[0][-2000:]
    gw.cli("stop", "--timeout", "20", check=True)
    proc.communicate(timeout=60)
    # Nine offsets spread over the window (each start costs ~7 s): every phase of a start is met by a squatter
    # already trying, since from its offset on it keeps trying. A tenth at three windows: a start slower than the
    # one measured (a busy machine) still has one run whose squatter comes after the gateway bound its port.
    offsets = [round(window * i / 8, 3) for i in range(9)] + [round(window * 3, 3)]
    seen = []
    for offset in offsets:
        seen.append(_start_once(gw, stranger, port, offset, payload))
        assert not marker.exists(), f"the squatter's bytes were unpickled ({marker.read_text()}): {seen[-1]}"
    for run in seen:
        if run["outcome"] == "ready":
            # On its own socket: the CLI (which checks the MAC of every reply) talks to it, the squatter never bound.
            assert run["status"] and json.loads(run["status"])["running"], run
            assert not run["squatter"].startswith("bound"), run
        else:
            assert run["code"] == 1 and f"admin port 127.0.0.1:{port} is in use by " in run["out"], run
            assert run["squatter"].startswith("bound"), run
    ready = [r["offset"] for r in seen if r["outcome"] == "ready"]
    print(f"start-up window {window:.2f}s; offsets {offsets}; started on its own socket at {ready}")
    assert ready, f"the gateway never started: {seen}"


# ------------------------------------------------------------------------ a local user from a LAN address
CONNECT_FROM = DROP_SNIPPET + """
source, target, port, payload = sys.argv[2], sys.argv[3], int(sys.argv[4]), bytes.fromhex(sys.argv[5])
s = socket.socket()
if source:
    s.bind((source, 0))
s.settimeout(20)
s.connect((target, port))
s.sendall(payload)
s.settimeout(5)
got = b""
try:
    while chunk := s.recv(4096):
        got += chunk
    print("closed" if not got else "answered " + got[:40].hex())
except ConnectionResetError:
    print("closed" if not got else "answered " + got[:40].hex())
except socket.timeout:
    print("open " + got[:40].hex())
"""


@pytest.fixture(scope="module")
def lab():
    reason = netns.skip_reason()
    if reason:
        pytest.skip(reason)
    lab = netns.Lab("tr").up()
    lab.add_host("gw")
    yield lab
    lab.down()


@pytest.mark.parametrize("setup", ["localhost", "lan-address", "cluster"])
def test_a_local_user_on_a_non_loopback_address_is_refused_by_its_uid(tmp_path, lab, stranger, markers, setup):
    address = lab.hosts["gw"]
    if setup == "cluster":
        gw = LeaderGateway(tmp_path / "gw", lab, host="gw")
        source, target = "", address               # to the leader's private address, from the same host
    elif setup == "localhost":
        gw = NamespacedGateway(tmp_path, lab, "gw", gateway_toml='bind_host = "localhost"\n')
        source, target = address, "127.0.0.1"       # to loopback, from the host's own LAN address
    else:
        gw = NamespacedGateway(tmp_path, lab, "gw",
                               gateway_toml=f'bind_host = "{address}"\nallow_non_loopback = true\n')
        source, target = "", address
    marker = markers / f"from-{setup}"
    try:
        gw.start()
        gw.wait_ready(timeout=90)
        port = json.loads((gw.state / "run" / "runtime.json").read_text())["admin_port"]
        tried = subprocess.run([*lab.exec_prefix("gw"), PYTHON, "-c", CONNECT_FROM, str(stranger), source, target,
                                str(port), thespian_frame(file_writing_pickle(marker)).hex()],
                               capture_output=True, text=True, timeout=60)
        assert tried.returncode == 0, tried.stderr[-2000:]
        assert not marker.exists(), f"{setup}: the other user's pickle was unpickled: {marker.read_text()}"
        assert tried.stdout.strip() == "closed", f"{setup}: not closed before a byte was read: {tried.stdout}"
        status = json.loads(gw.cli("status", "--json", check=True).stdout)
        assert status["running"], status
        assert "refused" in (gw.state / "thespian.log").read_text()
    finally:
        gw.cli("stop", "--timeout", "20")
        gw.kill_everything()
        for pid in lab.pids("gw"):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


if __name__ == "__main__":   # pragma: no cover
    sys.exit(pytest.main([__file__, "-n", "0", "-q"]))
