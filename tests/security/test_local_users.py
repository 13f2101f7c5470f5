"""Another local user gets nothing from the gateway: not its actor or admin ports, not its state, not its admin CLI.

The other user is real (tests/security/strangers.py): created with ``useradd`` when the suite runs as root (skipped
with the reason otherwise), and every attempt runs in a forked child that has dropped to that uid, so the kernel sees
the same peer it would see from a shell of that user.
"""
from __future__ import annotations

import encodings.idna  # noqa: F401 - loaded here: a stranger's child cannot read the interpreter's codecs
import io
import json
import os
import re
import socket
import stat
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import psutil
import pytest

from tests.actor_system import wait_for
from tests.gateway import DEFAULT_ADAPTERS_ANY_PORT, Gateway, nodes
from tests.security.strangers import as_user, other_user
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def stranger():
    return other_user()


def listening_ports(pids) -> list[int]:
    ports = set()
    for pid in pids:
        try:
            for conn in psutil.Process(pid).net_connections(kind="tcp"):
                if conn.status == psutil.CONN_LISTEN:
                    ports.add(conn.laddr.port)
        except psutil.NoSuchProcess:
            pass
    return sorted(ports)


def closed_before_reading(port: int) -> str:
    """Connect, send nothing, and see what the server does: 'closed' (EOF or reset) or 'held open'."""
    try:
        conn = socket.create_connection(("127.0.0.1", port), timeout=5)
    except ConnectionRefusedError:
        return "closed"                            # a reply port that closed meanwhile: nobody listens
    with conn:
        conn.settimeout(5)
        try:
            return "closed" if conn.recv(1) == b"" else "answered"
        except ConnectionResetError:
            return "closed"
        except socket.timeout:
            return "held open"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    # The embedded defaults, but the web chat on a free port: 8765 may be another test's at the same moment.
    gw = Gateway(tmp_path_factory.mktemp("local-users"), extra_toml=DEFAULT_ADAPTERS_ANY_PORT)
    before = os.umask(0o022)                       # a permissive umask: the daemon must not rely on ours
    try:
        gw.start()
    finally:
        os.umask(before)
    gw.wait_ready()
    yield gw
    gw.cli("stop", "--timeout", "20")
    gw.kill_everything()


def test_another_user_cannot_talk_to_any_actor_or_admin_port(gateway, stranger):
    runtime = json.loads((gateway.state / "run" / "runtime.json").read_text())
    actor_ports = {int(m) for n in nodes(gateway.tree()) for m in re.findall(r":(\d+)\)", n["address"] or "")}
    ports = sorted(actor_ports | {runtime["admin_port"]})
    pids = set(gateway.alive_pids()) | {runtime["launcher_pid"]}
    pids |= {child.pid for pid in list(pids) if psutil.pid_exists(pid)
             for child in psutil.Process(pid).children(recursive=True)}
    http_ports = {webchat_port(gateway), (runtime.get("metrics") or {}).get("port"), console_port(gateway)}
    unlisted = set(listening_ports(pids)) - set(ports) - http_ports
    assert len(actor_ports) >= 5, f"expected the actors' ports in the tree, saw {sorted(actor_ports)}"
    # Every other port of the gateway's processes is an actor system's (e.g. the launcher's reply port): tried too.
    ports += sorted(unlisted)
    seen = as_user(stranger, lambda: {str(p): closed_before_reading(p) for p in ports})
    assert set(seen.values()) == {"closed"}, f"as another user: {seen}"
    # The gateway's own user still gets in, and nothing was disturbed.
    assert closed_before_reading(runtime["admin_port"]) == "held open"
    status = json.loads(gateway.cli("status", "--json", check=True).stdout)
    assert status["running"] and status["actors_failed"] == status["actors_restarting"] == 0, status
    said = (gateway.state / "thespian.log").read_text()
    assert "refused" in said and "another user" in said, said[-2000:]


def webchat_port(gateway) -> int:
    """The web chat's port (HTTP, not an actor port), from the URL `status` shows for it."""
    rows = json.loads(gateway.cli("status", "--json").stdout)["adapters"]
    [url] = [row["url"] for row in rows if row["name"] == "web"]
    return int(re.search(r":(\d+)/?", url.split("//", 1)[1]).group(1))


def console_port(gateway) -> int:
    return json.loads(wait_for(lambda: (gateway.state / "run" / "console.json").is_file()
                               and (gateway.state / "run" / "console.json").read_text(), 60, 0.1,
                               "the console's address file"))["port"]


def http_get(port: int, path: str = "/api/session") -> str:
    """The status line and body of a plain GET to 127.0.0.1:``port`` (what a browser of that user would see)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.decode("utf-8", "replace").partition("\r\n\r\n")
    return head.splitlines()[0] + " " + body[:200]


def test_another_user_gets_nothing_from_the_console_on_loopback(gateway, stranger):
    """The console without a login shows every chat: loopback is shared by every local user, so only the
    gateway's own user (and root) may use it (actors/console/access.py peer_verdict)."""
    port = console_port(gateway)
    seen = as_user(stranger, lambda: {path: http_get(port, path) for path in ("/", "/api/session", "/api/chats")})
    assert all(answer.startswith("HTTP/1.1 403") for answer in seen.values()), seen
    assert http_get(port, "/").startswith("HTTP/1.1 200"), "the gateway's own user is let in"
    said = gateway.log()
    assert "refused a request of another local user" in said, said[-2000:]


def test_admin_commands_of_another_user_are_refused_clearly(gateway, stranger):
    # The other user's own copy of the config (it could not read ours), naming our state directory.
    shared = Path(os.environ.get("TMPDIR", "/tmp")) / f"gw-stranger-config-{os.getpid()}.toml"
    shared.write_text(gateway.config.read_text())
    shared.chmod(0o644)
    # What the command loads before it looks at the state is loaded here: the child cannot read our interpreter.
    import run_gateway
    from actors.adapters import registry
    from common import config as config_mod
    registry.validate_all(config_mod.load(str(shared)))
    run_gateway.build_parser()

    def tree_as_stranger():
        out, err = io.StringIO(), io.StringIO()
        os.environ["GATEWAY_STATE_DIR"] = str(gateway.state)
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = run_gateway.main(["--config", str(shared), "tree"])
            except SystemExit as exc:
                code = exc.code
        return {"code": code, "out": out.getvalue(), "err": err.getvalue()}

    try:
        seen = as_user(stranger, tree_as_stranger)
    finally:
        shared.unlink()
    assert seen["code"] not in (0, None), seen
    said = seen["out"] + seen["err"]
    assert "another user" in said and str(os.geteuid()) in said, said
    assert "Traceback" not in said, said


def test_state_is_private_to_the_gateways_user(gateway):
    loose = []
    for path in [gateway.state, *gateway.state.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        want = 0o700 if path.is_dir() else 0o600
        if not path.is_symlink() and mode & ~want & 0o777:
            loose.append(f"{path.relative_to(gateway.state.parent)} {oct(mode)}")
    assert loose == [], f"readable by others after a start under umask 022: {loose}"
