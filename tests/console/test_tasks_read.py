"""The console's read of background tasks (actors/console/operations.py ``tasks``) on a real SQLite store: a kept
result readable, redacted as `tasks show` prints it, a long one cut in a list (its whole in `tasks show`), and a
state that is none refused."""
from __future__ import annotations

import asyncio

import pytest

from actors.console import operations
from storage import TASK_PLATFORM, InboundItem, Store

pytestmark = pytest.mark.timeout(60)

CHAT = "default.fake.dm.chat-1"
CREDENTIAL = "sk-" + "Z" * 24


async def kept_task(store, result: str) -> str:
    started = await store.tasks.start(CHAT, "sid-1", "default", f"check {CREDENTIAL}", 5,
                                      lambda n: InboundItem(f"{CHAT}.task-{n}", TASK_PLATFORM, f"{CHAT}.task-{n}",
                                                            {"text": "check"}), "fake:m-1")
    await store.tasks.finish(started.task.task_key, "kept", result, "An earlier task #1 finished")
    return started.task.task_key


def test_a_kept_result_is_listed_redacted_and_a_long_one_cut(tmp_path):
    async def go():
        async with await Store.open(tmp_path / "gateway.db") as store:
            key = await kept_task(store, f"found {CREDENTIAL} and " + "x" * (operations.TASK_RESULT_CHARS + 50))
            [row] = (await operations.tasks(store, {"state": "kept"}, ("nothing-configured",)))["tasks"]
            with pytest.raises(operations.BadRequest, match="state must be one of"):
                await operations.tasks(store, {"state": "lost"})
            return key, row
    key, row = asyncio.run(asyncio.wait_for(go(), 30))
    assert (row["task_key"], row["state"]) == (key, "kept")
    assert CREDENTIAL not in row["prompt"] + row["result"] and row["result"].startswith("found [redacted] and x")
    assert f"cut at {operations.TASK_RESULT_CHARS} of" in row["result"] and f"tasks show {key}" in row["result"]
    assert len(row["result"]) < operations.TASK_RESULT_CHARS + 200
