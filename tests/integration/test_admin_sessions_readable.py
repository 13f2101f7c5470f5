"""``sessions list|show|export`` for a person: who, how much, when, what was said and done, through the real CLI on
the real daemon's SQLite database.

``list`` has a header row and, for each session, its user, message count, last activity and a preview; ``show``
takes a user name or a platform chat id as well as an id (a name that fits several sessions lists them), and
prints each event's time and each tool call with its arguments; ``export --format markdown|json`` writes a
transcript to read, while the default export stays the msgpack file ``import`` reads.
"""
from __future__ import annotations

import json
import re
import stat

import pytest

from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(180)

STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    gw = Gateway(tmp_path_factory.mktemp("sessions_readable"), extra_toml="[agent]\nchunk_delay_s = 0.0\n")
    try:
        gw.start()
        gw.wait_ready()
        gw.cli("chat", "--as", "ada", "--message", "what is 12*7", check=True)         # a calculator call
        gw.cli("chat", "--as", "ada", "--message", "and now a second line", check=True)
        gw.cli("chat", "--as", "bob", "--message", "hello from bob", check=True)
        yield gw
    finally:
        gw.cli("stop")
        gw.kill_everything()


def listed(gw: Gateway) -> dict:
    return {s["user"]: s for s in json.loads(gw.cli("sessions", "list", "--json", check=True).stdout)["sessions"]}


def test_list_has_a_header_and_each_session_s_user_count_activity_and_preview(gateway):
    sessions = listed(gateway)
    ada = sessions["cli:ada"]
    assert ada["messages"] == 4 and sessions["cli:bob"]["messages"] == 2, sessions   # each message, each answer
    assert ada["preview"].startswith('You said: "and now a second line"'), ada
    lines = gateway.cli("sessions", "list", check=True).stdout.splitlines()
    assert lines[0].split() == ["id", "state", "last", "activity", "msgs", "user", "preview"], lines
    row = next(line for line in lines if ada["short_id"] in line)
    assert "cli:ada" in row and " 4 " in row and 'You said: "and now a second line"' in row, row
    assert STAMP.search(row), row


def test_show_takes_a_user_or_chat_and_prints_times_and_tool_calls_with_arguments(gateway):
    ada = listed(gateway)["cli:ada"]
    by_id = json.loads(gateway.cli("sessions", "show", ada["session_id"], "--json", check=True).stdout)
    for name in ("ada", "cli:ada"):
        shown = json.loads(gateway.cli("sessions", "show", name, "--json", check=True).stdout)
        assert shown["session"]["session_id"] == ada["session_id"], (name, shown["session"])
        assert shown["events"] == by_id["events"]
    text = gateway.cli("sessions", "show", "ada", check=True).stdout
    assert "cli:ada" in text.splitlines()[1] and "4 messages" in text.splitlines()[1], text
    call = next(line for line in text.splitlines() if "tool_call" in line)
    assert STAMP.search(call) and "calculator(" in call and '"expression": "12*7"' in call, text
    assert any("tool_result" in line and "84" in line for line in text.splitlines()), text
    assert all(STAMP.search(line) for line in text.splitlines() if re.match(r"\s+#\d", line)), text
    unknown = gateway.cli("sessions", "show", "nobody-here")
    assert unknown.returncode == 1 and "no session" in unknown.stderr, unknown.stderr


def test_a_name_that_fits_several_sessions_lists_them(gateway):
    bob = listed(gateway)["cli:bob"]
    prefix = bob["session_id"][:5]           # a user named like the start of bob's session id
    gateway.cli("chat", "--as", prefix, "--message", "my name looks like an id", check=True)
    mine = listed(gateway)[f"cli:{prefix}"]
    both = gateway.cli("sessions", "show", prefix)
    assert both.returncode == 1, both.stdout
    assert bob["short_id"] in both.stderr and mine["short_id"] in both.stderr, both.stderr
    assert "cli:bob" in both.stderr and f"cli:{prefix}" in both.stderr, both.stderr
    one = json.loads(gateway.cli("sessions", "show", f"cli:{prefix}", "--json", check=True).stdout)
    assert one["session"]["session_id"] == mine["session_id"]


def test_export_as_markdown_or_json_is_a_transcript_to_read_and_msgpack_stays_the_default(gateway, tmp_path):
    shown = json.loads(gateway.cli("sessions", "show", "ada", "--last", "1000", "--json", check=True).stdout)
    md, js, raw = tmp_path / "ada.md", tmp_path / "ada.json", tmp_path / "ada.export"
    gateway.cli("sessions", "export", "ada", str(md), "--format", "markdown", check=True)
    text = md.read_text()
    assert stat.S_IMODE(md.stat().st_mode) == 0o600
    assert text.startswith("# ") and "- user: cli:ada" in text, text[:300]
    assert "## User · " in text and "what is 12*7" in text and "## Assistant · " in text, text
    assert "**Tool call** `calculator`" in text and '"expression": "12*7"' in text, text
    assert STAMP.search(text.split("## User · ")[1]), text
    gateway.cli("sessions", "export", "ada", str(js), "--format", "json", check=True)
    exported = json.loads(js.read_text())
    assert exported["events"] == shown["events"] and exported["session"]["session_id"] == shown["session"]["session_id"]
    gateway.cli("sessions", "export", "ada", str(raw), check=True)
    assert raw.read_bytes()[:1] not in (b"#", b"{"), "the default is the msgpack export"
    refused = gateway.cli("sessions", "export", "ada", str(tmp_path / "x.md"), "--with-state", "--format", "markdown")
    assert refused.returncode == 2 and "--with-state" in refused.stderr, refused.stderr
