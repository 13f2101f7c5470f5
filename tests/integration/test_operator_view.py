"""What an operator reads: one INFO line per turn, no WARNING from a graceful stop, `config show` saying whose
configuration it shows, and `status`'s delivery count as the ledger is now (not as of the last sweep)."""
from __future__ import annotations

import asyncio
import json
import re

import pytest

from storage import Store, Target
from tests.fakes.openai_server import FakeOpenAIServer, agent_toml
from tests.gateway import DEFAULT_ADAPTERS_ANY_PORT, Gateway

pytestmark = pytest.mark.timeout(120)


def test_each_turn_is_one_info_line_and_a_graceful_stop_logs_no_warning(tmp_path):
    gw = Gateway(tmp_path, extra_toml=DEFAULT_ADAPTERS_ANY_PORT, test_hooks=False)
    try:
        gw.start()
        for text in ("hello", "again"):
            answer = gw.cli("chat", "--as", "ada", "--message", text, timeout=90)
            assert answer.returncode == 0, answer.stderr
        gw.wait_log("turn done in")
        stopped = gw.cli("stop", timeout=60)
        assert stopped.returncode == 0 and "gracefully" in stopped.stdout, stopped
    finally:
        gw.kill_everything()
    log = gw.log()
    turns = [line for line in log.splitlines() if " turn done in " in line]
    assert len(turns) == 2, turns
    for line in turns:
        assert " INFO " in line and re.search(r"turn done in \d+\.\d\ds", line), line
        assert re.search(r"session=[0-9a-f]{12} platform=cli turn=\w+ outcome=done seconds=\d", line), line
    shutdown = log[log.index("graceful shutdown"):]
    assert not [line for line in shutdown.splitlines() if " WARNING " in line or " ERROR " in line], shutdown


def test_a_turn_answered_by_a_model_logs_the_tokens_it_counted(tmp_path):
    with FakeOpenAIServer() as model:   # each answer ends with a usage chunk: 9 tokens in, 12 out
        gw = Gateway(tmp_path, extra_toml=DEFAULT_ADAPTERS_ANY_PORT + agent_toml(model), test_hooks=False)
        try:
            gw.start()
            answer = gw.cli("chat", "--as", "ada", "--message", "hello", timeout=90)
            assert answer.returncode == 0, answer.stderr
            gw.wait_log("turn done in")
        finally:
            gw.cli("stop", timeout=60)
            gw.kill_everything()
        assert model.requests and model.requests[0].body["stream_options"] == {"include_usage": True}
    [line] = [line for line in gw.log().splitlines() if " turn done in " in line]
    assert re.search(r"turn done in \d+\.\d\ds, 9 tokens in, 12 out ", line), line
    assert " tokens_in=9 tokens_out=12" in line, line


def test_config_show_says_whether_the_running_gateway_uses_what_it_shows(tmp_path):
    gw = Gateway(tmp_path, extra_toml=DEFAULT_ADAPTERS_ANY_PORT)
    shown = gw.cli("config", "show").stdout.splitlines()
    assert shown[0] == f"# {gw.config} as it reads now, over the defaults; secrets redacted.", shown[:2]
    assert shown[1] == "# No gateway runs on this state dir: this is what a start would use.", shown[:2]
    try:
        gw.start()
        shown = gw.cli("config", "show").stdout.splitlines()
        assert shown[1].startswith(f"# The running gateway (pid {gw.launcher_pid}) uses this reading"), shown[:2]
        gw.config.write_text(gw.config.read_text() + "\n[sessions]\nbusy_mode = \"steer\"\n")
        shown = json.loads(gw.cli("config", "show", "--json").stdout)
        assert "uses an earlier reading of it" in shown["note"] and "`reload` applies" in shown["note"], shown["note"]
        assert shown["running"]["pid"] == gw.launcher_pid
    finally:
        gw.cli("stop", timeout=60)
        gw.kill_everything()


def test_status_counts_a_delivery_the_moment_it_is_in_the_ledger(tmp_path):
    gw = Gateway(tmp_path, extra_toml=DEFAULT_ADAPTERS_ANY_PORT)   # the sweeper's own count: every 30 s

    async def a_reply_owed():
        store = await Store.open(gw.state / "gateway.db")
        try:   # to a platform this gateway does not run: nothing delivers it, it stays owed
            await store.ledger.record_obligation("default.nowhere.dm.1", "in-1", Target("nowhere", "1"), "owed")
        finally:
            await store.close()
    try:
        gw.start()
        before = json.loads(gw.cli("status", "--json").stdout)
        assert before["obligations_pending"] == 0, before
        asyncio.run(a_reply_owed())
        after = json.loads(gw.cli("status", "--json").stdout)
        assert after["obligations_pending"] == 1, after
        assert "deliveries   1 pending" in gw.cli("status").stdout
    finally:
        gw.cli("stop", timeout=60)
        gw.kill_everything()
