"""The admin CLI's output for a person at a terminal (rich: the tree, the tables) and for everything else.

Piped, ``tree``, ``sessions list`` and ``deliveries`` print plain lines (``sessions list`` under a header row), with no
escape sequence; ``--json`` is the same bytes on a terminal as through a pipe. On a pseudo-terminal (pexpect) the same
commands draw a tree with guides and tables with headers; what they wrote is rendered by a terminal emulator (pyte)
and the assertions are on that screen. A key of the user's own (a known shape, stored as typed) is redacted on the
terminal too, even where a narrow table wraps it across lines.
"""
from __future__ import annotations

import io
import json

import pexpect
import pyte
import pytest

from tests.gateway import PYTHON, ROOT, Gateway

pytestmark = pytest.mark.timeout(120)

COLUMNS, LINES = 70, 60
WAIT_S = 60                 # a command on a loaded 2-core machine
SHAPED = "sk-userOwnKey0123456789abcdefghij"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    gw = Gateway(tmp_path_factory.mktemp("admin_terminal"), extra_toml="[agent]\nchunk_delay_s = 0.0\n")
    try:
        gw.start()
        gw.wait_ready()
        gw.cli("chat", "--as", "ada", "--message", f"mine is {SHAPED}", check=True)
        yield gw
    finally:
        gw.cli("stop")
        gw.kill_everything()


def on_a_terminal(gw: Gateway, *args: str, columns: int = COLUMNS) -> tuple[list[str], bytes]:
    """The screen after ``args`` ran on a pseudo-terminal, and the bytes it wrote."""
    env = {**gw.env, "TERM": "xterm-256color"}
    for forcing in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "COLUMNS", "LINES"):
        env.pop(forcing, None)
    child = pexpect.spawn(PYTHON, [str(ROOT / "run_gateway.py"), "--config", str(gw.config), *args], env=env,
                          dimensions=(LINES, columns), cwd=str(ROOT))
    output = io.BytesIO()
    child.logfile_read = output
    child.expect(pexpect.EOF, timeout=WAIT_S)
    child.close()
    assert child.exitstatus == 0, output.getvalue().decode(errors="replace")
    emulator = pyte.Screen(columns, LINES)
    pyte.ByteStream(emulator).feed(output.getvalue())
    return [row.rstrip() for row in emulator.display if row.strip()], output.getvalue()


def test_piped_output_is_the_plain_lines_without_escape_sequences(gateway):
    tree = gateway.cli("tree", check=True).stdout
    assert "\x1b" not in tree and tree.splitlines()[0].startswith("Root")
    assert all(line.lstrip("│ ").startswith(("├─ ", "└─ ")) for line in tree.splitlines()[1:]), tree
    assert tree.splitlines()[1].startswith("├─ ") and tree.splitlines()[-1].lstrip("│ ").startswith("└─ "), tree
    [header, row] = gateway.cli("sessions", "list", check=True).stdout.splitlines()   # a header, a line a session
    assert header.split()[:2] == ["id", "state"] and "\x1b" not in header
    listed = json.loads(gateway.cli("sessions", "list", "--json", check=True).stdout)["sessions"]
    assert row.split()[:2] == [listed[0]["short_id"], "active"] and "\x1b" not in row
    deliveries = gateway.cli("deliveries", check=True).stdout.splitlines()
    assert "delivered 1" in deliveries[0] and deliveries[1].split()[1] == "delivered", deliveries
    assert "\x1b" not in "".join(deliveries)
    hits = gateway.cli("sessions", "search", "mine", check=True).stdout.splitlines()   # the message, the answer
    assert hits and all(hit.startswith(listed[0]["short_id"]) and "[redacted]" in hit for hit in hits), hits
    assert SHAPED not in "".join(hits)


def test_on_a_terminal_the_tree_and_the_tables_are_drawn(gateway):
    listed = json.loads(gateway.cli("sessions", "list", "--json", check=True).stdout)["sessions"]
    screen, raw = on_a_terminal(gateway, "sessions", "list")
    assert b"\x1b[" in raw, "styled for the terminal"
    header = next(row for row in screen if row.split()[:4] == ["id", "state", "last", "activity"])
    assert "preview" in header and "user" in header
    assert any(row.split()[:2] == [listed[0]["short_id"], "active"] for row in screen), screen

    screen, _ = on_a_terminal(gateway, "tree")
    assert screen[0].split()[:3] == ["Root", "root", "[running]"], screen
    assert any(row.lstrip("│ ").startswith(("├── ", "└── ")) and "Watchdog" in row for row in screen), screen

    screen, _ = on_a_terminal(gateway, "deliveries")
    assert "delivered 1" in screen[0] and any(row.split()[:3] == ["id", "state", "attempts"] for row in screen)

    # The user's message, stored as typed, in a column narrow enough to fold the key over several lines.
    screen, _ = on_a_terminal(gateway, "sessions", "search", "mine", columns=50)
    header = next(i for i, row in enumerate(screen) if row.split()[:4] == ["id", "key", "#", "text"])
    at = screen[header].index("text")
    text = "".join("".join(row[at:].split()) for row in screen[header + 2:])   # the column's rows joined back
    assert text.count("[redacted]") == 2 and "OwnKey" not in text, screen


def test_json_is_the_same_bytes_on_a_terminal(gateway):
    for command in (("sessions", "list", "--json"), ("deliveries", "--json")):
        piped = gateway.cli(*command, check=True).stdout
        _, raw = on_a_terminal(gateway, *command)
        assert raw.decode().replace("\r\n", "\n") == piped, command   # the terminal's line ends are its own


def test_stop_on_a_terminal_spins_while_it_waits_and_leaves_its_answer_alone(gateway):
    """Last in this file: it stops the module's gateway."""
    screen, raw = on_a_terminal(gateway, "stop")
    assert b"stopping the gateway" in raw, "the spinner was drawn while the stop waited"
    assert len(screen) == 1 and "stopped gracefully in" in screen[0], screen   # and cleared once it was over
    gateway.assert_no_process_left()
