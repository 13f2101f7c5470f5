"""``tasks list|show`` (daemon/cli_tasks.py) over a database, without a gateway: a task named by its number or its
key, a number two chats share refused with the keys to choose from, a kept result shown whole and redacted."""
from __future__ import annotations

import asyncio
import json

import pytest

import run_gateway
from common import config as config_mod
from daemon.cli_tasks import cmd_tasks
from storage import TASK_PLATFORM, InboundItem, Store

pytestmark = pytest.mark.timeout(60)

SECRET = "sk-live-0123456789abcdefghijklmnop"


async def two_chats(db) -> None:
    async with await Store.open(db) as store:
        for chat in ("default.fake.dm.chat-a", "default.fake.dm.chat-b"):
            def item(number, chat=chat):
                key = f"{chat}.task-{number}"
                return InboundItem(key, TASK_PLATFORM, key, {"text": "p", "internal": True})
            await store.tasks.start(chat, "sid", "default", f"dig in {chat}", 5, item, f"fake:{chat}")
        await store.tasks.finish("default.fake.dm.chat-a.task-1", "kept", f"found it, key {SECRET}", "the notice")


def run(config, capsys, *argv) -> tuple[int, str]:
    code = cmd_tasks(config, run_gateway.build_parser().parse_args(["tasks", *argv]))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_tasks_are_listed_and_shown_by_number_or_key(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GATEWAY_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / "gateway.toml"
    path.write_text('[adapters.fake]\ntype = "fake"\nbase_url = "http://127.0.0.1:9"\n')
    config = config_mod.load(str(path))
    (tmp_path / "state").mkdir()
    asyncio.run(two_chats(tmp_path / "state" / "gateway.db"))
    code, shown = run(config, capsys, "list", "--json")
    assert code == 0 and {t["state"] for t in json.loads(shown)["tasks"]} == {"kept", "started"}
    code, shown = run(config, capsys, "list", "--state", "kept")
    assert code == 0 and "chat-a.task-1" in shown and "chat-b" not in shown
    code, shown = run(config, capsys, "show", "1")
    assert code == 1 and "2 chats have a task #1" in shown and "default.fake.dm.chat-b.task-1" in shown
    code, shown = run(config, capsys, "show", "default.fake.dm.chat-a.task-1")
    assert code == 0 and "state:    kept" in shown and "found it" in shown and "the notice" in shown
    assert SECRET not in shown, "redacted as everything the admin CLI prints"
    code, shown = run(config, capsys, "show", "default.fake.dm.chat-a.task-7")
    assert code == 1 and "no task" in shown
