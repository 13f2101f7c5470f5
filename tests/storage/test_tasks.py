"""Background tasks in storage (storage/tasks.py): a task is numbered per chat and written with its prompt's inbox
row in one transaction, within the chat's limit of tasks at once; its state moves once, from started; its inbox row
is the gateway's own, which the idle clock does not count as traffic."""
from __future__ import annotations

import itertools
import time

import pytest

from daemon.idle_exit import read_activity
from storage import TASK_PLATFORM, InboundItem, Store

pytestmark = pytest.mark.timeout(60)

CHAT = "default.fake.dm.chat-1"


def item_for(origin: str = CHAT):
    def make(number: int) -> InboundItem:
        key = f"{origin}.task-{number}"
        return InboundItem(key, TASK_PLATFORM, key, {"text": f"prompt {number}", "internal": True})
    return make


MESSAGES = itertools.count(1)


async def start(store, limit: int = 5, origin: str = CHAT, now: float = 100.0, ref: str = ""):
    ref = ref or f"fake:m-{next(MESSAGES)}"
    return await store.tasks.start(origin, "sid-1", "default", "look it up", limit, item_for(origin), ref, now)


async def test_a_task_is_numbered_per_chat_and_stored_with_its_prompts_inbox_row(db_path):
    async with await Store.open(db_path) as store:
        first, second = await start(store), await start(store)
        other = await start(store, origin="default.fake.dm.chat-2")
        assert [first.task.number, second.task.number, other.task.number] == [1, 2, 1]
        task = first.task
        assert (task.task_key, task.state, task.origin_session_id, task.prompt) == \
            (CHAT + ".task-1", "started", "sid-1", "look it up")
        row = await store.inbox.get(task.inbox_seq)
        assert (row.session_key, row.platform, row.platform_message_id, row.state) == \
            (task.task_key, TASK_PLATFORM, task.task_key, "received")
        assert [t.number for t in await store.tasks.of_chat(CHAT)] == [2, 1], "newest first"
        assert {t.origin_key for t in await store.tasks.numbered(1)} == {CHAT, "default.fake.dm.chat-2"}


async def test_a_message_handled_again_starts_nothing_new(db_path):
    async with await Store.open(db_path) as store:
        first = await start(store, ref="fake:bg-1")
        again = await start(store, ref="fake:bg-1")
        assert again.again and again.task == first.task and not first.again
        assert len(await store.tasks.of_chat(CHAT)) == 1 and (await store.inbox.counts())["received"] == 1


async def test_the_chats_limit_refuses_a_task_and_leaves_nothing_of_it(db_path):
    async with await Store.open(db_path) as store:
        for _ in range(3):
            assert (await start(store, limit=3)).task is not None
        refused = await start(store, limit=3)
        assert refused.task is None and refused.running == 3
        assert len(await store.tasks.of_chat(CHAT)) == 3 and (await store.inbox.counts())["received"] == 3
        await store.tasks.finish(CHAT + ".task-2", "done", "an answer", "Task #2 finished")
        assert (await start(store, limit=3)).task.number == 4, "a finished task frees its place"


async def test_a_task_finishes_once_and_a_second_decision_changes_nothing(db_path):
    async with await Store.open(db_path) as store:
        key = (await start(store)).task.task_key
        done = await store.tasks.finish(key, "kept", "the result", "the notice", now=200.0)
        assert (done.state, done.result, done.delivered, done.finished_at) == ("kept", "the result", "the notice",
                                                                                200.0)
        again = await store.tasks.finish(key, "done", "another", "another message", ({"name": "f.md"},), now=300.0)
        assert (again.state, again.result, again.delivered, again.delivered_files) == \
            ("kept", "the result", "the notice", ()), "the first decision stands"
        with pytest.raises(ValueError, match="finishes as one of"):
            await store.tasks.finish(key, "started", "", "")


async def test_a_cancel_marks_only_a_running_task(db_path):
    async with await Store.open(db_path) as store:
        first, second = (await start(store)).task, (await start(store)).task
        await store.tasks.finish(first.task_key, "done", "r", "m")
        assert not (await store.tasks.request_cancel(CHAT, 1)).cancel_requested, "a finished task is left as it is"
        assert (await store.tasks.request_cancel(CHAT, 2)).cancel_requested
        assert await store.tasks.request_cancel(CHAT, 9) is None
        files = await store.tasks.finish(second.task_key, "cancelled", "partial", "m", ({"name": "x.md"},))
        assert files.delivered_files == ({"name": "x.md"},)


async def test_a_tasks_prompt_is_no_platform_traffic_for_the_idle_clock(db_path):
    async with await Store.open(db_path) as store:
        await store.inbox.put(CHAT, "fake", "m-1", {"text": "hi"})
        await start(store, now=time.time() + 1000)   # the newest row: still not traffic
    async with await Store.open(db_path) as store:
        [platform_row] = [r for r in await store.inbox.rows_in_state(CHAT) if r.platform == "fake"]
    activity = await read_activity(db_path, "normal")
    assert activity.last_traffic == platform_row.received_at and activity.busy


async def test_retention_deletes_old_finished_tasks_but_running_ones_and_each_chats_newest(db_path):
    other = "default.fake.dm.chat-2"
    async with await Store.open(db_path) as store:
        old_done, old_kept, running, newest = [(await start(store, now=100.0)).task for _ in range(4)]
        await store.tasks.finish(old_done.task_key, "done", "r", "m", now=200.0)
        await store.tasks.finish(old_kept.task_key, "kept", "r", "m", now=200.0)
        await store.tasks.finish(newest.task_key, "failed", "r", "m", now=200.0)
        recent = (await start(store, origin=other, now=100.0)).task
        await store.tasks.finish(recent.task_key, "done", "r", "m", now=900.0)
        lone = (await start(store, origin="default.fake.dm.chat-3", now=100.0)).task
        await store.tasks.finish(lone.task_key, "done", "r", "m", now=200.0)
        assert await store.tasks.purge(500.0, now=1000.0) == 2
        assert [t.number for t in await store.tasks.of_chat(CHAT)] == [newest.number, running.number], \
            "the running task and the chat's newest stay"
        assert len(await store.tasks.of_chat(other)) == 1, "finished within the retention: kept"
        assert len(await store.tasks.of_chat("default.fake.dm.chat-3")) == 1, "a chat's only task is its newest"
        assert (await start(store, now=1000.0)).task.number == newest.number + 1, "numbers never come again"
        assert await store.tasks.purge(500.0, now=1000.0) == 1, "the newest no more: it goes at the next pass"
        assert [t.number for t in await store.tasks.of_chat(CHAT)] == [newest.number + 1, running.number]
