"""The stored state from the admin CLI: sessions list/show/search/export/import/forget, deliveries list/retry."""
from __future__ import annotations

import json

import pytest

from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(120)
MESSAGE = "remember the word pelican\nand the second line of it"


def test_sessions_and_deliveries_from_the_cli(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    gw = Gateway(tmp_path / "a", extra_toml="[agent]\nchunk_delay_s = 0.0\n")
    try:
        gw.start()
        gw.cli("chat", "--as", "ada", "--message", MESSAGE, check=True)
        sessions = json.loads(gw.cli("sessions", "list", "--json", check=True).stdout)["sessions"]
        assert len(sessions) == 1 and sessions[0]["state"] == "active"
        sid = sessions[0]["session_id"]
        [header, row] = gw.cli("sessions", "list", check=True).stdout.splitlines()
        assert header.split()[:2] == ["id", "state"]
        short = row.split()[0]
        assert sid.startswith(short) and short == sessions[0]["short_id"]
        shown = json.loads(gw.cli("sessions", "show", short, "--json", check=True).stdout)
        assert [e["role"] for e in shown["events"]][:1] == ["user"] and shown["session"]["session_id"] == sid
        text = gw.cli("sessions", "show", sid[:6], check=True).stdout
        assert "remember the word pelican" in text and "and the second line of it" in text, "whole messages"
        assert "api_key_env" in text, "the answer whole too, to its last lines"
        hits = json.loads(gw.cli("sessions", "search", "pelican", "--json", check=True).stdout)
        assert hits["count"] >= 1
        found = gw.cli("sessions", "search", "pelican", check=True).stdout.splitlines()
        assert len(found) == hits["count"], "one line per hit"
        assert all(line.startswith(short) for line in found) and "second line" in found[0]
        deliveries = json.loads(gw.cli("deliveries", "--json", check=True).stdout)
        assert deliveries["counts"]["delivered"] == 1
        assert deliveries["deliveries"][0]["content_preview"].startswith('You said: "remember the word pelican')
        assert '“You said: "remember the word' in gw.cli("deliveries", check=True).stdout, "not the slot name"
        export = tmp_path / "session.bin"
        exported = gw.cli("sessions", "export", short, str(export), check=True)
        assert short in exported.stdout and export.stat().st_size > 0
    finally:
        gw.cli("stop")
        gw.kill_everything()
    # A move to a third state dir, with the source stopped: export with the live state, import (twice: the second
    # changes nothing), then forget at the source (twice too).
    (tmp_path / "c").mkdir()
    moved, third = tmp_path / "session.move", Gateway(tmp_path / "c")
    written = json.loads(gw.cli("sessions", "export", sid, str(moved), "--with-state", "--json", check=True).stdout)
    assert written["with_state"] and moved.read_bytes() != export.read_bytes()
    arrived = json.loads(third.cli("sessions", "import", str(moved), "--json", check=True).stdout)
    assert arrived["with_state"] and arrived["changed"] and arrived["session"]["session_id"] == sid
    assert "nothing changed" in third.cli("sessions", "import", str(moved), check=True).stdout
    gone = json.loads(gw.cli("sessions", "forget", str(moved), "--json", check=True).stdout)
    assert gone["changed"] and gone["last_seq"] == arrived["last_seq"] > 0
    assert "gone from here already: nothing changed" in gw.cli("sessions", "forget", str(moved), check=True).stdout
    other = Gateway(tmp_path / "b")   # never started: its state dir does not exist yet
    assert not other.state.exists()
    imported = json.loads(other.cli("sessions", "import", str(export), "--json", check=True).stdout)
    assert imported["session"]["session_id"] == sid and imported["session"]["state"] == "active"
    again = other.cli("sessions", "import", str(export))
    assert again.returncode == 1 and "nothing was changed" in again.stderr and "--as-new" in again.stderr
    copy = json.loads(other.cli("sessions", "import", str(export), "--as-new", "--json", check=True).stdout)
    assert copy["session"]["session_id"] != sid and copy["session"]["state"] == "closed"
    listed = json.loads(other.cli("sessions", "--json", check=True).stdout)["sessions"]   # list: the default
    assert {s["session_id"] for s in listed} == {sid, copy["session"]["session_id"]}
    corrupt = tmp_path / "corrupt.bin"
    corrupt.write_bytes(export.read_bytes()[:-10])
    refused = other.cli("sessions", "import", str(corrupt))
    assert refused.returncode == 1 and "error" in refused.stderr
    missing = other.cli("deliveries", "retry", "0" * 64)
    assert missing.returncode == 1 and "no obligation" in missing.stderr
    unknown = other.cli("sessions", "show", "zz-none", "--json")
    assert unknown.returncode == 1 and json.loads(unknown.stdout)["error"].startswith("error: no session")
    other.start()   # the gateway runs on the state dir the import made, with the imported session
    try:
        assert json.loads(other.cli("sessions", "show", sid, "--json", check=True).stdout)["events"]
    finally:
        other.cli("stop")
        other.kill_everything()
