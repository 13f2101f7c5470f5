"""The stored state from the admin CLI: sessions list/show/search/export/import, deliveries list/retry."""
from __future__ import annotations

import json

import pytest

from tests.daemon import Gateway

pytestmark = pytest.mark.timeout(120)


def test_sessions_and_deliveries_from_the_cli(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    gw = Gateway(tmp_path / "a", extra_toml="[agent]\nchunk_delay_s = 0.0\n")
    try:
        gw.start()
        gw.cli("chat", "--as", "ada", "--message", "remember the word pelican", check=True)
        sessions = json.loads(gw.cli("sessions", "list", "--json", check=True).stdout)["sessions"]
        assert len(sessions) == 1 and sessions[0]["state"] == "active"
        sid = sessions[0]["session_id"]
        shown = json.loads(gw.cli("sessions", "show", sid, "--json", check=True).stdout)
        assert [e["role"] for e in shown["events"]][:1] == ["user"]
        hits = json.loads(gw.cli("sessions", "search", "pelican", "--json", check=True).stdout)
        assert hits["count"] >= 1
        deliveries = json.loads(gw.cli("deliveries", "--json", check=True).stdout)
        assert deliveries["counts"]["delivered"] == 1
        export = tmp_path / "session.bin"
        gw.cli("sessions", "export", sid, str(export), check=True)
    finally:
        gw.cli("stop")
        gw.kill_everything()
    other = Gateway(tmp_path / "b")
    other.start()  # creates the database of the second instance
    try:
        imported = json.loads(other.cli("sessions", "import", str(export), "--json", check=True).stdout)
        assert imported["session"]["session_id"] == sid
        again = other.cli("sessions", "import", str(export))
        assert again.returncode == 1 and "nothing was changed" in again.stderr
        corrupt = tmp_path / "corrupt.bin"
        corrupt.write_bytes(export.read_bytes()[:-10])
        refused = other.cli("sessions", "import", str(corrupt))
        assert refused.returncode == 1 and "error" in refused.stderr
        missing = other.cli("deliveries", "retry", "0" * 64)
        assert missing.returncode == 1 and "no obligation" in missing.stderr
    finally:
        other.cli("stop")
        other.kill_everything()
